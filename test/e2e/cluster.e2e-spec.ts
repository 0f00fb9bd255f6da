import { logged, waitFor } from './harness';
import { scrape } from './prom-text';
import {
  CLUSTER_TIMING,
  Cluster,
  checkCluster,
  clusterEvent,
  follow,
  replay,
  type ClusterNode,
  type Reading,
} from './cluster-harness';

/*
 * Three host processes on one PostgreSQL database (issue 17 item 7, docs/scale-out.md): what
 * already holds across processes. The registry (one row each, migrations once), a runner at B
 * with its runs admitted at B and read at A, B and C (the acceptance checker: one run per 202,
 * every run terminal, every result a reader saw in the replay, none executed twice), the signal
 * bus waking the other processes, a process killed or paused past its lease declared dead by the
 * others (and a paused one registering again on SIGCONT), and the bus stopped mid-load (the runs
 * keep completing; the bus comes back). Always PostgreSQL; the bus is `nats` in the SQLite e2e
 * run and `postgres` in the PostgreSQL one (E2E_CLUSTER_BUS overrides): cluster-harness.ts.
 *
 * What needs the scale-out pieces still being built (a run admitted at A dispatched at B, reads
 * and cancel anywhere, leases and fencing, drain) is in cluster-routing / cluster-failover /
 * cluster-anywhere / cluster-drain.e2e-spec.ts.
 */

jest.setTimeout(180_000);

const AGENT = 'cluster-echo';
const STEER_AGENT = 'cluster-steer';
const TEXT = 'one two three four five six seven eight';

async function received(node: ClusterNode, bus: string): Promise<number> {
  return (await scrape(node.host.metrics)).sum('runnerhost_signal_bus_signals_total', { bus, outcome: 'received' });
}

/** Posts `n` events at `at` at once; every answer must be 202. */
async function admit(at: ClusterNode, n: number, agentId = AGENT, text = TEXT) {
  const answers = await Promise.all(
    Array.from({ length: n }, () => at.api('POST', '/v1/events', clusterEvent(agentId, text))),
  );
  for (const a of answers) {
    expect({ status: a.status, body: a.body }).toEqual({
      status: 202,
      body: expect.objectContaining({ disposition: 'started' }),
    });
  }
  return answers.map((a) => ({ eventId: a.body.event_id as string, runId: a.body.run_id as string }));
}

describe('three host processes on one PostgreSQL database', () => {
  const cluster = new Cluster({ size: 3 });
  let A: ClusterNode;
  let B: ClusterNode;
  let C: ClusterNode;

  beforeAll(async () => {
    await cluster.start();
    [A, B, C] = cluster.nodes;
    const { runnerId } = await cluster.startRunner(B, { env: { DEMO_STEERING: '1' } });
    // An admin write at A, read by B when it admits (the database is the only truth).
    await cluster.bindAgents(A, runnerId, {
      [AGENT]: { mode: 'echo', chunk_delay_ms: 5 },
      [STEER_AGENT]: { mode: 'steer', chunk_delay_ms: 5, steer_wait_ms: 3000 },
    });
  });

  afterAll(async () => {
    await cluster.stop();
  });

  it('each process registers once with its own addresses; the schema was migrated once', async () => {
    const rows = await cluster.registry();
    expect(rows.map((r) => ({ instance: r.instance, state: r.state, grpc: r.grpc_address }))).toEqual(
      cluster.nodes.map((n) => ({ instance: n.instance, state: 'running', grpc: n.grpc })),
    );
    expect(new Set(rows.map((r) => r.id)).size).toBe(3);
    const twice = await cluster.db.query(
      'SELECT name, COUNT(*) AS n FROM migrations GROUP BY name HAVING COUNT(*) > 1',
    );
    expect(twice).toEqual([]);
    expect((await cluster.db.query('SELECT COUNT(*) AS n FROM migrations'))[0].n).not.toBe('0');
  });

  it('runs admitted at the runner`s process are read live there and replayed the same at A and C', async () => {
    const admitted = await admit(B, 24);
    const readings: Reading[] = await Promise.all(admitted.map((a) => follow(B, a.runId)));
    for (const r of readings) {
      expect({ run: r.runId, end: r.end }).toEqual({ run: r.runId, end: 'terminal' });
      expect(r.events.filter((e) => e.data.type === 'message.delta').length).toBe(8);
    }
    for (const other of [A, C]) {
      for (const r of readings.slice(0, 6)) {
        expect(await replay(other, r.runId)).toEqual(r.events);
      }
    }
    const check = await checkCluster(cluster, admitted, readings, A);
    expect(check).toEqual({
      eventsWithoutOneRun: {},
      notTerminal: {},
      lostResults: [],
      executedTwice: {},
      statuses: { completed: 24 },
    });
    // Every run was executed: once.
    const executions = cluster.executions();
    expect(admitted.every((a) => executions.get(a.runId) === 1)).toBe(true);
  });

  it('a follow-up steered into a run at B wakes the other processes through the bus', async () => {
    const beforeA = await received(A, cluster.bus);
    const beforeC = await received(C, cluster.bus);
    const first = clusterEvent(STEER_AGENT, 'first message');
    const started = await B.api('POST', '/v1/events', first);
    expect(started.body.disposition).toBe('started');
    const followUp = await B.api('POST', '/v1/events', {
      ...clusterEvent(STEER_AGENT, 'and a follow-up'),
      conversation: first.conversation,
    });
    expect({ status: followUp.status, disposition: followUp.body.disposition, run: followUp.body.run_id }).toEqual({
      status: 202,
      disposition: 'steered',
      run: started.body.run_id,
    });
    const reading = await follow(B, started.body.run_id);
    expect(reading.end).toBe('terminal');
    const messages = reading.events
      .filter((e) => e.data.type === 'message.completed')
      .map((e) => e.data.data.message.content);
    expect(messages).toEqual(['first message', 'and a follow-up']);
    // The steering signal (and the run's end) reached A and C over the shared bus.
    await waitFor('A received a signal', async () => (await received(A, cluster.bus)) > beforeA);
    await waitFor('C received a signal', async () => (await received(C, cluster.bus)) > beforeC);
  });

  it('a process killed with -9 is declared dead by another within the lease; a new process takes its place', async () => {
    const before = (await cluster.registry()).find((r) => r.instance === C.instance)!;
    await C.kill();
    await waitFor(
      'C declared dead',
      async () => !(await cluster.registry()).some((r) => r.id === before.id),
      CLUSTER_TIMING.leaseMs * 20,
    );
    // The sweeper logs after its claim deleted the row (process-registry.ts sweep), and on its stdout pipe.
    await logged(() => A.logs() + B.logs(), `process ${C.instance} (${before.id}) declared dead`);
    // A and B keep serving.
    expect((await A.api('GET', '/health/ready')).status).toBe(200);
    const admitted = await admit(B, 4);
    const readings = await Promise.all(admitted.map((a) => follow(B, a.runId)));
    expect(readings.map((r) => r.end)).toEqual(['terminal', 'terminal', 'terminal', 'terminal']);

    await C.restart();
    const after = (await cluster.registry()).find((r) => r.instance === C.instance)!;
    expect(after.id).not.toBe(before.id);
    expect(after.grpc_address).toBe(C.grpc);
  });

  it('a process paused past its lease is declared dead; on SIGCONT it registers again under a new id', async () => {
    const before = (await cluster.registry()).find((r) => r.instance === C.instance)!;
    C.pause();
    await waitFor(
      'paused C declared dead',
      async () => !(await cluster.registry()).some((r) => r.id === before.id),
      CLUSTER_TIMING.leaseMs * 20,
    );
    C.resume();
    const again = await waitFor(
      'C registered again',
      async () => (await cluster.registry()).find((r) => r.instance === C.instance && r.id !== before.id),
      CLUSTER_TIMING.leaseMs * 20,
    );
    expect(again.state).toBe('running');
    // Logged before C registered again, but on its stdout pipe, read apart from the database.
    await logged(() => C.logs(), `this process (${before.id}) was declared dead by another`);
    expect((await C.api('GET', '/health/ready')).status).toBe(200);
  });

  it('the bus stopped mid-load: the runs keep completing, the processes reconnect when it is back', async () => {
    const disconnects = async (n: ClusterNode) =>
      (await scrape(n.host.metrics)).sum('runnerhost_signal_bus_disconnects_total', { bus: cluster.bus });
    const connected = async (n: ClusterNode) =>
      (await scrape(n.host.metrics)).sum('runnerhost_signal_bus_connected', { bus: cluster.bus });
    const before = await disconnects(A);
    const load = admit(B, 24).then(async (admitted) => ({
      admitted,
      readings: await Promise.all(admitted.map((a) => follow(B, a.runId))),
    }));
    // Stop the bus: the private nats-server, or every LISTEN/NOTIFY connection of the cluster.
    if (cluster.nats) {
      await cluster.nats.stop();
      await waitFor('A lost the bus', async () => (await connected(A)) === 0);
    } else {
      await cluster.db.query(
        // `runner-host <process id> bus` (docs/scale-out.md#sessions-of-a-paused-process)
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'runner-host % bus' AND datname = current_database()",
      );
    }
    const { admitted, readings } = await load;
    expect(readings.every((r) => r.end === 'terminal')).toBe(true);
    await cluster.nats?.start();
    for (const n of cluster.nodes) {
      await waitFor(`${n.name} reconnected to the bus`, async () => (await connected(n)) === 1, 30_000);
    }
    expect(await disconnects(A)).toBeGreaterThan(before);
    const check = await checkCluster(cluster, admitted, readings, C);
    expect(check).toEqual({
      eventsWithoutOneRun: {},
      notTerminal: {},
      lostResults: [],
      executedTwice: {},
      statuses: { completed: 24 },
    });
  });
});
