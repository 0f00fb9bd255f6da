import { Host, SHORT_LEASE, TestDatabase, event, startDemoRunner, takenOver, waitFor } from './harness';

jest.setTimeout(60_000);

describe('crash recovery', () => {
  const db = new TestDatabase();

  afterAll(async () => {
    await db.drop();
  });

  it('leaves a run cut by a host crash interrupted, not running, and its stream terminated', async () => {
    const first = await new Host(db).start();
    const { runner, runnerId } = await startDemoRunner(first);
    await first.api('POST', '/v1/admin/agents', {
      agent_id: 'stall',
      runner_id: runnerId,
      runner_config: { mode: 'stall' },
    });
    const admitted = await first.api('POST', '/v1/events', event('stall', 'are you there?'));
    expect(admitted.status).toBe(202);
    const runId = admitted.body.run_id as string;
    await waitFor('first delta', async () => {
      const res = await fetch(`${first.http}/v1/runs/${runId}/events`, {
        headers: { authorization: `Bearer e2e-admin-key-0123456789abcdef` },
      });
      const reader = res.body!.getReader();
      const chunk = await reader.read();
      await reader.cancel();
      return new TextDecoder().decode(chunk.value).includes('message.delta');
    });
    await first.stop('SIGKILL');
    await runner.stop();

    const second = await new Host(db, SHORT_LEASE).start();
    await takenOver(db, [runId]);
    const run = await second.api('GET', `/v1/runs/${runId}`);
    expect(run.body).toMatchObject({ status: 'interrupted', error: { code: 'host.interrupted', retryable: true } });
    const events = await second.sse(runId);
    expect(events[0].event).toBe('message.delta');
    expect(events.at(-1)!.data).toMatchObject({
      type: 'run.failed',
      source: 'host',
      data: { code: 'host.interrupted' },
    });
    await second.stop();
  });
});
