import type { AppConfig } from '@libs/config';
import type { AgentEntity, SteeringRepository, SteeringRow } from '@libs/persistence';
import type { RunnerPresence } from '@libs/runner-gateway';
import type { AdmissionCatalog } from '../admission-catalog';
import type { RunLifecycleService } from '../run-lifecycle.service';
import type { PreparedRun, RunStarter } from '../run-start';
import type { RunLeases } from '../run-leases.service';
import type { WorkspaceQuotaGate } from '../workspace-quotas';
import { ConversationDispatcher, QUOTA_RETRY_MS } from './conversation-dispatcher';
import { InProcessSignals, type SignalPort } from './signal-port';

const KEY = 'k1';

function item(id: number, createdAt = Date.now()): SteeringRow {
  return {
    id,
    conversation_key: KEY,
    agent_id: 'agent-1',
    runner_id: 'plugin:a/b/default',
    conversation_id: 'c1',
    thread_id: null,
    workspace_id: null,
    event_id: `e${id}`,
    kind: 'queue',
    state: 'waiting',
    run_id: null,
    position: null,
    next_run_id: `run-${id}`,
    dispatch: 'waiting',
    item: {},
    submission: {
      agent_id: 'agent-1',
      event: { event_type: 'message.received', source: 'test' },
      input: { text: `m${id}` },
    },
    created_at: createdAt,
    redispatched_at: null,
  };
}

/** A conversation's waiting items and what the dispatcher did with them. */
function setup(opts: {
  waiting: SteeringRow[];
  runner?: () => boolean;
  waitMs?: number;
  running?: boolean;
  signals?: SignalPort;
  /** Whether another live process holds the runner (runner presence). */
  elsewhere?: () => boolean;
  /** The workspace's max_active_runs is reached (the start unit answers 'quota', nothing written). */
  quotaFull?: () => boolean;
  /** What the count read before a retried start says (default: quotaFull); the unit still decides. */
  countFull?: () => boolean;
}) {
  const log: string[] = [];
  let prepares = 0;
  const waiting = [...opts.waiting];
  let running = opts.running ?? false;
  const steering = {
    releaseOrphans: () => Promise.resolve(0),
    waitingConversations: () => Promise.resolve(waiting.length > 0 ? [KEY] : []),
    nextWaiting: () => Promise.resolve(waiting[0] ?? null),
    situation: () =>
      Promise.resolve({ running_run_id: running ? 'run-x' : null, queued_on_run: 0, waiting: waiting.length }),
    startWaiting: (s: { item_id: number; active_quota?: { workspace_id: string; max: number } | null }) => {
      log.push(`quota ${s.active_quota ? `${s.active_quota.workspace_id}/${s.active_quota.max}` : 'none'}`);
      if (opts.quotaFull?.()) {
        return Promise.resolve({ started: false, why: 'quota' });
      }
      waiting.shift();
      running = true;
      log.push(`start ${s.item_id}`);
      return Promise.resolve({ started: true, event_seq: 7 });
    },
    activeQuotaReached: (q: { workspace_id: string; max: number }) => {
      log.push(`count ${q.workspace_id}/${q.max}`);
      return Promise.resolve((opts.countFull ?? opts.quotaFull ?? (() => false))());
    },
    failQueued: (itemId: number, _t: unknown, end: { error_code: string }) => {
      waiting.shift();
      log.push(`fail ${itemId} ${end.error_code}`);
      return Promise.resolve(true);
    },
  } as unknown as SteeringRepository;
  const prepared = (runId: string) =>
    ({
      run: {
        run_id: runId,
        context: { context: {} },
        authorization: {},
        authorization_hash: 'h',
        started_at: 1,
        deadline_at: null,
      },
      context: { context: {} },
    }) as unknown as PreparedRun;
  const starter = {
    prepare: (runId: string) => {
      prepares++;
      return Promise.resolve(prepared(runId));
    },
    whileStarting: <T>(_p: PreparedRun, _key: string, done: () => Promise<T>) => done(),
    dispatch: (p: PreparedRun, _a: unknown, _l: unknown, eventSeq: number) =>
      log.push(`dispatch ${p.run.run_id}${eventSeq === 7 ? '' : ` (event_seq ${eventSeq})`}`),
  } as unknown as RunStarter;
  // The runner lookup: `runner()` (live connections) or `target()` (the runner dispatch port).
  const live = () => ((opts.runner ?? (() => true))() ? { session: {}, runner: {} } : undefined);
  const connections = { runner: live, target: live } as unknown as ConstructorParameters<
    typeof ConversationDispatcher
  >[4];
  const catalog = {
    agent: () => Promise.resolve({ agent_id: 'agent-1', runner_id: 'plugin:a/b/default' } as AgentEntity),
  };
  const lifecycle = {
    endedWaiting: () => undefined,
  } as unknown as RunLifecycleService;
  const config = { runs: { runnerWaitMs: opts.waitMs ?? 10_000 } } as AppConfig;
  const dispatcher = new ConversationDispatcher(
    steering,
    lifecycle,
    starter,
    catalog as unknown as AdmissionCatalog,
    connections,
    opts.signals ?? new InProcessSignals(),
    config,
    { heldElsewhere: () => Promise.resolve((opts.elsewhere ?? (() => false))()) } as unknown as RunnerPresence,
    { recover: () => Promise.resolve(0) } as unknown as RunLeases,
    {
      activeQuota: (w: string) => (opts.quotaFull ? { workspace_id: w, max: 2 } : null),
    } as unknown as WorkspaceQuotaGate,
  );
  const free = () => {
    running = false;
  };
  return { dispatcher, log, free, waiting, prepares: () => prepares };
}

const settle = async (d: ConversationDispatcher) => {
  for (let i = 0; i < 50 && (d as unknown as { drivers: Map<string, unknown> }).drivers.size > 0; i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('ConversationDispatcher', () => {
  it('starts the oldest waiting run when the conversation is free, and only that one', async () => {
    const { dispatcher, log, free } = setup({ waiting: [item(1), item(2)] });
    dispatcher.kick(KEY);
    await settle(dispatcher);
    expect(log).toEqual(['quota none', 'start 1', 'dispatch run-1']);
    free(); // run-1 ended: the next one starts on the next kick
    dispatcher.kick(KEY);
    await settle(dispatcher);
    expect(log).toEqual(['quota none', 'start 1', 'dispatch run-1', 'quota none', 'start 2', 'dispatch run-2']);
  });

  it('does nothing while a run is running', async () => {
    const { dispatcher, log } = setup({ waiting: [item(1)], running: true });
    dispatcher.kick(KEY);
    await settle(dispatcher);
    expect(log).toEqual([]);
  });

  it('waits for the runner to connect within the bound', async () => {
    let connected = false;
    setTimeout(() => (connected = true), 150);
    const { dispatcher, log } = setup({ waiting: [item(1)], runner: () => connected, waitMs: 5_000 });
    dispatcher.kick(KEY);
    await settle(dispatcher);
    expect(log).toEqual(['quota none', 'start 1', 'dispatch run-1']);
  });

  it('fails runs whose bound passed without a runner (runner.unavailable), oldest first, then goes on', async () => {
    const old = Date.now() - 60_000;
    const { dispatcher, log } = setup({ waiting: [item(1, old), item(2, old)], runner: () => false, waitMs: 100 });
    dispatcher.kick(KEY);
    await settle(dispatcher);
    expect(log).toEqual(['fail 1 runner.unavailable', 'fail 2 runner.unavailable']);
  });

  it('fails a waiting run whose stored submission lost its shape (host.dispatch_failed), then starts the next', async () => {
    const broken = { ...item(1), submission: { input: { text: 'm1' } } };
    const { dispatcher, log } = setup({ waiting: [broken, item(2)] });
    dispatcher.kick(KEY);
    await settle(dispatcher);
    expect(log).toEqual(['fail 1 host.dispatch_failed', 'quota none', 'start 2', 'dispatch run-2']);
  });

  it('leaves a waiting run whose runner another process holds to that process: neither started nor failed', async () => {
    const old = Date.now() - 60_000;
    const { dispatcher, log, waiting } = setup({
      waiting: [item(1, old)],
      runner: () => false,
      elsewhere: () => true,
      waitMs: 100,
    });
    dispatcher.kick(KEY);
    await settle(dispatcher);
    expect(log).toEqual([]);
    expect(waiting).toHaveLength(1);
  });

  it('leaves a waiting run once its runner connects to another process while it waited for it', async () => {
    let elsewhere = false;
    setTimeout(() => (elsewhere = true), 100);
    const { dispatcher, log, waiting } = setup({
      waiting: [item(1)],
      runner: () => false,
      elsewhere: () => elsewhere,
      waitMs: 5_000,
    });
    dispatcher.kick(KEY);
    for (let i = 0; i < 200 && (dispatcher as unknown as { drivers: Map<string, unknown> }).drivers.size > 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(log).toEqual([]);
    expect(waiting).toHaveLength(1);
  });

  it('coalesces kicks: one driver per conversation, one more round after it', async () => {
    const { dispatcher, log } = setup({ waiting: [item(1)] });
    dispatcher.kick(KEY);
    dispatcher.kick(KEY);
    dispatcher.kick(KEY);
    await settle(dispatcher);
    expect(log).toEqual(['quota none', 'start 1', 'dispatch run-1']);
  });

  describe("the workspace's max_active_runs at the start of a waiting run", () => {
    beforeEach(() => jest.useFakeTimers());
    afterEach(() => jest.useRealTimers());

    it('keeps a run that would exceed the limit waiting (neither started nor failed), and starts it once a slot frees', async () => {
      let full = true;
      const { dispatcher, log, waiting } = setup({ waiting: [item(1), item(2)], quotaFull: () => full });
      dispatcher.kick(KEY);
      await jest.advanceTimersByTimeAsync(0);
      // Counted in the start unit against the agent's workspace (the default one here).
      expect(log).toEqual(['quota default/2']);
      expect(waiting.map((w) => w.id)).toEqual([1, 2]);
      await jest.advanceTimersByTimeAsync(QUOTA_RETRY_MS - 1);
      expect(log).toEqual(['quota default/2']);
      await jest.advanceTimersByTimeAsync(1); // tried again: still full (counted before anything is prepared)
      expect(log).toEqual(['quota default/2', 'count default/2']);
      full = false; // a run of the workspace ended (in any conversation): no signal reaches this one
      await jest.advanceTimersByTimeAsync(QUOTA_RETRY_MS);
      expect(log).toEqual([
        'quota default/2',
        'count default/2',
        'count default/2',
        'quota default/2',
        'start 1',
        'dispatch run-1',
      ]);
      expect(waiting.map((w) => w.id)).toEqual([2]); // the next one waits behind it, in order
      await dispatcher.onModuleDestroy();
    });

    it('a blocked retry costs one count: the run is prepared once per try the unit decides, not every second', async () => {
      let full = true;
      const { dispatcher, log, prepares } = setup({ waiting: [item(1)], quotaFull: () => full });
      dispatcher.kick(KEY);
      await jest.advanceTimersByTimeAsync(0);
      expect(prepares()).toBe(1); // the first try: prepared, refused by the start unit
      await jest.advanceTimersByTimeAsync(10 * QUOTA_RETRY_MS);
      expect(prepares()).toBe(1);
      expect(log.filter((l) => l.startsWith('count'))).toHaveLength(10);
      expect(log.filter((l) => l.startsWith('quota'))).toHaveLength(1);
      full = false;
      await jest.advanceTimersByTimeAsync(QUOTA_RETRY_MS);
      expect(prepares()).toBe(2);
      expect(log.slice(-2)).toEqual(['start 1', 'dispatch run-1']);
      await dispatcher.onModuleDestroy();
    });

    it('the start unit still decides: a count that saw a free slot (taken meanwhile) keeps the run waiting', async () => {
      const { dispatcher, log, waiting, prepares } = setup({
        waiting: [item(1)],
        quotaFull: () => true,
        countFull: () => false,
      });
      dispatcher.kick(KEY);
      await jest.advanceTimersByTimeAsync(QUOTA_RETRY_MS);
      expect(log).toEqual(['quota default/2', 'count default/2', 'quota default/2']);
      expect(prepares()).toBe(2);
      expect(waiting.map((w) => w.id)).toEqual([1]);
      await dispatcher.onModuleDestroy();
    });

    it('a start that went through forgets the block: the next waiting run of the conversation is not counted first', async () => {
      let full = true;
      const { dispatcher, log, free } = setup({ waiting: [item(1), item(2)], quotaFull: () => full });
      dispatcher.kick(KEY);
      await jest.advanceTimersByTimeAsync(0);
      full = false;
      await jest.advanceTimersByTimeAsync(QUOTA_RETRY_MS);
      free();
      log.length = 0;
      dispatcher.kick(KEY);
      await jest.advanceTimersByTimeAsync(0);
      expect(log).toEqual(['quota default/2', 'start 2', 'dispatch run-2']);
      await dispatcher.onModuleDestroy();
    });

    it('tries nothing again after shutdown', async () => {
      const { dispatcher, log } = setup({ waiting: [item(1)], quotaFull: () => true });
      dispatcher.kick(KEY);
      await jest.advanceTimersByTimeAsync(0);
      await dispatcher.onModuleDestroy();
      await jest.advanceTimersByTimeAsync(10 * QUOTA_RETRY_MS);
      expect(log).toEqual(['quota default/2']);
    });
  });

  describe('the poll behind the signals (a port that may lose them: pollMs)', () => {
    beforeEach(() => jest.useFakeTimers());
    afterEach(() => jest.useRealTimers());

    /** A port whose signals from other processes never arrive (bus down): only `pollMs` is left. */
    const lossy = (pollMs: number): SignalPort => Object.assign(new InProcessSignals(), { pollMs });

    it('starts a run queued without a signal (lost wake-up) within one poll period, not before', async () => {
      const { dispatcher, log, waiting } = setup({ waiting: [], signals: lossy(1000) });
      await dispatcher.onApplicationBootstrap();
      waiting.push(item(1)); // queued by another process; its signal was lost
      await jest.advanceTimersByTimeAsync(900);
      expect(log).toEqual([]);
      await jest.advanceTimersByTimeAsync(100);
      expect(log).toEqual(['quota none', 'start 1', 'dispatch run-1']);
      await dispatcher.onModuleDestroy();
    });

    it('starts the next waiting run after a run ended elsewhere, without a signal', async () => {
      const { dispatcher, log, waiting, free } = setup({ waiting: [item(1), item(2)], signals: lossy(500) });
      await dispatcher.onApplicationBootstrap();
      await jest.advanceTimersByTimeAsync(0);
      expect(log).toEqual(['quota none', 'start 1', 'dispatch run-1']);
      await jest.advanceTimersByTimeAsync(1500); // run-1 still running: the polls find it busy
      expect(log).toHaveLength(3);
      free(); // run-1 ended in another process; its conversation signal was lost
      await jest.advanceTimersByTimeAsync(500);
      expect(log).toEqual(['quota none', 'start 1', 'dispatch run-1', 'quota none', 'start 2', 'dispatch run-2']);
      expect(waiting).toEqual([]);
      await dispatcher.onModuleDestroy();
    });

    it('does not poll on a port that loses nothing (one process), nor after shutdown', async () => {
      const local = setup({ waiting: [] });
      await local.dispatcher.onApplicationBootstrap();
      local.waiting.push(item(1));
      await jest.advanceTimersByTimeAsync(60_000);
      expect(local.log).toEqual([]);

      const stopped = setup({ waiting: [], signals: lossy(1000) });
      await stopped.dispatcher.onApplicationBootstrap();
      await stopped.dispatcher.onModuleDestroy();
      stopped.waiting.push(item(1));
      await jest.advanceTimersByTimeAsync(5000);
      expect(stopped.log).toEqual([]);
    });
  });
});
