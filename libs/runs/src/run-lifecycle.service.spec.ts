import { testSnapshot } from './testing/snapshot';
import type { AppConfig } from '@libs/config';
import type { StateService, TranscriptService } from '@libs/conversations';
import type { DeliveryService, RunDelivery } from '@libs/delivery';
import {
  FencedError,
  type NewResult,
  type RunEnd,
  type RunEntity,
  type RunsRepository,
  type StoredResult,
  type TakeOver,
  type TakeOverOutcome,
} from '@libs/persistence';
import type { RunnerSession } from '@libs/runner-gateway';
import type { ActiveRun } from './active-run';
import { ActiveRuns } from './active-runs';
import { InProcessSignals, type Signal } from './concurrency/signal-port';
import { RunLifecycleService } from './run-lifecycle.service';
import { RunStreamBus, type ResultView } from './run-stream.bus';

const GRACE_MS = 1_000;

const snapshotOf = (run_id: string, deadline: number | null = null, conversation_id: string | null = 'c1') =>
  testSnapshot({ run_id, deadline, conversation_id });

/** A deferred promise: the test decides when a write commits. */
function deferred<T = void>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** The runs repository port: records each write; `hold` keeps the next writes pending until released. */
class FakeRuns {
  readonly written: {
    kind: 'result' | 'end';
    row: NewResult;
    end?: RunEnd;
    assistant?: unknown;
    conversationKey?: string | null;
  }[] = [];
  /** What the end's unit reads: a run waits in the run's conversation. */
  waiting = false;
  readonly cancelRequested: string[] = [];
  failNextEnd = false;
  /** Every later write is refused by its fence (another process took the run over). */
  fenced = false;
  /** What the database says once another process ended a run: its status and stored results. */
  stored = new Map<string, { status: string; results: StoredResult[] }>();
  takeOvers: TakeOver[] = [];
  takeOverAnswer: TakeOverOutcome = { taken: false };
  pending: { resolve: () => void }[] = [];
  holding = false;
  active: Partial<RunEntity>[] = [];
  last = new Map<string, number>();

  private settle<T>(value: T): Promise<T> {
    if (!this.holding) {
      return Promise.resolve(value);
    }
    const d = deferred<void>();
    this.pending.push({ resolve: () => d.resolve() });
    return d.promise.then(() => value);
  }
  insertResult(row: NewResult): Promise<void> {
    if (this.fenced) {
      return Promise.reject(new FencedError({ run_id: row.run_id, attempt: 1, owner_process_id: 'p1' }));
    }
    this.written.push({ kind: 'result', row });
    return this.settle(undefined);
  }
  end(
    row: NewResult,
    end: RunEnd,
    _state: unknown = null,
    assistant: unknown = null,
    _outbox: unknown = [],
    _lease: unknown = null,
    conversationKey: string | null = null,
  ) {
    if (this.failNextEnd) {
      this.failNextEnd = false;
      return Promise.reject(new Error('disk full'));
    }
    if (this.fenced) {
      return Promise.reject(new FencedError({ run_id: row.run_id, attempt: 1, owner_process_id: 'p1' }));
    }
    this.written.push({ kind: 'end', row, end, assistant, conversationKey });
    return this.settle({ ended: true, released: 0, waiting: conversationKey !== null && this.waiting });
  }
  /** Runs whose cancel was requested in the database (by another process). */
  readonly requested = new Set<string>();
  cancelRequestedAmong(ids: readonly string[]): Promise<string[]> {
    return Promise.resolve(ids.filter((id) => this.requested.has(id)));
  }
  markCancelRequested(runId: string): Promise<void> {
    this.cancelRequested.push(runId);
    return Promise.resolve();
  }
  get(runId: string) {
    return Promise.resolve(this.active.find((r) => r.run_id === runId) ?? null);
  }
  takeOver(t: TakeOver) {
    this.takeOvers.push(t);
    return Promise.resolve(this.takeOverAnswer);
  }
  status(runId: string) {
    return Promise.resolve(this.stored.get(runId)?.status ?? 'running');
  }
  resultsAfter(runId: string, after: number) {
    return Promise.resolve((this.stored.get(runId)?.results ?? []).filter((r) => r.sequence > after));
  }
  lastSequence(runId: string) {
    return Promise.resolve(this.last.get(runId) ?? 0);
  }
  release() {
    this.holding = false;
    this.pending.splice(0).forEach((d) => d.resolve());
  }
}

/** The port on a shared bus: signals may be lost between processes, so waits poll. */
class SharedSignals extends InProcessSignals {
  readonly pollMs = 60_000;
}

function setup(signals: InProcessSignals = new InProcessSignals()) {
  const runs = new FakeRuns();
  const published: Signal[] = [];
  signals.subscribe('conversation', (s) => published.push(s));
  const active = new ActiveRuns();
  const bus = new RunStreamBus();
  const state = {
    scopeKey: (_k: unknown, scope: string) => `scope:${scope}`,
    normaliseKey: (k: string) => k,
    encode: (v: unknown) => JSON.stringify(v),
  } as unknown as StateService;
  const transcript = {
    assistantRow: (scope: { run_id: string }, message: Record<string, unknown>) => ({ run_id: scope.run_id, message }),
  } as unknown as TranscriptService;
  const delivery = { plan: { webhook: null }, onResult: () => [], onEnd: () => [] } as unknown as RunDelivery;
  const opened = jest.fn(() => delivery);
  const ended = jest.fn();
  const deliveries = {
    open: opened,
    rows: () => [],
    published: jest.fn(),
    end: ended,
    interrupted: () => Promise.resolve([]),
  } as unknown as DeliveryService;
  const config = { runs: { cancelGraceMs: GRACE_MS }, cluster: { pollMs: 1, leaseMs: 60_000 } } as AppConfig;
  const lifecycle = new RunLifecycleService(
    runs as unknown as RunsRepository,
    signals,
    active,
    bus,
    state,
    transcript,
    deliveries,
    config,
  );
  const sent: unknown[] = [];
  const session = {
    session_id: 's1',
    plugin_id: 'x/y',
    send: (m: unknown) => sent.push(m),
  } as unknown as RunnerSession;
  /** Starts a run and follows its results channel as a live reader would. */
  const start = (runId = 'r1', deadline: number | null = null, conversation: string | null = 'c1') => {
    const run = lifecycle.start(runId, { agent_id: 'a' }, session, snapshotOf(runId, deadline, conversation));
    const seen: ResultView[] = [];
    let complete = false;
    bus.follow(runId)!.subscribe({ next: (r) => seen.push(r), complete: () => (complete = true) });
    return { run, seen, done: () => complete };
  };
  return { lifecycle, runs, active, bus, signals, published, deliveries: { opened, ended }, sent, session, start };
}

const flush = async () => {
  for (let i = 0; i < 10; i++) {
    await Promise.resolve();
  }
};

const incoming = (type: string, sequence: number, data: Record<string, unknown> = {}) => ({
  type,
  sequence,
  data,
  usage: null,
  timestamp: null,
});

/** What the ingest does with a runner's result: the run takes it; an accepted one goes to the lifecycle. */
function ingest(lifecycle: RunLifecycleService, run: ActiveRun, type: string, sequence: number, data = {}) {
  const intake = run.accept(incoming(type, sequence, data));
  if (intake.kind === 'accepted') {
    lifecycle.accept(run, intake.row);
  }
  return intake;
}

describe('RunLifecycleService: the one owner of a run (docs/architecture.md#the-life-of-a-run)', () => {
  afterEach(() => jest.useRealTimers());

  it('start registers the run, opens its results channel and its delivery; its grant is the host API’s way in', () => {
    const { active, bus, deliveries, start } = setup();
    const { run } = start();
    expect(active.get('r1')).toBe(run);
    expect(active.grant('r1')).toBe(run.grant);
    expect(bus.follow('r1')).not.toBeNull();
    expect(deliveries.opened).toHaveBeenCalledTimes(1);
    expect(run.delivery).not.toBeNull();
  });

  it('shows a result to readers only after it committed, in the run’s order, then the terminal one, then ends the channel', async () => {
    const { lifecycle, runs, published, deliveries, start, active } = setup();
    const { run, seen, done } = start();
    runs.holding = true;
    ingest(lifecycle, run, 'message.completed', 1, { message: { role: 'assistant', content: 'hi' } });
    ingest(lifecycle, run, 'run.completed', 2, { finish_reason: 'stop' });
    await flush();
    expect(seen).toEqual([]); // nothing committed yet
    expect(runs.written.map((w) => [w.kind, w.row.sequence])).toEqual([
      ['result', 1],
      ['end', 2],
    ]);
    runs.release();
    await run.finished;
    expect(seen.map((r) => [r.sequence, r.type])).toEqual([
      [1, 'message.completed'],
      [2, 'run.completed'],
    ]);
    expect(done()).toBe(true);
    const end = runs.written[1];
    expect(end.end).toMatchObject({ status: 'completed', status_reason: 'stop', error_code: null });
    // The first completed message is the run's assistant transcript row, written with its end.
    expect(end.assistant).toEqual({ run_id: 'r1', message: { role: 'assistant', content: 'hi' } });
    expect(active.get('r1')).toBeUndefined();
    expect(run.phase).toBe('ended');
    expect(deliveries.ended).toHaveBeenCalledWith('r1');
    // The end read its conversation (by key); nothing waits in it: no signal (docs/scale-out.md#signal-bus).
    expect(end.conversationKey).toEqual(expect.any(String));
    expect(published).toEqual([]);
  });

  it('signals its conversation at the end only when a run waits in it (read by the end’s own unit)', async () => {
    const { lifecycle, runs, published, start } = setup();
    runs.waiting = true;
    const { run } = start();
    ingest(lifecycle, run, 'run.completed', 1);
    await run.finished;
    const key = runs.written[0].conversationKey;
    expect(key).toEqual(expect.any(String));
    expect(published).toEqual([{ kind: 'conversation', key }]);
  });

  it('a run without a conversation writes no assistant row and frees no conversation', async () => {
    const { lifecycle, runs, published, start } = setup();
    const { run } = start('r1', null, null);
    ingest(lifecycle, run, 'run.completed', 1, { message: { role: 'assistant', content: 'x' } });
    await run.finished;
    expect(runs.written[0].assistant).toBeNull();
    expect(published).toEqual([]);
  });

  it('an end that cannot be written becomes the host’s run.failed (host.persistence_failed), after the terminal sequence', async () => {
    const { lifecycle, runs, start } = setup();
    const { run, seen } = start();
    runs.failNextEnd = true;
    ingest(lifecycle, run, 'run.completed', 3);
    await expect(run.finished).resolves.toMatchObject({ status: 'failed', error_code: 'host.persistence_failed' });
    expect(runs.written).toHaveLength(1);
    expect(runs.written[0].row).toMatchObject({ sequence: 4, type: 'run.failed', source: 'host' });
    expect(seen.map((r) => [r.sequence, r.source])).toEqual([[4, 'host']]);
  });

  it('a host failure (conclude) writes the verdict once; a second verdict and late results change nothing', async () => {
    const { lifecycle, runs, start } = setup();
    const { run, seen } = start();
    ingest(lifecycle, run, 'tool.call.started', 1);
    lifecycle.conclude(run, { status: 'failed', code: 'host.dispatch_failed', error: 'not sent', retryable: false });
    lifecycle.conclude(run, { status: 'failed', code: 'host.other', error: 'again', retryable: true });
    expect(ingest(lifecycle, run, 'run.completed', 2)).toMatchObject({ kind: 'dropped' });
    await run.finished;
    expect(runs.written.filter((w) => w.kind === 'end')).toHaveLength(1);
    expect(runs.written[1]).toMatchObject({
      row: { sequence: 2, source: 'host' },
      end: { status: 'failed', error_code: 'host.dispatch_failed' },
    });
    expect(seen.map((r) => r.sequence)).toEqual([1, 2]);
  });

  it('cancel: recorded, sent to the runner, and without a confirmation the grace ends the run cancelled', async () => {
    jest.useFakeTimers();
    const { lifecycle, runs, sent, start } = setup();
    const { run } = start();
    let cancelled = false;
    const cancel = lifecycle.cancel(run, 'user asked').then(() => (cancelled = true));
    await Promise.resolve();
    expect(runs.cancelRequested).toEqual(['r1']);
    expect(sent).toEqual([{ cancel: { run_id: 'r1', reason: 'user asked' } }]);
    expect(run.grant.signal.aborted).toBe(true);
    // A second cancel (another caller) sends nothing more and waits for the same end.
    const again = lifecycle.cancel(run, 'again');
    jest.advanceTimersByTime(GRACE_MS - 1);
    await Promise.resolve();
    expect(cancelled).toBe(false);
    jest.advanceTimersByTime(1);
    jest.useRealTimers();
    await Promise.all([cancel, again]);
    expect(sent).toHaveLength(1);
    expect(runs.written).toEqual([
      expect.objectContaining({
        kind: 'end',
        end: expect.objectContaining({ status: 'cancelled', error_code: 'cancelled' }),
      }),
    ]);
  });

  it('cancel then the runner’s confirmation: the run ends cancelled with the runner’s result; late results are dropped', async () => {
    jest.useFakeTimers();
    const { lifecycle, runs, start } = setup();
    const { run, seen } = start();
    const cancel = lifecycle.cancel(run, 'user');
    await Promise.resolve();
    ingest(lifecycle, run, 'run.failed', 1, { error: 'stopped', code: 'cancelled', retryable: false });
    expect(ingest(lifecycle, run, 'message.delta', 2, { chunk: { content: 'late' } })).toMatchObject({
      kind: 'dropped',
    });
    jest.useRealTimers();
    await cancel;
    expect(runs.written).toEqual([
      expect.objectContaining({ kind: 'end', row: expect.objectContaining({ source: 'runner', sequence: 1 }) }),
    ]);
    expect(runs.written[0].end).toMatchObject({ status: 'cancelled', retryable: false });
    expect(seen.map((r) => r.sequence)).toEqual([1]);
  });

  it('the deadline sends the runner a cancel and ends the run timeout', async () => {
    jest.useFakeTimers({ now: 1_000 });
    const { runs, sent, start } = setup();
    const { run } = start('r1', 1_500);
    jest.advanceTimersByTime(500);
    expect(sent).toEqual([{ cancel: { run_id: 'r1', reason: 'deadline exceeded' } }]);
    jest.useRealTimers();
    await run.finished;
    expect(runs.written[0].end).toMatchObject({ status: 'timeout', error_code: 'runner.timeout', retryable: true });
  });

  it('a lost session ends its runs runner.disconnected; runs of other sessions go on', async () => {
    const { lifecycle, runs, start, session, active } = setup();
    const { run } = start('r1');
    const other = lifecycle.start('r2', { agent_id: 'a' }, { ...session, session_id: 's2' }, snapshotOf('r2'));
    lifecycle.onDisconnected(session, 'stream closed');
    await run.finished;
    expect(runs.written[0]).toMatchObject({
      row: { run_id: 'r1' },
      end: { status: 'failed', error_code: 'runner.disconnected', retryable: true },
    });
    expect(other.ended).toBe(false);
    expect(active.get('r2')).toBe(other);
  });

  it('an interrupt signal cancels the run through the cancel path', async () => {
    const { lifecycle, runs, sent, signals, start } = setup();
    lifecycle.onModuleInit();
    const { run } = start();
    signals.publish({ kind: 'cancel', run_id: 'r1', reason: 'interrupted by a newer event' });
    await flush();
    expect(runs.cancelRequested).toEqual(['r1']);
    expect(sent).toEqual([{ cancel: { run_id: 'r1', reason: 'interrupted by a newer event' } }]);
    expect(run.cancel_requested).toBe(true);
    lifecycle.onModuleDestroy();
    lifecycle.conclude(run, { status: 'failed', code: 'host.test', error: 'end', retryable: false });
    await run.finished;
  });

  it('a takeover of a started run shows its terminal to the readers here and frees its conversation', async () => {
    const { lifecycle, runs, bus, published } = setup();
    runs.active = [{ run_id: 'left', status: 'running', agent_id: 'a', context: {} }];
    runs.takeOverAnswer = {
      taken: true,
      kind: 'interrupted',
      attempt: 2,
      sequence: 8,
      released: 1,
      conversation_key: 'k1',
    };
    bus.open('left');
    const seen: ResultView[] = [];
    let complete = false;
    bus.follow('left')!.subscribe({ next: (r) => seen.push(r), complete: () => (complete = true) });
    expect(await lifecycle.takeOver({ run_id: 'left', owner_process_id: 'dead', attempt: 1 })).toBe(true);
    expect(runs.takeOvers).toEqual([
      expect.objectContaining({
        orphan: { run_id: 'left', owner_process_id: 'dead', attempt: 1 },
        terminal: expect.objectContaining({ run_id: 'left', type: 'run.failed', source: 'host' }),
        end: expect.objectContaining({ status: 'interrupted', error_code: 'host.interrupted', retryable: true }),
      }),
    ]);
    expect(seen).toEqual([expect.objectContaining({ run_id: 'left', sequence: 8, type: 'run.failed' })]);
    expect(complete).toBe(true);
    expect(published).toEqual([{ kind: 'conversation', key: 'k1' }]);
  });

  it('a takeover another sweeper won (or of a run that is not running) changes nothing', async () => {
    const { lifecycle, runs, published } = setup();
    runs.active = [{ run_id: 'gone', status: 'completed', agent_id: 'a' }];
    expect(await lifecycle.takeOver({ run_id: 'gone', owner_process_id: 'dead', attempt: 1 })).toBe(false);
    expect(await lifecycle.takeOver({ run_id: 'unknown', owner_process_id: 'dead', attempt: 1 })).toBe(false);
    expect(runs.takeOvers).toEqual([]);
    expect(published).toEqual([]);
  });

  it("a fenced result write drops the run here: nothing more written, the runner told, readers see the new owner's end", async () => {
    const { lifecycle, runs, active, sent, start } = setup();
    const { run, seen, done } = start();
    runs.fenced = true;
    runs.stored.set('r1', {
      status: 'interrupted',
      results: [
        {
          run_id: 'r1',
          sequence: 1,
          type: 'run.failed',
          data: { code: 'host.interrupted' },
          usage: null,
          source: 'host',
          timestamp: null,
        },
      ],
    });
    ingest(lifecycle, run, 'message.delta', 1, { chunk: { content: 'x' } });
    const outcome = await run.finished;
    expect(outcome).toEqual(expect.objectContaining({ status: 'interrupted', error_code: 'host.fenced' }));
    expect(run.ended).toBe(true);
    expect(active.get('r1')).toBeUndefined();
    expect(runs.written).toEqual([]);
    expect(sent).toEqual([{ cancel: { run_id: 'r1', reason: expect.stringMatching(/^host\.fenced/) } }]);
    for (let i = 0; i < 50 && !done(); i++) {
      await new Promise((r) => setImmediate(r));
    }
    expect(seen).toEqual([expect.objectContaining({ sequence: 1, type: 'run.failed', source: 'host' })]);
    expect(done()).toBe(true);
    // A later result of the runner is dropped: the run is over here.
    expect(run.accept(incoming('message.delta', 2)).kind).toBe('dropped');
  });

  it("a fenced end is not replaced by the host's own failure: the new owner writes the end", async () => {
    const { lifecycle, runs, start } = setup();
    const { run } = start();
    runs.fenced = true;
    runs.stored.set('r1', { status: 'interrupted', results: [] });
    ingest(lifecycle, run, 'run.completed', 1, { finish_reason: 'stop' });
    const outcome = await run.finished;
    expect(outcome).toEqual(expect.objectContaining({ status: 'interrupted', error_code: 'host.fenced' }));
    expect(runs.written).toEqual([]);
  });

  it('dropAll drops every run active here without writing (the self-fence)', async () => {
    const { lifecycle, runs, active, start } = setup();
    const a = start('r1').run;
    const b = start('r2', null, 'c2').run;
    runs.stored.set('r1', { status: 'interrupted', results: [] });
    runs.stored.set('r2', { status: 'interrupted', results: [] });
    expect(lifecycle.dropAll()).toBe(2);
    expect((await a.finished).error_code).toBe('host.fenced');
    expect((await b.finished).error_code).toBe('host.fenced');
    expect(active.all()).toEqual([]);
    expect(runs.written).toEqual([]);
  });
});

describe('RunLifecycleService on a shared bus (docs/scale-out.md#everything-from-anywhere-reads-cancel-steering)', () => {
  it('the owner cancels a run whose cancel another process requested, read by its poll, once', async () => {
    const { lifecycle, runs, sent, start } = setup(new SharedSignals());
    const { run } = start('r1');
    start('r2');
    await lifecycle.pollCancels();
    expect(sent).toEqual([]);
    runs.requested.add('r1');
    await lifecycle.pollCancels();
    expect(sent).toEqual([{ cancel: { run_id: 'r1', reason: 'cancelled by request' } }]);
    expect(run.cancel_requested).toBe(true);
    await lifecycle.pollCancels();
    expect(sent).toHaveLength(1);
  });

  it('sends one results signal per run per commit group, after the commit; none in one process', async () => {
    const shared = setup(new SharedSignals());
    shared.lifecycle.onModuleInit();
    const signalled: string[] = [];
    shared.signals.subscribe('results', (s) => signalled.push(s.run_id));
    const { run } = shared.start('r1');
    shared.signals.publish({ kind: 'follow', run_id: 'r1' }); // another process follows it
    await new Promise((r) => setImmediate(r));
    expect(signalled).toEqual(['r1']); // newly followed while active: one signal at once
    signalled.length = 0;
    shared.runs.holding = true;
    ingest(shared.lifecycle, run, 'message.delta', 1, { chunk: { content: 'a' } });
    ingest(shared.lifecycle, run, 'message.delta', 2, { chunk: { content: 'b' } });
    await flush();
    await new Promise((r) => setImmediate(r));
    expect(signalled).toEqual([]); // nothing committed yet
    shared.runs.release();
    await flush();
    await new Promise((r) => setImmediate(r));
    expect(signalled).toEqual(['r1']);

    const alone = setup();
    const none: string[] = [];
    alone.signals.subscribe('results', (s) => none.push(s.run_id));
    const one = alone.start('r1');
    ingest(alone.lifecycle, one.run, 'message.delta', 1, { chunk: { content: 'a' } });
    await flush();
    await new Promise((r) => setImmediate(r));
    expect(none).toEqual([]);
    shared.lifecycle.onModuleDestroy();
  });

  it('sends no results signal for a run no process follows', async () => {
    const shared = setup(new SharedSignals());
    shared.lifecycle.onModuleInit();
    const signalled: string[] = [];
    shared.signals.subscribe('results', (s) => signalled.push(s.run_id));
    const { run } = shared.start('r1');
    ingest(shared.lifecycle, run, 'message.delta', 1, { chunk: { content: 'a' } });
    await flush();
    await new Promise((r) => setImmediate(r));
    expect(signalled).toEqual([]);
    shared.lifecycle.onModuleDestroy();
  });
});
