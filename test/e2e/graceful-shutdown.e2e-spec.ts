import { ADMIN_KEY, Host, TestDatabase, dbRows, event, startDemoRunner, waitFor } from './harness';

jest.setTimeout(120_000);

/**
 * Graceful shutdown on SIGTERM (docs/deployment.md#graceful-shutdown): the process stops admitting
 * (503 host.draining, Retry-After; /health/ready fails), lets the runs in flight finish within
 * SHUTDOWN_GRACE_MS, ends what is left `interrupted` with its terminal result, and exits 0.
 */
describe('graceful shutdown', () => {
  const dbs: TestDatabase[] = [];
  const stops: Array<() => Promise<unknown>> = [];

  afterEach(async () => {
    for (const stop of stops.splice(0).reverse()) {
      await stop();
    }
    for (const db of dbs.splice(0)) {
      await db.drop();
    }
  });

  /** A host with a demo runner streaming `words` words, one every `delayMs`; the run started and streaming. */
  async function streamingRun(graceMs: number, words: number, delayMs: number) {
    const db = new TestDatabase();
    dbs.push(db);
    const host = await new Host(db, { SHUTDOWN_GRACE_MS: String(graceMs) }).start();
    stops.push(() => host.stop('SIGKILL'));
    const { runner, runnerId } = await startDemoRunner(host, { author: 'drain' });
    stops.push(() => runner.stop('SIGKILL'));
    const agent = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'drain',
      runner_id: runnerId,
      runner_config: { mode: 'echo', chunk_delay_ms: delayMs },
    });
    expect(agent.status).toBe(201);
    const text = Array.from({ length: words }, (_, i) => `w${i}`).join(' ');
    const admitted = await host.api('POST', '/v1/events', event('drain', text));
    expect(admitted.status).toBe(202);
    const runId = admitted.body.run_id as string;
    await waitFor('the run streaming', async () =>
      (await dbRows(db, 'run_results')).some((r) => r.run_id === runId && r.type === 'message.delta'),
    );
    const exited = new Promise<number | null>((resolve) => host.proc.child.on('exit', (code) => resolve(code)));
    return { db, host, runId, exited, text };
  }

  async function statusOf(db: TestDatabase, runId: string): Promise<unknown> {
    return (await dbRows(db, 'runs')).find((r) => r.run_id === runId)?.status;
  }

  it('a run streaming when SIGTERM arrives finishes completed within the grace; new events get 503 meanwhile; exit 0', async () => {
    const { db, host, runId, exited } = await streamingRun(60_000, 40, 100);
    host.proc.child.kill('SIGTERM');
    await waitFor('draining', async () => (await fetch(`${host.http}/health/ready`)).status === 503);

    const ready = await fetch(`${host.http}/health/ready`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { checks: { process: string } }).checks.process).toBe('draining');
    const refused = await fetch(`${host.http}/v1/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_KEY}` },
      body: JSON.stringify(event('drain', 'too late')),
    });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    const body = (await refused.json()) as { error: { code: string; retryable: boolean; details: { reason: string } } };
    expect(body.error).toMatchObject({ code: 'unavailable', retryable: true, details: { reason: 'host.draining' } });
    // The run was still streaming when the 503 was answered: it went on and completed.
    expect(await statusOf(db, runId)).toBe('running');

    expect(await exited).toBe(0);
    expect(await statusOf(db, runId)).toBe('completed');
    // Nothing was recorded for the refused event: one event, one run.
    expect(await dbRows(db, 'runs')).toHaveLength(1);
    // The whole log read (at 'exit' the pipes may still hold its end), so that the absence means something.
    await host.proc.closed;
    expect(host.proc.logs()).not.toContain('did not finish');
  });

  it('a run longer than the grace ends interrupted, with its terminal result in the replay', async () => {
    const { db, host, runId, exited } = await streamingRun(300, 400, 100);
    host.proc.child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(await statusOf(db, runId)).toBe('interrupted');

    // The replay, from a new process on the same database, ends with the host's terminal result.
    const next = await new Host(db, { SHUTDOWN_GRACE_MS: '1000' }).start();
    stops.push(() => next.stop());
    const events = await next.sse(runId);
    const last = events[events.length - 1];
    expect(last.data).toMatchObject({
      type: 'run.failed',
      source: 'host',
      data: expect.objectContaining({ code: 'host.interrupted' }),
    });
    expect(events.some((e) => e.data.type === 'message.delta')).toBe(true);
    expect(events.map((e) => e.data.sequence)).toEqual(events.map((_, i) => i + 1));
    const run = await next.api('GET', `/v1/runs/${runId}`);
    expect(run.body.status).toBe('interrupted');
  });
});
