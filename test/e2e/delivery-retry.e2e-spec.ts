import { ADMIN_KEY, Host, TestDatabase, event, startDemoRunner, waitFor, type Proc } from './harness';
import { WebhookReceiver } from './delivery-receiver';

jest.setTimeout(120_000);

const SECRET = 'whsec-e2e-retry-0123456789';

interface Op {
  sequence: number;
  webhook_state: string;
  attempts: number;
  last_error: string | null;
}

/**
 * `POST /v1/admin/runs/{run_id}/deliveries/retry`: an admin sends a run's failed webhook ops again
 * once the receiver is back; they arrive in order and end delivered.
 */
describe('webhook delivery: an admin retries a run whose ops failed', () => {
  const db = new TestDatabase();
  const host = new Host(db, {
    RUNNERHOST_SECRET_HOOK: SECRET,
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_RETRY_BASE_MS: '20',
    WEBHOOK_RETRY_MAX_MS: '40',
    WEBHOOK_MAX_ATTEMPTS: '2',
  });
  const receiver = new WebhookReceiver(SECRET);
  let runner: Proc;

  beforeAll(async () => {
    await receiver.start();
    await host.start();
    let runnerId: string;
    ({ runner, runnerId } = await startDemoRunner(host));
    for (const agent of [
      {
        agent_id: 'hooked',
        runner_id: runnerId,
        runner_config: { mode: 'echo' },
        delivery_policy: { webhook: { url: receiver.url, secret_env: 'RUNNERHOST_SECRET_HOOK' } },
      },
      { agent_id: 'plain', runner_id: runnerId, runner_config: { mode: 'echo' } },
    ]) {
      expect((await host.api('POST', '/v1/admin/agents', agent)).status).toBe(201);
    }
  });

  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await receiver.stop();
    await db.drop();
  });

  const ops = async (runId: string): Promise<Op[]> =>
    (await host.api('GET', `/v1/admin/runs/${runId}/deliveries`)).body;

  it('puts the failed ops back in the queue; they are delivered in order once the receiver answers', async () => {
    receiver.mode = 'fail';
    const r = await host.api(
      'POST',
      '/v1/events',
      event('hooked', 'Para one.\n\nPara two.', { delivery: { surface: 'api' } }),
    );
    expect(r.status).toBe(202);
    const runId = r.body.run_id as string;
    const failed = await waitFor('failed ops', async () => {
      const all = await ops(runId);
      return all.length > 0 && all.every((o) => o.webhook_state === 'failed') && all;
    });
    expect(failed[0]).toMatchObject({ sequence: 1, attempts: 2 });
    expect(failed[0].last_error).toMatch(/500/);

    receiver.mode = 'ok';
    const retried = await host.api('POST', `/v1/admin/runs/${runId}/deliveries/retry`);
    expect(retried).toEqual({ status: 200, body: { run_id: runId, retried: failed.length } });

    const delivered = await waitFor('delivered ops', async () => {
      const all = await ops(runId);
      return all.every((o) => o.webhook_state === 'delivered') && all;
    });
    expect(delivered.map((o) => o.sequence)).toEqual(failed.map((o) => o.sequence));
    expect(delivered[0].attempts).toBe(1); // a fresh budget: the first attempt after the retry went through
    expect(receiver.acked(runId).map((o) => o.sequence)).toEqual(failed.map((o) => o.sequence));
    const listed = await host.api('GET', '/v1/admin/deliveries/failed?limit=100');
    expect((listed.body.items as { run_id: string }[]).filter((i) => i.run_id === runId)).toEqual([]);

    // Nothing failed any more: a second retry is a conflict naming the run.
    const again = await host.api('POST', `/v1/admin/runs/${runId}/deliveries/retry`);
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: 'conflict', details: { field: 'run_id' } });
  });

  it('refuses a run without failed ops (409), an unknown run (404), a bad id (400) and a platform key (403)', async () => {
    const plain = await host.api('POST', '/v1/events', event('plain', 'no webhook here'));
    const runId = plain.body.run_id as string;
    await waitFor(
      'plain run ends',
      async () => (await host.api('GET', `/v1/runs/${runId}`)).body.status === 'completed',
    );
    const none = await host.api('POST', `/v1/admin/runs/${runId}/deliveries/retry`);
    expect(none.status).toBe(409);
    expect(none.body.error.message).toMatch(/^run_id: .*no failed webhook ops/);

    const unknown = await host.api('POST', '/v1/admin/runs/00000000-0000-4000-8000-000000000000/deliveries/retry');
    expect(unknown.status).toBe(404);
    const bad = await host.api('POST', '/v1/admin/runs/not-a-run/deliveries/retry');
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.field).toBe('run_id');

    const key = (await host.api('POST', '/v1/admin/api-keys', { name: 'platform', role: 'platform' }, ADMIN_KEY)).body
      .key as string;
    const platform = await host.api('POST', `/v1/admin/runs/${runId}/deliveries/retry`, undefined, key);
    expect(platform.status).toBe(403);
  });
});
