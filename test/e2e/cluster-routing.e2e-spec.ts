import { Cluster, checkCluster, clusterEvent, follow, replay, type ClusterNode, type Reading } from './cluster-harness';

/*
 * Routing (docs/scale-out.md#routing), issue 17 item 2: a run admitted at any process is
 * dispatched by the process holding a Connect stream of its runner.
 *
 * Three processes on one PostgreSQL (cluster-harness.ts): the runner's only stream is at B; events
 * are admitted at A, B and C in turn, each followed live at B (the process that dispatches it) and
 * replayed at the other two; the acceptance checker holds and every run ran once, at B's runner.
 */

jest.setTimeout(180_000);

const AGENT = 'routing-echo';
const TEXT = 'alpha beta gamma delta epsilon zeta';

describe('a run admitted at any process is dispatched by the process holding its runner', () => {
  const cluster = new Cluster({ size: 3 });
  let A: ClusterNode;
  let B: ClusterNode;
  let C: ClusterNode;

  beforeAll(async () => {
    await cluster.start();
    [A, B, C] = cluster.nodes;
    const { runnerId } = await cluster.startRunner(B);
    await cluster.bindAgents(C, runnerId, { [AGENT]: { mode: 'echo', chunk_delay_ms: 5 } });
  });

  afterAll(async () => {
    await cluster.stop();
  });

  it('admit at A, runner at B: 202 queued (waiting for its holder), the run completes, its replay is the same at A, B and C', async () => {
    const posted = await A.api('POST', '/v1/events', clusterEvent(AGENT, TEXT));
    // Routed: stored as waiting, started by the process holding the runner (docs/scale-out.md#routing).
    expect({ status: posted.status, disposition: posted.body.disposition }).toEqual({
      status: 202,
      disposition: 'queued',
    });
    const live = await follow(B, posted.body.run_id);
    expect(live.end).toBe('terminal');
    expect(live.events.map((e) => e.data.type).slice(-2)).toEqual(['message.completed', 'run.completed']);
    for (const n of [A, C]) {
      expect(await replay(n, posted.body.run_id)).toEqual(live.events);
    }
  });

  it('60 events spread over A, B and C: one run each, all completed, all executed once by the runner at B', async () => {
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => cluster.spread(i).api('POST', '/v1/events', clusterEvent(AGENT, TEXT))),
    );
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 202));
    const admitted = answers.map((a) => ({ eventId: a.body.event_id as string, runId: a.body.run_id as string }));
    const readings: Reading[] = await Promise.all(admitted.map((a) => follow(B, a.runId)));
    const check = await checkCluster(cluster, admitted, readings, C);
    expect(check).toEqual({
      eventsWithoutOneRun: {},
      notTerminal: {},
      lostResults: [],
      executedTwice: {},
      statuses: { completed: 60 },
    });
    const executions = cluster.executions();
    expect(admitted.filter((a) => executions.get(a.runId) !== 1)).toEqual([]);
  });
});
