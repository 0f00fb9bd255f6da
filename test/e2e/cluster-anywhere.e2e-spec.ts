import { waitFor } from './harness';
import { Cluster, checkCluster, clusterEvent, follow, replay, type ClusterNode } from './cluster-harness';

/*
 * Everything from anywhere (docs/scale-out.md#everything-from-anywhere-reads-cancel-steering),
 * issue 17 item 4. The runner's only stream is at B and every run is admitted at B: what is tested
 * is that A and C, which hold nothing of the run in memory, serve it — live readers, cancel, a
 * steered follow-up, duplicates.
 */

jest.setTimeout(180_000);

const ECHO = 'anywhere-echo';
const STALL = 'anywhere-stall';
const STEER = 'anywhere-steer';

describe('every process serves every run', () => {
  const cluster = new Cluster({ size: 3 });
  let A: ClusterNode;
  let B: ClusterNode;
  let C: ClusterNode;

  beforeAll(async () => {
    await cluster.start();
    [A, B, C] = cluster.nodes;
    const { runnerId } = await cluster.startRunner(B, { env: { DEMO_STEERING: '1' } });
    await cluster.bindAgents(A, runnerId, {
      [ECHO]: { mode: 'echo', chunk_delay_ms: 150 },
      [STALL]: { mode: 'stall' },
      [STEER]: { mode: 'steer', chunk_delay_ms: 5, steer_wait_ms: 3000 },
    });
  });

  afterAll(async () => {
    await cluster.stop();
  });

  it('readers at A and C follow a run at B live, and one resumes at C from Last-Event-ID', async () => {
    const posted = await B.api(
      'POST',
      '/v1/events',
      clusterEvent(ECHO, 'one two three four five six seven eight nine ten'),
    );
    expect(posted.status).toBe(202);
    const runId = posted.body.run_id as string;
    const [atA, atC] = await Promise.all([follow(A, runId), follow(C, runId)]);
    const whole = await replay(B, runId);
    expect(atA).toMatchObject({ end: 'terminal', events: whole });
    expect(atC).toMatchObject({ end: 'terminal', events: whole });
    // A live reader that joined mid-run saw deltas before the run ended: the stream was not a replay only.
    const resumed = await follow(C, runId, { 'last-event-id': String(whole[4].id) });
    expect(resumed.events).toEqual(whole.slice(5));
  });

  it.each(['A', 'C'])('a cancel posted at %s ends the run at B cancelled; every reader sees it', async (name) => {
    const at = cluster.node(name);
    const posted = await B.api('POST', '/v1/events', clusterEvent(STALL, 'stall here'));
    const runId = posted.body.run_id as string;
    const readerA = follow(A, runId);
    const readerC = follow(C, runId);
    // The run is live: a short read of its stream (cut after 500 ms) shows whether a delta arrived.
    await waitFor('the first delta', async () => (await follow(B, runId, {}, 500)).events.length > 0 || undefined);
    expect((await at.api('POST', `/v1/runs/${runId}/cancel`, {})).status).toBe(200);
    for (const r of [await readerA, await readerC]) {
      expect(r.end).toBe('terminal');
      expect(r.events[r.events.length - 1].data.type).toBe('run.failed');
    }
    expect((await C.api('GET', `/v1/runs/${runId}`)).body.status).toBe('cancelled');
  });

  it('a follow-up posted at C is steered into the run at B and pulled by its runner', async () => {
    const first = clusterEvent(STEER, 'first message');
    const started = await B.api('POST', '/v1/events', first);
    const followUp = await C.api('POST', '/v1/events', {
      ...clusterEvent(STEER, 'steered from C'),
      conversation: first.conversation,
    });
    expect({ status: followUp.status, disposition: followUp.body.disposition, run: followUp.body.run_id }).toEqual({
      status: 202,
      disposition: 'steered',
      run: started.body.run_id,
    });
    const reading = await follow(A, started.body.run_id);
    const messages = reading.events
      .filter((e) => e.data.type === 'message.completed')
      .map((e) => e.data.data.message.content);
    expect(messages).toEqual(['first message', 'steered from C']);
  });

  it('the same event posted to A and B at once makes one run; both answers name it', async () => {
    const body = clusterEvent(ECHO, 'duplicate please');
    const [a, b] = await Promise.all([A.api('POST', '/v1/events', body), B.api('POST', '/v1/events', body)]);
    expect([a.status, b.status].sort()).toEqual([200, 202]);
    expect(a.body.run_id).toBe(b.body.run_id);
    const reading = await follow(C, a.body.run_id as string);
    const check = await checkCluster(
      cluster,
      [{ eventId: body.event.event_id, runId: a.body.run_id as string }],
      [reading],
      A,
    );
    expect(check).toMatchObject({ eventsWithoutOneRun: {}, notTerminal: {}, lostResults: [], executedTwice: {} });
  });
});
