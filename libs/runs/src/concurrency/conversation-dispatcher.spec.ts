import type { AppConfig } from '@libs/config';
import type { AgentEntity, SteeringRepository, SteeringRow } from '@libs/persistence';
import type { AdmissionCatalog } from '../admission-catalog';
import type { RunLifecycleService } from '../run-lifecycle.service';
import type { PreparedRun, RunStarter } from '../run-start';
import { ConversationDispatcher } from './conversation-dispatcher';
import { InProcessSignals } from './signal-port';

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
function setup(opts: { waiting: SteeringRow[]; runner?: () => boolean; waitMs?: number; running?: boolean }) {
  const log: string[] = [];
  const waiting = [...opts.waiting];
  let running = opts.running ?? false;
  const steering = {
    nextWaiting: () => Promise.resolve(waiting[0] ?? null),
    situation: () =>
      Promise.resolve({ running_run_id: running ? 'run-x' : null, queued_on_run: 0, waiting: waiting.length }),
    startWaiting: (s: { item_id: number }) => {
      waiting.shift();
      running = true;
      log.push(`start ${s.item_id}`);
      return Promise.resolve({ started: true, event_seq: 7 });
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
    prepare: (runId: string) => Promise.resolve(prepared(runId)),
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
  const lifecycle = { endedWaiting: () => undefined } as unknown as RunLifecycleService;
  const config = { runs: { runnerWaitMs: opts.waitMs ?? 10_000 } } as AppConfig;
  const dispatcher = new ConversationDispatcher(
    steering,
    lifecycle,
    starter,
    catalog as unknown as AdmissionCatalog,
    connections,
    new InProcessSignals(),
    config,
  );
  const free = () => {
    running = false;
  };
  return { dispatcher, log, free };
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
    expect(log).toEqual(['start 1', 'dispatch run-1']);
    free(); // run-1 ended: the next one starts on the next kick
    dispatcher.kick(KEY);
    await settle(dispatcher);
    expect(log).toEqual(['start 1', 'dispatch run-1', 'start 2', 'dispatch run-2']);
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
    expect(log).toEqual(['start 1', 'dispatch run-1']);
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
    expect(log).toEqual(['fail 1 host.dispatch_failed', 'start 2', 'dispatch run-2']);
  });

  it('coalesces kicks: one driver per conversation, one more round after it', async () => {
    const { dispatcher, log } = setup({ waiting: [item(1)] });
    dispatcher.kick(KEY);
    dispatcher.kick(KEY);
    dispatcher.kick(KEY);
    await settle(dispatcher);
    expect(log).toEqual(['start 1', 'dispatch run-1']);
  });
});
