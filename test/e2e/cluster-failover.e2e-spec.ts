import { logged, waitFor } from './harness';
import {
  CLUSTER_TIMING,
  Cluster,
  checkCluster,
  clusterEvent,
  follow,
  replay,
  runnerConnectedAt,
  type ClusterNode,
  type Reading,
} from './cluster-harness';

/*
 * Run leases, fencing and the dead-owner sweep (docs/scale-out.md#leases-and-fencing), issue 17
 * item 3: the runs of a killed process end `interrupted` within the lease, and a paused process's
 * late writes are refused.
 *
 * Three processes on one PostgreSQL (cluster-harness.ts). One runner process holds its stream at
 * B, another (same plugin) at C; events are admitted at A and followed at A and C.
 */

jest.setTimeout(240_000);

const AGENT = 'failover-echo';
const WORDS = Array.from({ length: 20 }, (_, i) => `w${i}`).join(' ');

describe('a process dies or stalls under load', () => {
  const cluster = new Cluster({ size: 3 });
  let A: ClusterNode;
  let B: ClusterNode;
  let C: ClusterNode;
  let token = '';
  let runnerId = '';

  beforeAll(async () => {
    await cluster.start();
    [A, B, C] = cluster.nodes;
    ({ token, runnerId } = await cluster.startRunner(B));
    cluster.connectRunner(C, token);
    await runnerConnectedAt(C, runnerId);
    await cluster.bindAgents(A, runnerId, { [AGENT]: { mode: 'echo', chunk_delay_ms: 100 } });
  });

  afterAll(async () => {
    await cluster.stop();
  });

  async function load(n: number) {
    const answers = await Promise.all(
      Array.from({ length: n }, () => A.api('POST', '/v1/events', clusterEvent(AGENT, WORDS))),
    );
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 202));
    return answers.map((a) => ({ eventId: a.body.event_id as string, runId: a.body.run_id as string }));
  }

  it('kill -9 of B mid-load: its started runs end interrupted, none runs twice, readers at A and C see every terminal', async () => {
    const admitted = await load(30);
    const readings: Promise<Reading>[] = admitted.flatMap((a) => [follow(A, a.runId), follow(C, a.runId)]);
    // Mid-stream: some run has results.
    await waitFor('a run mid-stream', async () => (await follow(A, admitted[0].runId, {}, 500)).events.length > 2);
    await B.kill();
    const seen = await Promise.all(readings);
    expect(seen.filter((r) => r.end !== 'terminal').map((r) => `${r.runId}@${r.node}`)).toEqual([]);
    const check = await checkCluster(cluster, admitted, seen, C);
    expect({ ...check, statuses: undefined }).toEqual({
      eventsWithoutOneRun: {},
      notTerminal: {},
      lostResults: [],
      executedTwice: {},
      statuses: undefined,
    });
    expect(Object.keys(check.statuses).filter((s) => s !== 'completed' && s !== 'interrupted')).toEqual([]);
    // An interrupted run ends with the host's verdict, after its last committed result.
    for (const r of seen.filter((x) => x.events[x.events.length - 1].data.type === 'run.failed')) {
      expect(r.events[r.events.length - 1].data.data.code).toBe('host.interrupted');
    }
    await B.restart();
  });

  it('SIGSTOP of B past its lease, then SIGCONT: its runs are interrupted by another process, its late writes refused', async () => {
    const runner = cluster.connectRunner(B, token);
    await runnerConnectedAt(B, runnerId);
    const admitted = await load(10);
    await waitFor('a run mid-stream', async () => (await follow(A, admitted[0].runId, {}, 500)).events.length > 2);
    const before = (await cluster.registry()).find((r) => r.instance === B.instance)!;
    // B's database sessions name it (`runner-host <process id> <role>`: writer, readers, pool, bus).
    const sessionsOfB = async (where = '') =>
      (
        await cluster.db.query<{ name: string }>(
          `SELECT application_name AS "name" FROM pg_stat_activity
            WHERE datname = current_database() AND split_part(application_name, ' ', 2) = $1 ${where}`,
          [before.id],
        )
      ).map((r) => r.name);
    expect(await sessionsOfB()).toEqual(expect.arrayContaining([`runner-host ${before.id} writer`]));
    B.pause();
    await waitFor(
      'B declared dead',
      async () => !(await cluster.registry()).some((r) => r.id === before.id),
      CLUSTER_TIMING.leaseMs * 30,
    );
    // Its sweeper ended every session of B in a transaction while B is still stopped, so no
    // transaction B was paused in keeps a run row locked from the takeover
    // (docs/scale-out.md#sessions-of-a-paused-process).
    await waitFor(
      "B's sessions in a transaction ended",
      async () => (await sessionsOfB(`AND state <> 'idle'`)).length === 0,
    );
    const readings = await Promise.all(admitted.map((a) => follow(C, a.runId)));
    B.resume();
    await waitFor('B registered again', async () =>
      (await cluster.registry()).some((r) => r.instance === B.instance && r.id !== before.id),
    );
    // Whatever B tried to write for the runs it lost was refused: each replay is what the reader saw, ending with one terminal.
    for (const r of readings) {
      const after = await replay(A, r.runId);
      expect(after).toEqual(r.events);
      expect(after.filter((e) => e.data.type === 'run.completed' || e.data.type === 'run.failed')).toHaveLength(1);
    }
    // B learnt at its first heartbeat that it had been replaced, and fenced itself before anything else
    // (logged before B registered again, but on its stdout pipe, read apart from the database).
    await logged(() => B.logs(), /declared dead by another[^\n]*fencing itself/);
    const check = await checkCluster(cluster, admitted, readings, A);
    expect(check).toMatchObject({ eventsWithoutOneRun: {}, notTerminal: {}, lostResults: [], executedTwice: {} });
    await runner.stop();
  });
});
