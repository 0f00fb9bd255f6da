import { createHash } from 'node:crypto';
import { ADMIN_KEY, Host, TestDatabase, dbRows, event, parseSse, waitFor } from './harness';
import { RawPlugin, fromStruct, manifestFor } from './raw-plugin';

jest.setTimeout(120_000);

/*
 * Behaviour #40 of the Runner Protocol v1 host reference, clause by clause, through a hand-driven
 * gRPC runner (docs/interactions.md):
 *
 *   "`action.requested` with `interaction.requested` is executed only when capability + permission
 *   + binding policy allow it, uses the frozen reply target (ignoring runner `target`), defaults
 *   expiry to 30 min (max 24 h), stores a hashed one-time callback token, and accepts exactly one
 *   valid submission; any other action is logged and ignored."
 */

const AUTHOR = 'b40';
const PLUGIN = 'raw';
const REPLY_TARGET = { target_type: 'group', target_id: 'G40', message_id: 'm40' };
const RUNNER_TARGET = { target_type: 'user', target_id: 'SOMEONE-ELSE' };

const runner = (name: string, caps: boolean, perm: boolean) => ({
  ...manifestFor(AUTHOR, PLUGIN),
  id: `plugin:${AUTHOR}/${PLUGIN}/${name}`,
  name,
  capabilities: { streaming: true, ...(caps ? { interactions: true } : {}) },
  permissions: perm ? { interactions: ['request'] } : {},
});

const request = (over: Record<string, unknown> = {}) => ({
  interaction_id: 'confirm',
  kind: 'confirmation',
  title: 'Go ahead?',
  actions: [{ id: 'yes', label: 'Yes', style: 'primary' }],
  fallback_text: 'Reply yes to go ahead.',
  ...over,
});

describe('behaviour #40: structured interactions', () => {
  const db = new TestDatabase();
  const host = new Host(db);
  let plugin: RawPlugin;

  const runWith = async (agentId: string, action: string, payload: Record<string, unknown>) => {
    const r = await host.api(
      'POST',
      '/v1/events',
      event(agentId, 'ask me', { delivery: { surface: 'slack', reply_target: REPLY_TARGET } }),
    );
    expect(r.status).toBe(202);
    const msg = await plugin.next();
    const runId = msg.run.context.run_id as string;
    expect(runId).toBe(r.body.run_id);
    plugin.result(runId, 'action.requested', { action, target: RUNNER_TARGET, payload }, 1);
    plugin.result(runId, 'run.completed', { finish_reason: 'interaction_requested' }, 2);
    const run = await waitFor(`run ${runId} ended`, async () => {
      const g = await host.api('GET', `/v1/runs/${runId}`);
      return ['completed', 'failed'].includes(g.body?.status) ? g.body : null;
    });
    const res = await fetch(`${host.http}/v1/runs/${runId}/deliveries`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
    });
    const ops = parseSse(await res.text()).map((e) => e.data as any);
    return { runId, run, op: ops.find((o) => o.op === 'interaction.request') };
  };

  beforeAll(async () => {
    await host.start();
    const token = (await host.api('POST', '/v1/admin/plugins', { author: AUTHOR, name: PLUGIN })).body.token;
    plugin = new RawPlugin(host.grpc, token);
    plugin.hello(AUTHOR, PLUGIN, [
      runner('full', true, true),
      runner('nocap', false, true),
      runner('noperm', true, false),
    ]);
    expect((await plugin.next()).welcome.runners).toHaveLength(3);
    const on = { enable_interactions: true };
    for (const [agent_id, name, delivery_policy] of [
      ['all-three', 'full', on],
      ['no-policy', 'full', {}],
      ['no-capability', 'nocap', on],
      ['no-permission', 'noperm', on],
    ] as const) {
      const r = await host.api('POST', '/v1/admin/agents', {
        agent_id,
        runner_id: `plugin:${AUTHOR}/${PLUGIN}/${name}`,
        delivery_policy,
      });
      expect(r.status).toBe(201);
    }
  });

  afterAll(async () => {
    plugin?.close();
    await host.stop();
    await db.drop();
  });

  it('is executed only when capability + permission + binding policy allow it', async () => {
    for (const agent of ['no-policy', 'no-capability', 'no-permission']) {
      const { run, op } = await runWith(agent, 'interaction.requested', request());
      expect({ agent, status: run.status, op }).toEqual({ agent, status: 'failed', op: undefined });
      expect(JSON.stringify(run)).toMatch(/capabilities\.interactions|permissions\.interactions|enable_interactions/);
    }
    const { run, op } = await runWith('all-three', 'interaction.requested', request());
    expect(run.status).toBe('completed');
    expect(op).toBeDefined();
  });

  it('uses the frozen reply target, ignoring the runner target', async () => {
    const { op } = await runWith('all-three', 'interaction.requested', request({ interaction_id: 'target' }));
    expect(op.reply_target).toEqual(REPLY_TARGET);
    expect(JSON.stringify(op)).not.toContain('SOMEONE-ELSE');
  });

  it('defaults expiry to 30 min, at most 24 h', async () => {
    const before = Date.now();
    const { op } = await runWith('all-three', 'interaction.requested', request({ interaction_id: 'default' }));
    const ms = op.payload.expires_at * 1000 - before;
    expect(ms).toBeGreaterThan(29 * 60_000);
    expect(ms).toBeLessThanOrEqual(30 * 60_000 + 1000);
    const max = Math.floor(Date.now() / 1000) + 24 * 3600 - 60;
    const ok = await runWith('all-three', 'interaction.requested', request({ interaction_id: 'max', expires_at: max }));
    expect(ok.op.payload.expires_at).toBe(max);
    const over = Math.floor(Date.now() / 1000) + 24 * 3600 + 60;
    const long = await runWith(
      'all-three',
      'interaction.requested',
      request({ interaction_id: 'over', expires_at: over }),
    );
    expect(long.run.status).toBe('failed');
    expect(JSON.stringify(long.run)).toContain('payload.expires_at');
  });

  it('stores a hashed one-time callback token and accepts exactly one valid submission', async () => {
    const { op } = await runWith('all-three', 'interaction.requested', request({ interaction_id: 'once' }));
    const token = op.payload.callback_token as string;
    const rows = await dbRows(db, 'interactions');
    const row = rows.find((r) => r.id === op.payload.id)!;
    expect(row.callback_token_hash).toBe(createHash('sha256').update(token).digest('hex'));
    expect(JSON.stringify(rows)).not.toContain(token);

    const submit = () =>
      host.api('POST', `/v1/interactions/${op.payload.id}/submit`, { callback_token: token, action_id: 'yes' });
    const answers = await Promise.all([submit(), submit(), submit(), submit()]);
    expect(answers.map((a) => a.status).sort()).toEqual([202, 409, 409, 409]);
    expect((await submit()).status).toBe(409);
    // The one valid submission reaches the runner as an interaction.submitted event.
    const msg = await plugin.next();
    const ctx = msg.run.context;
    expect(ctx.event.event_type).toBe('interaction.submitted');
    expect(fromStruct(ctx.input.interaction)).toMatchObject({ interaction_id: 'once', action_id: 'yes' });
    plugin.result(ctx.run_id, 'run.completed', { finish_reason: 'stop' }, 1);
  });

  it('any other action is logged and ignored', async () => {
    const { run, op } = await runWith('all-three', 'platform.kick', { user: 'x' });
    expect(run.status).toBe('completed');
    expect(op).toBeUndefined();
    expect((await dbRows(db, 'interactions')).some((r) => r.run_id === run.run_id)).toBe(false);
  });
});
