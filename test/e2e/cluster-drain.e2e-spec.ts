import { waitFor } from './harness';
import {
  Cluster,
  GrpcBalancer,
  checkCluster,
  clusterEvent,
  follow,
  runnerConnectedAt,
  type ClusterNode,
  type Reading,
} from './cluster-harness';

/*
 * WAITS FOR helper D's branch (wt-drain: SIGTERM drain, issue 17 item 6) and helper B's
 * (wt-routing: dispatch at the process holding the runner, item 2). Fails on a branch without
 * them: a SIGTERM'd process ends its runs instead of letting them finish, and a run admitted at a
 * process without a runner stream answers 503.
 *
 * Three processes on one PostgreSQL (cluster-harness.ts); two runner processes connect through a
 * round-robin TCP balancer (GrpcBalancer: an L4 load balancer for the long-lived gRPC streams), so
 * a runner told to reconnect lands on another process.
 */

jest.setTimeout(300_000);

const AGENT = 'drain-echo';
const TEXT = 'one two three four five six seven eight nine ten';
/** A stop that finished its shutdown: exit 0, or SIGTERM re-raised by Nest's hooks (1 = the exit deadline). */
const CLEAN_EXITS: (number | string | null)[] = [0, 'SIGTERM'];

describe('graceful shutdown and a rolling restart', () => {
  const cluster = new Cluster({ size: 3 });
  const balancer = new GrpcBalancer(cluster);
  let A: ClusterNode;
  let B: ClusterNode;

  beforeAll(async () => {
    await cluster.start();
    [A, B] = cluster.nodes;
    await balancer.start();
    const reg = await A.api('POST', '/v1/admin/plugins', { author: 'demo', name: 'echo' });
    expect(reg.status).toBe(201);
    const runnerId = 'plugin:demo/echo/default';
    // Through the balancer: the first connection lands on A, the second on B.
    for (const at of [A, B]) {
      cluster.connectRunner(A, reg.body.token as string, { env: { RUNNERHOST_GRPC_URL: balancer.address } });
      await runnerConnectedAt(at, runnerId);
    }
    expect(
      (
        await A.api('POST', '/v1/admin/agents', {
          agent_id: AGENT,
          runner_id: runnerId,
          runner_config: { mode: 'echo', chunk_delay_ms: 50 },
        })
      ).status,
    ).toBe(201);
  });

  afterAll(async () => {
    await balancer.stop();
    await cluster.stop();
  });

  it('SIGTERM of B with runs in flight: they finish within the grace, B exits 0 and leaves the registry', async () => {
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => B.api('POST', '/v1/events', clusterEvent(AGENT, TEXT))),
    );
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 202));
    const readings = Promise.all(answers.map((a) => follow(A, a.body.run_id as string)));
    expect(CLEAN_EXITS).toContain(await B.terminate());
    const seen = await readings;
    expect(seen.map((r) => r.end)).toEqual(seen.map(() => 'terminal'));
    expect(seen.map((r) => r.events[r.events.length - 1].data.type)).toEqual(seen.map(() => 'run.completed'));
    expect((await cluster.registry()).map((r) => r.instance)).not.toContain(B.instance);
    await B.restart();
  });

  it('a rolling restart of every process under load loses nothing and interrupts nothing', async () => {
    const admitted: { eventId: string; runId: string }[] = [];
    const readings: Promise<Reading>[] = [];
    let stop = false;
    let i = 0;
    const client = (async () => {
      while (!stop) {
        const at = cluster.spread(i++);
        const a = await at.api('POST', '/v1/events', clusterEvent(AGENT, TEXT)).catch(() => null);
        if (a?.status === 202) {
          admitted.push({ eventId: a.body.event_id, runId: a.body.run_id });
          readings.push(follow(cluster.spread(i), a.body.run_id as string));
        }
      }
    })();
    try {
      for (const node of cluster.nodes) {
        await waitFor('some progress', () => Promise.resolve(admitted.length > 5 * (node.index + 1)));
        expect(CLEAN_EXITS).toContain(await node.terminate());
        await node.restart();
      }
    } finally {
      stop = true;
      await client;
    }
    const seen = await Promise.all(readings);
    // A reader whose process restarted under it resumes elsewhere: what it saw must still be in the replay.
    const check = await checkCluster(cluster, admitted, seen, A);
    expect(check).toEqual({
      eventsWithoutOneRun: {},
      notTerminal: {},
      lostResults: [],
      executedTwice: {},
      statuses: { completed: admitted.length },
    });
  });
});
