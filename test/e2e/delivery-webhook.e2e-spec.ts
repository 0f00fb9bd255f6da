import { Host, TestDatabase, event, startDemoRunner, waitFor, type Proc } from './harness';
import { WebhookReceiver, type ReceivedOp } from './delivery-receiver';

jest.setTimeout(120_000);

const SECRET = 'whsec-e2e-0123456789';
/** How long the receiver stays down in the backoff test (the "a minute", shortened; raise it to check). */
const DOWN_MS = Number(process.env.E2E_WEBHOOK_DOWN_MS ?? 3000);
const WEBHOOK_ENV = {
  RUNNERHOST_SECRET_HOOK: SECRET,
  WEBHOOK_ALLOW_PRIVATE: 'true',
  WEBHOOK_RETRY_BASE_MS: '50',
  WEBHOOK_RETRY_MAX_MS: '400',
  // Long enough for a loaded machine's receiver to answer in time: an answer the host gave up on
  // is sent again (at-least-once), which the exactly-once checks below would count as a duplicate.
  WEBHOOK_TIMEOUT_MS: '2000',
  WEBHOOK_MAX_ATTEMPTS: '1000',
  // The endpoint's breaker opens after 5 failures in a row; its open period stays within the
  // retry cap here, so the backoff figures below hold.
  WEBHOOK_BREAKER_OPEN_MS: '200',
};

/** Every op the SSE shows for the run (the outbox), to compare with what the webhook got. */
async function outbox(
  host: Host,
  runId: string,
): Promise<
  { sequence: number; delivery_id: string; webhook_state: string; attempts: number; last_error: string | null }[]
> {
  const r = await host.api('GET', `/v1/admin/runs/${runId}/deliveries`);
  expect(r.status).toBe(200);
  return r.body;
}

/** Acknowledged ops of a run are exactly the outbox, in order, each once; every request was signed. */
function expectInOrder(receiver: WebhookReceiver, runId: string, count: number): ReceivedOp[] {
  const acked = receiver.acked(runId);
  expect(acked.map((o) => o.sequence)).toEqual(Array.from({ length: count }, (_, i) => i + 1));
  const all = receiver.ofRun(runId);
  expect(all.every((r) => r.signed)).toBe(true);
  // Never out of order: the requests of a run go forward, repeating only the op not yet acknowledged.
  for (let i = 1; i < all.length; i++) {
    expect(all[i].op.sequence).toBeGreaterThanOrEqual(all[i - 1].op.sequence);
    if (all[i].op.sequence === all[i - 1].op.sequence) {
      expect(all[i - 1].answer).not.toBe(200);
      // A duplicate is the same op: same body, same idempotency key.
      expect(all[i].raw).toBe(all[i - 1].raw);
      expect(all[i].headers['idempotency-key']).toBe(all[i - 1].headers['idempotency-key']);
    }
  }
  for (const r of all) {
    expect(r.headers['idempotency-key']).toBe(r.op.idempotency_key);
    expect(r.headers['x-runnerhost-delivery-id']).toBe(r.op.delivery_id);
  }
  return acked;
}

describe('webhook delivery against a real local receiver', () => {
  const db = new TestDatabase();
  let host = new Host(db, WEBHOOK_ENV);
  const receiver = new WebhookReceiver(SECRET);
  let runner: Proc;

  const start = async (text: string) => {
    const r = await host.api(
      'POST',
      '/v1/events',
      event('hooked', text, { delivery: { surface: 'telegram', reply_target: { chat_id: 7 } } }),
    );
    expect(r.status).toBe(202);
    return r.body.run_id as string;
  };
  const ended = (runId: string) =>
    waitFor('run end', async () => (await host.api('GET', `/v1/runs/${runId}`)).body.finished_at !== null, 30_000);
  const allDelivered = (runId: string) =>
    waitFor(
      'every op delivered',
      async () => {
        const ops = await outbox(host, runId);
        return ops.length > 0 && ops.every((o) => o.webhook_state === 'delivered') && ops;
      },
      60_000,
    );

  beforeAll(async () => {
    await receiver.start();
    await host.start();
    let runnerId: string;
    ({ runner, runnerId } = await startDemoRunner(host));
    const r = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'hooked',
      runner_id: runnerId,
      runner_config: { mode: 'echo', chunk_delay_ms: 5 },
      delivery_policy: {
        edit_interval_ms: 100,
        min_edit_chars: 0,
        webhook: { url: receiver.url, secret_env: 'RUNNERHOST_SECRET_HOOK' },
      },
    });
    expect(r.status).toBe(201);
  });

  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await receiver.stop();
    await db.drop();
  });

  it('a receiver that fails, then times out, then recovers gets every op once acknowledged, in order', async () => {
    receiver.mode = 'fail';
    const runId = await start(Array.from({ length: 300 }, (_, i) => `word${i}`).join(' '));
    await waitFor('failed attempts', () =>
      Promise.resolve(receiver.ofRun(runId).filter((r) => r.answer === 500).length >= 3),
    );
    receiver.mode = 'hang';
    await waitFor('timed-out attempts', () =>
      Promise.resolve(receiver.ofRun(runId).filter((r) => r.answer === 'hang').length >= 2),
    );
    receiver.mode = 'ok';
    await ended(runId);
    const ops = await allDelivered(runId);
    const acked = expectInOrder(receiver, runId, ops.length);
    expect(acked.map((o) => o.delivery_id)).toEqual(ops.map((o) => o.delivery_id));
    expect(acked[acked.length - 1]).toMatchObject({ op: 'message.final', agent_id: 'hooked' });
    expect(acked[acked.length - 1].payload.text).toBe(Array.from({ length: 300 }, (_, i) => `word${i}`).join(' '));
    expect(ops[0].attempts).toBeGreaterThanOrEqual(6); // 3 refusals + 2 timeouts + the success
  });

  it('a receiver down for a while: the backoff keeps trying, capped, and everything arrives in order after', async () => {
    await receiver.stop();
    const runId = await start('while the receiver is down');
    await ended(runId);
    const first = await waitFor('retries', async () => {
      const ops = await outbox(host, runId);
      return ops[0]?.attempts >= 2 && ops;
    });
    expect(first[0].webhook_state).toBe('pending');
    expect(first[0].last_error).toMatch(/ECONNREFUSED/);
    expect(first.slice(1).every((o) => o.attempts === 0)).toBe(true); // later ops wait for the first
    await new Promise((r) => setTimeout(r, DOWN_MS));
    const later = await outbox(host, runId);
    // Still trying: attempts keep coming at the capped interval (50, 100, 200, 400, 400… ms).
    expect(later[0].attempts).toBeGreaterThan(first[0].attempts);
    expect(later[0].attempts).toBeLessThanOrEqual(Math.ceil(DOWN_MS / 400) + 8);
    await receiver.start();
    const ops = await allDelivered(runId);
    expectInOrder(receiver, runId, ops.length);
  });

  it('undelivered ops survive a host restart and are delivered after it, in order', async () => {
    await receiver.stop();
    const runId = await start('delivered after a restart of the host');
    await ended(runId);
    const pending = await outbox(host, runId);
    expect(pending.every((o) => o.webhook_state === 'pending')).toBe(true);
    await host.stop();
    await receiver.start();
    host = new Host(db, WEBHOOK_ENV);
    await host.start();
    const ops = await allDelivered(runId);
    expect(ops.map((o) => o.delivery_id)).toEqual(pending.map((o) => o.delivery_id));
    expectInOrder(receiver, runId, ops.length);
  });
});

describe('webhook delivery: SSRF guard and exhausted retries', () => {
  const db = new TestDatabase();
  const host = new Host(db, { RUNNERHOST_SECRET_HOOK: SECRET, WEBHOOK_RETRY_BASE_MS: '20', WEBHOOK_MAX_ATTEMPTS: '2' });
  const receiver = new WebhookReceiver(SECRET);
  let runner: Proc;

  beforeAll(async () => {
    await receiver.start();
    await host.start();
    let runnerId: string;
    ({ runner, runnerId } = await startDemoRunner(host));
    const r = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'loopback',
      runner_id: runnerId,
      runner_config: { mode: 'echo' },
      delivery_policy: { webhook: { url: receiver.url, secret_env: 'RUNNERHOST_SECRET_HOOK' } },
    });
    expect(r.status).toBe(201);
  });

  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await receiver.stop();
    await db.drop();
  });

  it('refuses a loopback webhook by default; the ops fail after their retries and are listed for the admin', async () => {
    const r = await host.api(
      'POST',
      '/v1/events',
      event('loopback', 'Para one.\n\nPara two.', { delivery: { surface: 'api' } }),
    );
    expect(r.status).toBe(202);
    const runId = r.body.run_id as string;
    const failed = await waitFor('failed ops', async () => {
      const page = await host.api('GET', '/v1/admin/deliveries/failed?limit=10');
      const mine = (page.body.items as { run_id: string }[]).filter((i) => i.run_id === runId);
      return mine.length === 2 && page.body.items;
    });
    const [second, first] = failed as {
      sequence: number;
      attempts: number;
      last_error: string;
      webhook_state: string;
    }[];
    expect(first).toMatchObject({ sequence: 1, attempts: 2, webhook_state: 'failed' });
    expect(first.last_error).toMatch(/private or loopback/);
    // The op after it was never sent ahead of it.
    expect(second).toMatchObject({ sequence: 2, attempts: 0, webhook_state: 'failed' });
    expect(second.last_error).toMatch(/op 1 of the run failed/);
    expect(receiver.received).toHaveLength(0);
    expect(JSON.stringify(failed)).not.toContain('RUNNERHOST_SECRET_HOOK');
  });
});
