import { Host, TestDatabase, event, startDemoRunner, waitFor, type Proc } from './harness';
import { WebhookReceiver } from './delivery-receiver';

jest.setTimeout(120_000);

const SECRET = 'whsec-e2e-fairness-0123';
const DEAD_RUNS = 32;
const ENV = {
  RUNNERHOST_SECRET_HOOK: SECRET,
  WEBHOOK_ALLOW_PRIVATE: 'true',
  // Long enough that no attempt to the dead receiver can have timed out while the test runs:
  // whatever the healthy receiver gets, it got while the dead one's requests were still hanging.
  WEBHOOK_TIMEOUT_MS: '30000',
  WEBHOOK_CONCURRENCY: '16',
  WEBHOOK_ENDPOINT_CONCURRENCY: '4',
};

interface OutboxOp {
  sequence: number;
  webhook_state: string;
  attempts: number;
}

/**
 * One webhook endpoint that never answers must not delay another agent's deliveries (fair
 * scheduling across endpoints, libs/delivery/src/webhook/endpoint-scheduler.ts).
 */
describe('webhook fairness: a dead endpoint beside a healthy one', () => {
  const db = new TestDatabase();
  const host = new Host(db, ENV);
  const dead = new WebhookReceiver(SECRET);
  const healthy = new WebhookReceiver(SECRET);
  let runner: Proc;

  const outbox = async (runId: string): Promise<OutboxOp[]> => {
    const r = await host.api('GET', `/v1/admin/runs/${runId}/deliveries`);
    expect(r.status).toBe(200);
    return r.body as OutboxOp[];
  };
  const post = async (agent: string, text: string) => {
    const r = await host.api('POST', '/v1/events', event(agent, text, { delivery: { surface: 'api' } }));
    expect(r.status).toBe(202);
    return r.body.run_id as string;
  };

  beforeAll(async () => {
    dead.mode = 'hang';
    await dead.start();
    await healthy.start();
    await host.start();
    let runnerId: string;
    ({ runner, runnerId } = await startDemoRunner(host));
    for (const [agent, receiver] of [
      ['dead-hook', dead],
      ['live-hook', healthy],
    ] as const) {
      const r = await host.api('POST', '/v1/admin/agents', {
        agent_id: agent,
        runner_id: runnerId,
        runner_config: { mode: 'echo' },
        delivery_policy: { webhook: { url: receiver.url, secret_env: 'RUNNERHOST_SECRET_HOOK' } },
      });
      expect(r.status).toBe(201);
    }
  });

  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await dead.stop();
    await healthy.stop();
    await db.drop();
  });

  it("delivers B's ops while A's requests still hang; A holds only its per-endpoint share of the workers", async () => {
    const deadRuns: string[] = [];
    for (let i = 0; i < DEAD_RUNS; i++) {
      deadRuns.push(await post('dead-hook', `dead run ${i}`));
    }
    // A's runs are done and its receiver holds its share of the workers, hanging.
    await waitFor('dead endpoint busy', () => Promise.resolve(dead.received.length >= 4), 60_000);
    for (const runId of deadRuns) {
      await waitFor('dead run ended', async () => (await host.api('GET', `/v1/runs/${runId}`)).body.finished_at);
    }

    const liveRun = await post('live-hook', 'healthy endpoint');
    await waitFor('healthy delivery', async () => {
      const ops = await outbox(liveRun);
      return ops.length > 0 && ops.every((o) => o.webhook_state === 'delivered');
    });
    expect(healthy.acked(liveRun).map((o) => o.op)).toContain('message.final');

    // Not one of A's attempts has ended yet (a timed-out attempt is recorded as attempts 1):
    // B was delivered while A's requests were still hanging, not after their timeouts.
    const deadOps = (await Promise.all(deadRuns.map(outbox))).flat();
    expect(deadOps.length).toBeGreaterThanOrEqual(DEAD_RUNS);
    expect(deadOps.every((o) => o.webhook_state === 'pending' && o.attempts === 0)).toBe(true);
    // The dead endpoint got exactly its per-endpoint share of concurrent requests, not all 16 workers.
    expect(dead.received).toHaveLength(4);
    expect(new Set(dead.received.map((r) => r.op.run_id)).size).toBe(4);
    expect(dead.received.every((r) => r.signed && r.answer === 'hang')).toBe(true);
  });
});
