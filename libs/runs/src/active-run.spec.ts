import { buildSnapshot } from '@libs/authz';
import type { RunnerSession } from '@libs/runner-gateway';
import { ActiveRun } from './active-run';

const snapshot = (deadline: number | null = null) =>
  buildSnapshot({
    run_id: 'r1',
    scope: {
      agent_id: 'a',
      runner_id: 'plugin:x/y/default',
      plugin_id: 'x/y',
      conversation_id: 'c1',
      thread_id: null,
      bot_id: null,
      workspace_id: null,
      actor_type: null,
      actor_id: null,
      subject_type: null,
      subject_id: null,
    },
    manifest: { capabilities: {}, permissions: {} },
    policy: { resource: {}, state: {} },
    catalog: { models: [], tools: [], knowledge_bases: [] },
    limits: {
      max_payload_bytes: 1,
      max_state_value_bytes: 1,
      max_storage_value_bytes: 1,
      calls_per_second: 1,
      burst: 1,
    },
    deadline_at_ms: deadline,
  });

const run = () => new ActiveRun('r1', 'a', { session_id: 's1', plugin_id: 'x/y' } as RunnerSession, snapshot());

describe('ActiveRun', () => {
  afterEach(() => jest.useRealTimers());

  it('tracks accepted sequences: the host continues after the highest one', () => {
    const r = run();
    expect(r.acceptSequence(undefined)).toEqual({ accept: true, sequence: 1 });
    expect(r.acceptSequence(5)).toMatchObject({ accept: true, sequence: 5 });
    expect(r.acceptSequence(5)).toMatchObject({ accept: false });
    expect(r.acceptSequence(3)).toMatchObject({ accept: true, sequence: 3 });
    expect(r.last_sequence).toBe(5);
    expect(r.nextHostSequence()).toBe(6);
  });

  it('ends exactly once', () => {
    const r = run();
    expect(r.ended).toBe(false);
    expect(r.end()).toBe(true);
    expect(r.end()).toBe(false);
    expect(r.ended).toBe(true);
  });

  it('takes a cancel once and aborts in-flight calls', () => {
    const r = run();
    expect(r.requestCancel()).toBe(true);
    expect(r.abort.signal.aborted).toBe(true);
    expect(r.requestCancel()).toBe(false);
    expect(r.cancel_requested).toBe(true);
  });

  it('fires the deadline unless the run ended first; settle() stops the timers', () => {
    jest.useFakeTimers({ now: 1_000_000 });
    const expired = jest.fn();
    const a = run();
    a.armDeadline(1_000_000 + 500, expired);
    jest.advanceTimersByTime(499);
    expect(expired).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(expired).toHaveBeenCalledTimes(1);

    const b = run();
    const late = jest.fn();
    b.armDeadline(1_000_000 + 1000, late);
    b.armGrace(200, late);
    b.settle();
    jest.advanceTimersByTime(5000);
    expect(late).not.toHaveBeenCalled();
    expect(b.abort.signal.aborted).toBe(true);
  });

  it('re-arms a deadline beyond what one timer can hold', () => {
    jest.useFakeTimers({ now: 0 });
    const expired = jest.fn();
    const r = run();
    r.armDeadline(2 ** 31 + 10, expired);
    jest.advanceTimersByTime(2 ** 31 - 1);
    expect(expired).not.toHaveBeenCalled();
    jest.advanceTimersByTime(20);
    expect(expired).toHaveBeenCalledTimes(1);
  });

  it('runs its steps one after another in order, and a failing step does not stop the next', async () => {
    const r = run();
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

  it('keeps the first completed message and the streamed text for the assistant row', () => {
    const r = run();
    r.noteStreamed('Hel');
    r.noteStreamed('lo');
    r.noteAssistantMessage({ role: 'assistant', content: 'first' });
    r.noteAssistantMessage({ role: 'assistant', content: 'second' });
    expect(r.streamed).toBe('Hello');
    expect(r.assistantMessage).toEqual({ role: 'assistant', content: 'first' });
    r.noteStreamed(' again'); // after a completed message the streamed text is no longer needed
    expect(r.streamed).toBe('Hello');
  });

  it('sizes the message being streamed: deltas add up, all_content counts as it is, a completed message resets', () => {
    const r = run();
    expect(r.messageBytesWith(10, null)).toBe(10);
    r.noteMessageBytes(10);
    expect(r.messageBytesWith(5, null)).toBe(15);
    expect(r.messageBytesWith(5, 40)).toBe(40);
    r.noteMessageBytes(40);
    r.noteAssistantMessage({ role: 'assistant', content: 'done' });
    expect(r.messageBytesWith(3, null)).toBe(3);
  });
});
