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
 * Graceful shutdown and a rolling restart (docs/deployment.md#graceful-shutdown) on three processes
 * on one PostgreSQL (cluster-harness.ts). The runner connects through a round-robin TCP balancer
 * (GrpcBalancer: an L4 load balancer for the long-lived gRPC streams), so when its process drains
 * it reconnects to another one. One replica of the plugin: a process keeps one connection per
 * plugin (docs/protocol.md), so two replicas behind one balancer could land on the same process,
 * where the second replaces the first (docs/scale-out.md#runner-presence).
 */

jest.setTimeout(300_000);

const AGENT = 'drain-echo';
const TEXT = 'one two three four five six seven eight nine ten';
/** A stop that finished its shutdown: exit 0, or SIGTERM re-raised by Nest's hooks (1 = the exit deadline). */
const CLEAN_EXITS: (number | string | null)[] = [0, 'SIGTERM'];

describe('graceful shutdown and a rolling restart', () => {
  const cluster = new Cluster({ size: 3 });
  const balancer = new GrpcBalancer(cluster);
  const runnerId = 'plugin:demo/echo/default';
  let A: ClusterNode;

  /** The process holding the runner's stream now. */
  async function holder(): Promise<ClusterNode> {
    return waitFor('the runner connected somewhere', async () => {
      for (const node of cluster.nodes.filter((n) => n.alive)) {
        const r = await node.api<any[]>('GET', '/v1/admin/runners').catch(() => null);
        if (r?.body?.find?.((x: any) => x.runner_id === runnerId && x.state === 'connected')) {
          return node;
        }
      }
      return undefined;
    });
  }

  beforeAll(async () => {
    await cluster.start();
    [A] = cluster.nodes;
    await balancer.start();
    const reg = await A.api('POST', '/v1/admin/plugins', { author: 'demo', name: 'echo' });
    expect(reg.status).toBe(201);
    // Through the balancer: the first connection lands on A.
    cluster.connectRunner(A, reg.body.token as string, { env: { RUNNERHOST_GRPC_URL: balancer.address } });
    await runnerConnectedAt(A, runnerId);
    await cluster.bindAgents(A, runnerId, { [AGENT]: { mode: 'echo', chunk_delay_ms: 50 } });
  });

  afterAll(async () => {
    await balancer.stop();
    await cluster.stop();
  });

  it("SIGTERM of the runner's process with runs in flight: they finish within the grace, it exits 0 and leaves the registry, the runner moves", async () => {
    const owner = await holder();
    const reader = cluster.nodes.find((n) => n !== owner)!;
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => owner.api('POST', '/v1/events', clusterEvent(AGENT, TEXT))),
    );
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 202));
    const readings = Promise.all(answers.map((a) => follow(reader, a.body.run_id as string)));
    expect(CLEAN_EXITS).toContain(await owner.terminate());
    const seen = await readings;
    expect(seen.map((r) => r.end)).toEqual(seen.map(() => 'terminal'));
    expect(seen.map((r) => r.events[r.events.length - 1].data.type)).toEqual(seen.map(() => 'run.completed'));
    expect((await cluster.registry()).map((r) => r.instance)).not.toContain(owner.instance);
    // The runner was told to reconnect: it is served by another process now.
    expect(await holder()).not.toBe(owner);
    await owner.restart();
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
    // A run routed while its holder was restarting starts at the next dispatcher poll: every run ends.
    await waitFor(
      'every admitted run terminal',
      async () => {
        for (const a of admitted) {
          const r = await A.api('GET', `/v1/runs/${a.runId}`);
          if (r.body.status === 'queued' || r.body.status === 'running') {
            return false;
          }
        }
        return true;
      },
      60_000,
    );
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
