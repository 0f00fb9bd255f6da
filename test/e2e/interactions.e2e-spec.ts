import { ADMIN_KEY, Host, TestDatabase, event, parseSse, startDemoRunner, waitFor, type Proc } from './harness';
import { WebhookReceiver } from './delivery-receiver';

jest.setTimeout(180_000);

const SECRET = 'whsec-e2e-interactions-0123';
const ENV = { RUNNERHOST_SECRET_HOOK: SECRET, WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_BASE_MS: '50' };
const REPLY_TARGET = { target_type: 'group', target_id: 'G1', message_id: 'm1' };
const ALL_TYPES = ['text', 'textarea', 'select', 'multiselect', 'number', 'boolean', 'file'];

interface Op {
  run_id: string;
  sequence: number;
  op: string;
  reply_target: Record<string, unknown> | null;
  payload: Record<string, any>;
}

/**
 * Structured interactions over real HTTP and gRPC (docs/interactions.md), behaviour #40 of the
 * protocol reference: "action.requested with interaction.requested is executed only when
 * capability + permission + binding policy allow it, uses the frozen reply target (ignoring
 * runner target), defaults expiry to 30 min (max 24 h), stores a hashed one-time callback token,
 * and accepts exactly one valid submission; any other action is logged and ignored."
 */
describe('structured interactions', () => {
  const db = new TestDatabase();
  let host = new Host(db, ENV);
  const hook = new WebhookReceiver(SECRET);
  let runner: Proc;
  let runnerId: string;

  const deliveries = async (runId: string): Promise<Op[]> => {
    const res = await fetch(`${host.http}/v1/runs/${runId}/deliveries`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
    });
    expect(res.status).toBe(200);
    return parseSse(await res.text()).map((e) => e.data as unknown as Op);
  };
  const finished = async (runId: string) =>
    waitFor(`run ${runId} finished`, async () => {
      const r = await host.api('GET', `/v1/runs/${runId}`);
      return ['completed', 'failed'].includes(r.body?.status) ? r.body : null;
    });
  const ask = async (agentId: string, extra: Record<string, unknown> = {}) => {
    const r = await host.api(
      'POST',
      '/v1/events',
      event(agentId, 'hello', {
        delivery: { surface: 'slack', reply_target: REPLY_TARGET, interactions: { field_types: ALL_TYPES } },
        ...extra,
      }),
    );
    expect(r.status).toBe(202);
    const run = await finished(r.body.run_id);
    const ops = await deliveries(r.body.run_id);
    return { runId: r.body.run_id as string, run, request: ops.find((o) => o.op === 'interaction.request') };
  };
  const submit = (id: string, body: unknown) => host.api('POST', `/v1/interactions/${id}/submit`, body);

  beforeAll(async () => {
    await hook.start();
    await host.start();
    ({ runner, runnerId } = await startDemoRunner(host));
    const on = { enable_interactions: true };
    for (const [agent_id, runner_config, delivery_policy] of [
      ['ask', { mode: 'interaction' }, { ...on, webhook: { url: hook.url, secret_env: 'RUNNERHOST_SECRET_HOOK' } }],
      ['ask-off', { mode: 'interaction' }, {}],
      ['ask-too-long', { mode: 'interaction', interaction_expires_in: 25 * 3600 }, on],
      ['ask-short', { mode: 'interaction', interaction_expires_in: 2 }, on],
      ['other-action', { mode: 'interaction', action: 'platform.kick' }, on],
    ] as const) {
      const r = await host.api('POST', '/v1/admin/agents', {
        agent_id,
        runner_id: runnerId,
        runner_config,
        delivery_policy,
      });
      expect(r.status).toBe(201);
    }
  });

  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await hook.stop();
    await db.drop();
  });

  it('a form reaches the deliveries SSE and the webhook; one submission wins and reaches the runner', async () => {
    const { runId, run, request } = await ask('ask');
    expect(run.status).toBe('completed');
    expect(request).toBeDefined();
    const p = request!.payload;
    // The run's frozen reply target, not the runner's `target`.
    expect(request!.reply_target).toEqual(REPLY_TARGET);
    expect(p.presentation).toBe('form');
    expect(p.fallback_text).toMatch(/favourite colour/);
    expect(p.callback_token).toMatch(/^rhit_/);
    expect(p.request.fields.map((f: { id: string }) => f.id)).toEqual(['name', 'color', 'agree']);
    // Default expiry: 30 minutes.
    expect(p.expires_at * 1000 - Date.now()).toBeGreaterThan(29 * 60 * 1000);
    expect(p.expires_at * 1000 - Date.now()).toBeLessThanOrEqual(30 * 60 * 1000);
    await waitFor('the op on the webhook', () =>
      Promise.resolve(
        hook.received.find((x) => x.op.run_id === runId && x.op.op === 'interaction.request' && x.signed),
      ),
    );

    const pending = await host.api('GET', '/v1/admin/interactions');
    const row = pending.body.items.find((i: { id: string }) => i.id === p.id);
    expect(row).toMatchObject({ run_id: runId, agent_id: 'ask', status: 'pending', interaction_id: 'profile' });
    expect(row.age_ms).toBeGreaterThanOrEqual(0);
    // Nothing of the token is shown: only the hash is stored.
    expect(JSON.stringify(pending.body)).not.toContain(p.callback_token);

    // Invalid values: field-named 400s, nothing changes.
    const bad = [
      [{ values: { color: 'green' } }, 'values.name'],
      [{ values: { name: 'Ada', color: 'blue' } }, 'values.color'],
      [{ values: { name: 'Ada', agree: 'yes' } }, 'values.agree'],
      [{ values: { name: 'Ada', shoe: 42 } }, 'values.shoe'],
      [{ action_id: 'launch', values: { name: 'Ada' } }, 'action_id'],
    ] as const;
    for (const [body, field] of bad) {
      const r = await submit(p.id, { callback_token: p.callback_token, ...body });
      expect(r.status).toBe(400);
      expect(r.body.error.details.field).toBe(field);
      expect(r.body.error.message).toContain(field);
    }
    // A forged token, and a real token of another interaction id: 403.
    const forged = await submit(p.id, { callback_token: 'rhit_AAAAAAAAAAAAAAAAAAAAAAAA', values: { name: 'Eve' } });
    expect(forged.status).toBe(403);
    expect(forged.body.error.details.field).toBe('callback_token');

    const ok = await submit(p.id, {
      callback_token: p.callback_token,
      action_id: 'submit',
      values: { name: 'Ada', color: 'green', agree: true },
    });
    expect(ok.status).toBe(202);
    expect(ok.body).toMatchObject({ id: p.id, status: 'submitted', disposition: 'started' });
    const again = await submit(p.id, { callback_token: p.callback_token, values: { name: 'Eve' } });
    expect(again.status).toBe(409);
    expect(again.body.error.details.status).toBe('submitted');

    // The runner receives the submission as a new interaction.submitted run of the conversation.
    const next = await finished(ok.body.run_id);
    expect(next.status).toBe('completed');
    const results = await host.sse(ok.body.run_id);
    const text = results.find((e) => e.event === 'message.completed')!.data.data.message.content as string;
    expect(text).toBe('received "profile": action="submit" values={"name":"Ada","color":"green","agree":true}');

    // The outcome is an op too, on the requesting run.
    await waitFor('interaction.update submitted', async () =>
      (await deliveries(runId)).find((o) => o.op === 'interaction.update' && o.payload.status === 'submitted'),
    );
    const submitted = await host.api('GET', '/v1/admin/interactions?status=submitted');
    expect(submitted.body.items.map((i: { id: string }) => i.id)).toContain(p.id);
  });

  it('POST /v1/events with interaction.submitted: the token decides; a second one is refused', async () => {
    const { request } = await ask('ask');
    const p = request!.payload;
    const body = (values: Record<string, unknown>, token = p.callback_token) => ({
      agent_id: 'ask',
      event: { event_type: 'interaction.submitted', source: 'platform' },
      input: { interaction: { callback_token: token, values } },
    });
    const invalid = await host.api('POST', '/v1/events', body({ name: 7 }));
    expect(invalid.status).toBe(400);
    expect(invalid.body.error.details.field).toBe('values.name');
    const forged = await host.api('POST', '/v1/events', body({ name: 'x' }, 'rhit_BBBBBBBBBBBBBBBBBBBBBBBB'));
    expect(forged.status).toBe(403);
    const ok = await host.api('POST', '/v1/events', body({ name: 'Grace' }));
    expect(ok.status).toBe(202);
    expect(ok.body.event_id).toBe(`interaction:${p.id}`);
    const run = await finished(ok.body.run_id);
    expect(run.status).toBe('completed');
    const second = await host.api('POST', '/v1/events', body({ name: 'Grace' }));
    expect(second.status).toBe(409);
  });

  it('20 concurrent submissions of one token: exactly one accepted', async () => {
    const { request } = await ask('ask');
    const p = request!.payload;
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        submit(p.id, { callback_token: p.callback_token, values: { name: `n${i}` } }),
      ),
    );
    expect(answers.filter((a) => a.status === 202)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(19);
  });

  it('refused without the agent policy, or when a limit breaks (field named); other actions are ignored', async () => {
    const off = await ask('ask-off');
    expect(off.run.status).toBe('failed');
    expect(off.run.error_code ?? off.run.status_reason).toBeDefined();
    expect(JSON.stringify(off.run)).toContain('enable_interactions');
    expect(off.request).toBeUndefined();

    const long = await ask('ask-too-long');
    expect(long.run.status).toBe('failed');
    expect(JSON.stringify(long.run)).toContain('payload.expires_at');

    const other = await ask('other-action');
    expect(other.run.status).toBe('completed');
    expect(other.request).toBeUndefined();
    const results = await host.sse(other.runId);
    expect(results.find((e) => e.event === 'action.requested')!.data.data.action).toBe('platform.kick');
  });

  it('a pending interaction expires across a restart; its token is then refused', async () => {
    const { runId, request } = await ask('ask-short');
    const p = request!.payload;
    await host.stop();
    // The expiry passes while the host is down.
    await waitFor('expiry passed', () => Promise.resolve(Date.now() > p.expires_at * 1000 + 200), 10_000);
    host = new Host(db, ENV);
    await host.start();
    await waitFor('interaction.update expired', async () =>
      (await deliveries(runId)).find((o) => o.op === 'interaction.update' && o.payload.status === 'expired'),
    );
    const expired = await host.api('GET', '/v1/admin/interactions?status=expired');
    expect(expired.body.items.map((i: { id: string }) => i.id)).toContain(p.id);
    const late = await submit(p.id, { callback_token: p.callback_token, values: { name: 'Late' } });
    expect(late.status).toBe(409);
    expect(late.body.error.details.status).toBe('expired');
  });
});
