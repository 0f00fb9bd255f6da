import type { RunnerSession } from '@libs/runner-gateway';
import { ActiveRun, type IncomingResult, type RunEnding } from './active-run';
import { testSnapshot } from './testing/snapshot';

const GRACE_MS = 300;

const snapshot = (deadline: number | null = null) =>
  testSnapshot({ deadline, conversation_id: 'c1', workspace_id: 'w1', burst: 2 });

/** A run and the ends its owner got (there must never be more than one). */
function run(deadline: number | null = null) {
  const ends: RunEnding[] = [];
  const r = new ActiveRun(
    {
      run_id: 'r1',
      agent_id: 'a',
      session: { session_id: 's1', plugin_id: 'x/y' } as RunnerSession,
      snapshot: snapshot(deadline),
    },
    { cancelGraceMs: GRACE_MS, onEnd: (e) => ends.push(e) },
  );
  return { r, ends };
}

const result = (type: string, sequence?: number | null, data: Record<string, unknown> = {}): IncomingResult => ({
  type,
  sequence,
  data,
  usage: null,
  timestamp: null,
});
const delta = (sequence: number, content: string, messageBytes = Buffer.byteLength(content)): IncomingResult => ({
  ...result('message.delta', sequence, { chunk: { content } }),
  messageBytes,
});
const completed = (sequence: number, finish_reason = 'stop') => result('run.completed', sequence, { finish_reason });
const failed = (sequence: number, code: string) =>
  result('run.failed', sequence, { error: `failed: ${code}`, code, retryable: true });

describe('ActiveRun: the run state machine (docs/architecture.md#the-life-of-a-run)', () => {
  afterEach(() => jest.useRealTimers());

  describe('results in', () => {
    it('accepts results under the sequence rules: the host continues after the highest one', () => {
      const { r } = run();
      expect(r.accept(result('tool.call.started', undefined))).toMatchObject({
        kind: 'accepted',
        row: { run_id: 'r1', sequence: 1, source: 'runner' },
        first: true,
        warning: null,
      });
      expect(r.accept(result('tool.call.started', 5))).toMatchObject({
        kind: 'accepted',
        first: false,
        warning: 'sequence gap: expected 2, got 5',
      });
      expect(r.accept(result('tool.call.started', 5))).toEqual({
        kind: 'dropped',
        reason: 'duplicate sequence 5: result dropped',
      });
      expect(r.accept(result('tool.call.started', 3))).toMatchObject({ kind: 'accepted', row: { sequence: 3 } });
      expect(r.last_sequence).toBe(5);
      expect(r.nextHostSequence()).toBe(6);
      expect(r.phase).toBe('running');
    });

    it('a terminal result decides the one end: completed with its finish reason', () => {
      const { r, ends } = run();
      r.accept(delta(1, 'Hi'));
      const intake = r.accept(completed(2, 'length'));
      expect(intake).toMatchObject({ kind: 'terminal', row: { type: 'run.completed', sequence: 2 } });
      expect(r.phase).toBe('ending');
      expect(r.ended).toBe(true);
      expect(ends).toHaveLength(1);
      expect(ends[0]).toMatchObject({
        cause: 'result',
        terminal: { type: 'run.completed', sequence: 2, source: 'runner' },
        outcome: { status: 'completed', status_reason: 'length', error_code: null, retryable: null },
      });
      expect(r.grant.signal.aborted).toBe(true); // in-flight host API calls stop
      expect(r.grant.active).toBe(false);
    });

    it('a signal taken while the run runs aborts (once) at its end; one taken after the end is aborted already', () => {
      const { r } = run();
      const signal = r.grant.signal;
      let aborts = 0;
      signal.addEventListener('abort', () => aborts++);
      expect(signal.aborted).toBe(false);
      expect(r.grant.signal).toBe(signal); // one signal per run
      r.accept(completed(1));
      expect(signal.aborted).toBe(true);
      expect(aborts).toBe(1);
      expect(r.grant.signal.aborted).toBe(true);
    });

    it.each([
      ['runner.error', 'failed', true],
      ['runner.timeout', 'timeout', true],
      ['cancelled', 'cancelled', false],
    ])('a run.failed {code: %s} ends the run %s', (code, status, retryable) => {
      const { r, ends } = run();
      r.accept(failed(1, code));
      expect(ends).toEqual([expect.objectContaining({ outcome: expect.objectContaining({ status, retryable }) })]);
    });

    it('nothing is accepted after the terminal result: later results are dropped, the end stays one', () => {
      const { r, ends } = run();
      r.accept(completed(1));
      expect(r.accept(result('message.delta', 2, { chunk: { content: 'late' } }))).toEqual({
        kind: 'dropped',
        reason: 'result dropped: the run already has a terminal result',
      });
      expect(r.accept(failed(3, 'runner.error'))).toMatchObject({ kind: 'dropped' });
      expect(r.fail({ status: 'failed', code: 'host.x', error: 'x', retryable: false })).toBe(false);
      expect(r.runnerLost('gone')).toBe(false);
      expect(r.cancel('too late')).toBe(false);
      expect(ends).toHaveLength(1);
      expect(r.last_sequence).toBe(1);
    });

    it('a duplicate terminal result is dropped by the sequence rules and does not end the run', () => {
      const { r, ends } = run();
      r.accept(result('tool.call.started', 1));
      expect(r.accept(completed(1))).toMatchObject({ kind: 'dropped' });
      expect(ends).toHaveLength(0);
      expect(r.phase).toBe('running');
    });
  });

  describe('verdicts in', () => {
    it('a host failure ends the run with the host’s run.failed after the last accepted sequence', () => {
      const { r, ends } = run();
      r.accept(result('tool.call.started', 4));
      expect(r.fail({ status: 'failed', code: 'host.dispatch_failed', error: 'not sent', retryable: false })).toBe(
        true,
      );
      expect(ends).toEqual([
        {
          cause: 'host',
          terminal: expect.objectContaining({
            sequence: 5,
            type: 'run.failed',
            source: 'host',
            data: { error: 'not sent', code: 'host.dispatch_failed', retryable: false },
          }),
          outcome: {
            status: 'failed',
            status_reason: 'not sent',
            error_code: 'host.dispatch_failed',
            retryable: false,
            usage: null,
          },
        },
      ]);
      expect(r.fail({ status: 'failed', code: 'host.other', error: 'again', retryable: false })).toBe(false);
      expect(ends).toHaveLength(1);
    });

    it('a lost runner fails the run retryable', () => {
      const { r, ends } = run();
      expect(r.runnerLost('stream closed')).toBe(true);
      expect(ends[0]).toMatchObject({
        cause: 'runner_lost',
        outcome: { status: 'failed', error_code: 'runner.disconnected', retryable: true },
      });
    });

    it('a lost runner of a cancelled run ends it cancelled', () => {
      jest.useFakeTimers();
      const { r, ends } = run();
      r.cancel('user');
      r.runnerLost('stream closed');
      expect(ends[0]).toMatchObject({
        cause: 'runner_lost',
        outcome: { status: 'cancelled', error_code: 'cancelled', retryable: false },
      });
      jest.advanceTimersByTime(GRACE_MS * 2);
      expect(ends).toHaveLength(1); // the grace timer stopped with the end
    });
  });

  describe('cancel', () => {
    it('takes one cancel: in-flight calls abort, the run keeps taking results while the grace runs', () => {
      jest.useFakeTimers();
      const { r, ends } = run();
      expect(r.cancel('user')).toBe(true);
      expect(r.phase).toBe('cancelling');
      expect(r.cancel_requested).toBe(true);
      expect(r.grant.cancel_requested).toBe(true);
      expect(r.grant.signal.aborted).toBe(true);
      expect(r.grant.active).toBe(true);
      expect(r.cancel('again')).toBe(false);
      expect(r.accept(result('tool.call.completed', 1))).toMatchObject({ kind: 'accepted' });
      expect(ends).toHaveLength(0);
    });

    it('the runner confirming within the grace ends it cancelled (whatever its code); a run.completed stays completed', () => {
      jest.useFakeTimers();
      const a = run();
      a.r.cancel('user');
      jest.advanceTimersByTime(GRACE_MS - 1);
      a.r.accept(failed(1, 'runner.error'));
      expect(a.ends).toEqual([
        expect.objectContaining({
          cause: 'result',
          outcome: expect.objectContaining({ status: 'cancelled', retryable: false }),
        }),
      ]);
      jest.advanceTimersByTime(GRACE_MS);
      expect(a.ends).toHaveLength(1);

      // docs/protocol.md#cancel: a runner that answers a cancel with run.completed is recorded completed.
      const b = run();
      b.r.cancel('user');
      b.r.accept(completed(1));
      expect(b.ends).toEqual([expect.objectContaining({ outcome: expect.objectContaining({ status: 'completed' }) })]);
      jest.advanceTimersByTime(GRACE_MS);
      expect(b.ends).toHaveLength(1);
    });

    it('without a confirmation the grace ends it cancelled, and late results are dropped', () => {
      jest.useFakeTimers();
      const { r, ends } = run();
      r.accept(result('tool.call.started', 1));
      r.cancel('user');
      jest.advanceTimersByTime(GRACE_MS - 1);
      expect(ends).toHaveLength(0);
      jest.advanceTimersByTime(1);
      expect(ends).toEqual([
        expect.objectContaining({
          cause: 'cancel',
          terminal: expect.objectContaining({ sequence: 2, source: 'host' }),
          outcome: expect.objectContaining({
            status: 'cancelled',
            status_reason: `cancelled (user); the runner did not confirm within ${GRACE_MS} ms`,
          }),
        }),
      ]);
      expect(r.accept(failed(2, 'cancelled'))).toMatchObject({ kind: 'dropped' });
      expect(r.accept(result('message.delta', 3, { chunk: { content: 'x' } }))).toMatchObject({ kind: 'dropped' });
      expect(ends).toHaveLength(1);
    });
  });

  describe('deadline', () => {
    it('fires at the deadline with a timeout, unless the run ended first', () => {
      jest.useFakeTimers({ now: 1_000_000 });
      const a = run(1_000_000 + 500);
      jest.advanceTimersByTime(499);
      expect(a.ends).toHaveLength(0);
      jest.advanceTimersByTime(1);
      expect(a.ends).toEqual([
        expect.objectContaining({
          cause: 'deadline',
          outcome: expect.objectContaining({ status: 'timeout', error_code: 'runner.timeout', retryable: true }),
        }),
      ]);

      const b = run(1_000_000 + 2000);
      b.r.accept(completed(1));
      jest.advanceTimersByTime(5000);
      expect(b.ends).toHaveLength(1);
      expect(b.ends[0].cause).toBe('result');
    });

    it('a deadline during the cancel grace times the run out; the grace then does nothing', () => {
      jest.useFakeTimers({ now: 0 });
      const { r, ends } = run(100);
      r.cancel('user');
      jest.advanceTimersByTime(100);
      expect(ends).toHaveLength(1);
      expect(ends[0].cause).toBe('deadline');
      jest.advanceTimersByTime(GRACE_MS);
      expect(ends).toHaveLength(1);
    });

    it('a deadline already passed fires at once (on the next tick)', () => {
      jest.useFakeTimers({ now: 10_000 });
      const { ends } = run(5_000);
      expect(ends).toHaveLength(0);
      jest.advanceTimersByTime(0);
      expect(ends).toHaveLength(1);
    });

    it('re-arms a deadline beyond what one timer can hold', () => {
      jest.useFakeTimers({ now: 0 });
      const { ends } = run(2 ** 31 + 10);
      jest.advanceTimersByTime(2 ** 31 - 1);
      expect(ends).toHaveLength(0);
      jest.advanceTimersByTime(20);
      expect(ends).toHaveLength(1);
    });
  });

  describe('the end out', () => {
    it('finished resolves once, with the written outcome, after settle', async () => {
      const { r, ends } = run();
      let outcome: unknown = null;
      void r.finished.then((o) => (outcome = o));
      r.accept(completed(1));
      await Promise.resolve();
      expect(outcome).toBeNull(); // decided is not written
      expect(r.phase).toBe('ending');
      const written = { ...ends[0].outcome, status: 'failed' as const, error_code: 'host.persistence_failed' };
      r.settle(written);
      expect(r.phase).toBe('ended');
      await expect(r.finished).resolves.toBe(written);
      expect(outcome).toBe(written);
    });

    it('settles only an ending run, and only once: a double end is impossible', () => {
      const { r, ends } = run();
      expect(() => r.settle({ status: 'completed', status_reason: null, error_code: null, retryable: null })).toThrow(
        /settle\(\) in phase running/,
      );
      r.fail({ status: 'failed', code: 'host.x', error: 'x', retryable: true });
      r.settle(ends[0].outcome);
      expect(() => r.settle(ends[0].outcome)).toThrow(/settle\(\) in phase ended/);
      expect(r.accept(completed(9))).toMatchObject({ kind: 'dropped' });
      expect(ends).toHaveLength(1);
    });
  });

  describe('the grant (the host API’s read-only view)', () => {
    it('names the caller, the workspace and the snapshot, and spends the call budget', () => {
      const { r } = run();
      expect(r.grant).toMatchObject({
        run_id: 'r1',
        plugin_id: 'x/y',
        runner_id: 'plugin:x/y/default',
        workspace_id: 'w1',
        snapshot: r.snapshot,
        active: true,
        cancel_requested: false,
      });
      expect(Object.isFrozen(r.grant)).toBe(true);
      expect(r.grant.budget.take()).toBe(true);
      expect(r.grant.budget.take()).toBe(true);
      expect(r.grant.budget.take()).toBe(false); // burst 2
    });
  });

  it('runs its steps one after another in order, and a failing step does not stop the next', async () => {
    const { r } = run();
    const order: number[] = [];
    const errors: unknown[] = [];
    const step =
      (n: number, fail = false) =>
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 5 - n));
        order.push(n);
        if (fail) {
          throw new Error(`step ${n}`);
        }
      };
    r.enqueue(step(1), (e) => errors.push(e));
    r.enqueue(step(2, true), (e) => errors.push(e));
    r.enqueue(step(3), (e) => errors.push(e));
    await new Promise<void>((resolve) =>
      r.enqueue(
        () => Promise.resolve(resolve()),
        () => undefined,
      ),
    );
    expect(order).toEqual([1, 2, 3]);
    expect(errors).toHaveLength(1);
  });

  it('keeps the first completed message and the text streamed before it for the assistant row', () => {
    const { r } = run();
    r.accept(delta(1, 'Hel'));
    r.accept(delta(2, 'lo'));
    r.accept(result('message.completed', 3, { message: { role: 'assistant', content: 'first' } }));
    r.accept(result('message.completed', 4, { message: { role: 'assistant', content: 'second' } }));
    expect(r.streamed).toBe('Hello');
    expect(r.assistantMessage).toEqual({ role: 'assistant', content: 'first' });
    r.accept(delta(5, ' again')); // after a completed message the streamed text is no longer needed
    expect(r.streamed).toBe('Hello');
  });

  it('sizes the message being streamed: accepted deltas add up, a completed message resets', () => {
    const { r } = run();
    expect(r.messageBytesWith(10, null)).toBe(10);
    r.accept(delta(1, 'x'.repeat(10)));
    expect(r.messageBytesWith(5, null)).toBe(15);
    expect(r.messageBytesWith(5, 40)).toBe(40);
    r.accept(delta(2, 'y', 40)); // a delta whose all_content counts 40 bytes
    expect(r.messageBytesWith(0, null)).toBe(40);
    r.accept(delta(2, 'dropped', 1000)); // a duplicate is not counted
    expect(r.messageBytesWith(0, null)).toBe(40);
    r.accept(result('message.completed', 3, { message: { role: 'assistant', content: 'done' } }));
    expect(r.messageBytesWith(3, null)).toBe(3);
  });

  it('hands out each result as sent, and what to store: a cumulative delta without its all_content (docs/durability.md#cumulative-deltas)', () => {
    const { r } = run();
    const cumulative = (sequence: number, content: string, all: string) =>
      result('message.delta', sequence, { chunk: { role: 'assistant', content, all_content: all } });
    const stored = (i: ReturnType<ActiveRun['accept']>) => (i.kind === 'dropped' ? null : i.stored);
    const first = r.accept(cumulative(1, 'ab', 'ab'));
    expect(stored(first)).toEqual({ chunk: { role: 'assistant', content: 'ab', all_content: 'ab' } });
    const second = r.accept(cumulative(2, 'c', 'abc'));
    expect(second.kind === 'accepted' && second.row.data).toEqual({
      chunk: { role: 'assistant', content: 'c', all_content: 'abc' },
    });
    expect(stored(second)).toEqual({ chunk: { role: 'assistant', content: 'c' }, '~a': [1, 2] });
    r.notStored(); // a write failed: the next delta is stored whole
    expect(stored(r.accept(cumulative(3, 'd', 'abcd')))).toEqual({
      chunk: { role: 'assistant', content: 'd', all_content: 'abcd' },
    });
  });
});
