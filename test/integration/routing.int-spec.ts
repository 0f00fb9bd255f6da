import type { TestingModule } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { ProcessRegistry } from '@libs/cluster';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import {
  HostProcessesRepository,
  PluginsRepository,
  RunEntity,
  RunnerPresenceRepository,
  RunsRepository,
  SteeringItemEntity,
  SteeringRepository,
  Transactions,
  soloConversation,
  type AdmissionRows,
  type DecisionTable,
} from '@libs/persistence';
import { RunnerConnections, RunnerPresence, type RunnerSession } from '@libs/runner-gateway';
import { PERSISTENT_DIALECTS, postgresDatabase, storesModule, type TestDatabase } from './support/databases';
import { logOf, newEvent, newRun, T0 } from './support/run-rows';

jest.setTimeout(60_000);

const LEASE_MS = 60_000;
const RUNNER = 'plugin:acme/echo/default';

const config = {
  instanceId: 'it-host',
  http: { host: '0.0.0.0', port: 3000 },
  grpc: { host: '0.0.0.0', port: 50051, maxConcurrentStreams: 1 },
  cluster: {
    heartbeatMs: 20_000,
    leaseMs: LEASE_MS,
    advertiseHost: 'it-host',
    signalBus: 'memory',
    nats: null,
    pollMs: 1000,
  },
} as unknown as AppConfig;

const proc = (id: string) => ({ id, instance: `i-${id}`, http_address: `${id}:3000`, grpc_address: `${id}:50051` });
const sess = (session_id: string, plugin_id = 'acme/echo') => ({ session_id, plugin_id, connected_at: T0 });

function session(session_id: string, plugin_id: string, runnerIds: string[]): RunnerSession {
  return {
    session_id,
    plugin_id,
    connected_at: T0,
    last_seen_at: T0,
    runners: runnerIds.map((runner_id) => ({ runner_id, name: 'default', manifest: {} as never })),
    send: () => undefined,
    close: () => undefined,
  };
}

describe.each(PERSISTENT_DIALECTS)('runner presence on %s', (_name, factory) => {
  let db: TestDatabase;
  let mod: TestingModule;
  let repo: RunnerPresenceRepository;
  let processes: HostProcessesRepository;

  beforeEach(async () => {
    db = await factory();
    mod = await storesModule(db, [
      { provide: APP_CONFIG, useValue: config },
      HostProcessesRepository,
      RunnerPresenceRepository,
      ProcessRegistry,
      RunnerConnections,
      RunnerPresence,
      PluginsRepository,
      Transactions,
    ]);
    repo = mod.get(RunnerPresenceRepository);
    processes = mod.get(HostProcessesRepository);
  });

  afterEach(async () => {
    await mod.close();
    await db.dispose();
  });

  it('finds the live holders of a runner other than the asking process; a dead, removed or draining one counts for nothing', async () => {
    for (const id of ['a', 'b', 'c']) {
      await processes.register(proc(id));
    }
    await repo.attach('b', sess('s-b'), [RUNNER, 'plugin:acme/echo/other']);
    await repo.attach('c', sess('s-c'), [RUNNER]);
    await repo.attach('a', sess('s-a'), [RUNNER]);
    expect((await repo.holders(RUNNER, 'a', LEASE_MS)).map((h) => h.process_id).sort()).toEqual(['b', 'c']);
    expect(await repo.holders('plugin:acme/none/default', 'a', LEASE_MS)).toEqual([]);

    await processes.setState('c', 'draining');
    expect((await repo.holders(RUNNER, 'a', LEASE_MS)).map((h) => h.process_id)).toEqual(['b']);
    // b's row is deleted (declared dead, or stopped): its presence rows are ignored before they go.
    await processes.remove('b');
    expect(await repo.holders(RUNNER, 'a', LEASE_MS)).toEqual([]);
    expect(await repo.removeOrphans()).toBe(2);
    expect(await repo.ofProcess('b')).toEqual([]);
    // A heartbeat older than the lease counts as dead too (lease 0: every heartbeat is older).
    await processes.setState('c', 'running');
    expect((await repo.holders(RUNNER, 'a', LEASE_MS)).map((h) => h.process_id)).toEqual(['c']);
    await new Promise((r) => setTimeout(r, 5));
    expect(await repo.holders(RUNNER, 'a', 1)).toEqual([]);
  });

  it('a newer session of the process takes the row over; the older one detaching leaves it', async () => {
    await processes.register(proc('a'));
    await processes.register(proc('b'));
    await repo.attach('b', sess('old'), [RUNNER]);
    await repo.attach('b', sess('new', 'acme/echo2'), [RUNNER]);
    expect(await repo.ofProcess('b')).toEqual([{ runner_id: RUNNER, session_id: 'new', plugin_id: 'acme/echo2' }]);
    expect(await repo.detach('b', 'old')).toBe(0);
    expect((await repo.holders(RUNNER, 'a', LEASE_MS)).map((h) => h.session_id)).toEqual(['new']);
    expect(await repo.detach('b', 'new')).toBe(1);
    expect(await repo.holders(RUNNER, 'a', LEASE_MS)).toEqual([]);
    await repo.attach('b', sess('again'), [RUNNER]);
    expect(await repo.removeProcess('b')).toBe(1);
    expect(await repo.ofProcess('b')).toEqual([]);
  });

  it('RunnerPresence mirrors the connections of its process: attach writes, detach and a clean stop delete', async () => {
    await mod.init();
    const registry = mod.get(ProcessRegistry);
    const connections = mod.get(RunnerConnections);
    const presence = mod.get(RunnerPresence);
    const s1 = session('s1', 'acme/echo', [RUNNER, 'plugin:acme/echo/other']);
    connections.attach(s1);
    await presence.settled();
    expect((await repo.ofProcess(registry.id)).map((r) => r.runner_id)).toEqual([RUNNER, 'plugin:acme/echo/other']);
    // The asking process never counts itself; another process sees it.
    expect(await presence.heldElsewhere(RUNNER)).toBe(false);
    await processes.register(proc('other'));
    expect((await repo.holders(RUNNER, 'other', LEASE_MS)).map((h) => h.process_id)).toEqual([registry.id]);
    // The plugin reconnects to this process: the new session replaces the old one's rows.
    const s2 = session('s2', 'acme/echo', [RUNNER]);
    connections.attach(s2);
    await presence.settled();
    expect(await repo.ofProcess(registry.id)).toEqual([
      { runner_id: RUNNER, session_id: 's2', plugin_id: 'acme/echo' },
    ]);
    connections.detach(s2, 'bye');
    await presence.settled();
    expect(await repo.ofProcess(registry.id)).toEqual([]);
    connections.attach(session('s3', 'acme/echo', [RUNNER]));
    await presence.settled();
    const id = registry.id;
    await mod.close();
    mod = await storesModule(db, [RunnerPresenceRepository]);
    repo = mod.get(RunnerPresenceRepository);
    expect(await repo.ofProcess(id)).toEqual([]);
  });
});

/** The admission rows of an event without a conversation whose runner another process holds. */
function routedRows(): AdmissionRows {
  const run = newRun({ conversation_id: null, runner_id: RUNNER });
  const event = { ...newEvent({ conversation_id: null, run_id: run.run_id }), event_id: run.event_id };
  const ref = soloConversation(run.run_id, run.agent_id, RUNNER, null);
  const table: DecisionTable = { busy: 'queued', steer_into: null, max_queue: 100, free: 'queued' };
  return {
    event,
    readmit: false,
    log: logOf(event),
    user: null,
    run: null,
    terminal: null,
    conversation: { ref, table, item: { text: 'x' }, submission: { input: { text: 'x' } }, of_one: true },
  };
}

describe('routed runs claimed by two processes on postgres', () => {
  let db: TestDatabase;
  const modules: TestingModule[] = [];

  beforeAll(async () => {
    db = await postgresDatabase();
    modules.push(
      await storesModule(db, [SteeringRepository, RunsRepository]),
      await storesModule(db, [SteeringRepository, RunsRepository]),
    );
  });

  afterAll(async () => {
    for (const m of modules) {
      await m.close();
    }
    await db?.dispose();
  });

  it('an event routed elsewhere waits as a conversation of one: run queued without a conversation, item waiting', async () => {
    const rows = routedRows();
    const outcome = await modules[0].get(RunsRepository).admit(rows);
    expect(outcome).toMatchObject({ admitted: true, disposition: 'queued', run_id: rows.event.run_id });
    const ds = modules[0].get(DataSource);
    expect(await ds.getRepository(RunEntity).findOneBy({ run_id: rows.event.run_id! })).toMatchObject({
      status: 'queued',
      conversation_id: null,
      thread_id: null,
    });
    const item = await modules[1].get(SteeringRepository).nextWaiting(rows.conversation!.ref.key);
    expect(item).toMatchObject({ next_run_id: rows.event.run_id, dispatch: 'waiting', conversation_id: '' });
    expect(await modules[1].get(SteeringRepository).waitingConversations()).toContain(rows.conversation!.ref.key);
  });

  it('two processes claiming the same waiting runs at once: each run starts exactly once', async () => {
    const admitted: AdmissionRows[] = [];
    for (let i = 0; i < 20; i++) {
      const rows = routedRows();
      await modules[i % 2].get(RunsRepository).admit(rows);
      admitted.push(rows);
    }
    const claims = await Promise.all(
      admitted.flatMap((rows) =>
        modules.map(async (m) => {
          const steering = m.get(SteeringRepository);
          const ref = rows.conversation!.ref;
          const item = await steering.nextWaiting(ref.key);
          if (!item) {
            return { run_id: rows.event.run_id, started: false };
          }
          const runId = rows.event.run_id!;
          const outcome = await steering.startWaiting({
            conversation: ref,
            item_id: item.id,
            run_id: runId,
            run: newRun({ run_id: runId, event_id: rows.event.event_id, conversation_id: null, started_at: T0 + 5 }),
          });
          return { run_id: runId, started: outcome.started };
        }),
      ),
    );
    for (const rows of admitted) {
      expect(claims.filter((c) => c.run_id === rows.event.run_id && c.started)).toHaveLength(1);
    }
    const ds = modules[0].get(DataSource);
    expect(
      await ds.getRepository(RunEntity).countBy(admitted.map((r) => ({ run_id: r.event.run_id!, status: 'running' }))),
    ).toBe(20);
    expect(
      await ds
        .getRepository(SteeringItemEntity)
        .countBy(admitted.map((r) => ({ event_id: r.event.event_id, dispatch: 'started' }))),
    ).toBe(20);
  });
});
