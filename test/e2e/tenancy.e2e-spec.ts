import * as grpc from '@grpc/grpc-js';
import { Host, TestDatabase, dbRows, event, parseSse, startDemoRunner, waitFor, type Proc } from './harness';
import { HostApiClient } from './host-api-client';

/*
 * Tenancy (docs/tenancy.md) through the real HTTP API, on SQLite and PostgreSQL (E2E_DATABASE):
 * two workspaces, each with its own platform key, admin key and agent. Every route tried across
 * the boundary answers 404 (a foreign id reads like a missing one) or 403 and changes nothing; a
 * platform key naming another workspace's workspace_id is refused; a quota is hit and recovered.
 */

jest.setTimeout(180_000);

describe('tenancy: two workspaces on one host', () => {
  const db = new TestDatabase();
  const host = new Host(db);
  let runner: Proc;
  let runnerId: string;
  let pluginToken: string;
  const key: Record<string, string> = {};

  async function mintKey(name: string, role: 'platform' | 'admin', workspace_ids: string[] | undefined) {
    const r = await host.api('POST', '/v1/admin/api-keys', { name, role, workspace_ids });
    expect(r.status).toBe(201);
    return r.body.key as string;
  }

  /** A finished run of `agent` posted with `k`, in a conversation of its own. */
  async function finishedRun(agent: string, k: string, text = 'hello') {
    const r = await host.api('POST', '/v1/events', event(agent, text), k);
    expect(r.status).toBe(202);
    await host.sse(r.body.run_id as string);
    return { run_id: r.body.run_id as string, event_id: r.body.event_id as string };
  }

  beforeAll(async () => {
    await host.start();
    ({ runner, runnerId, token: pluginToken } = await startDemoRunner(host));
    for (const id of ['acme', 'globex']) {
      expect(
        (await host.api('POST', '/v1/admin/workspaces', { workspace_id: id, name: id.toUpperCase() })).status,
      ).toBe(201);
    }
    key.acme = await mintKey('acme platform', 'platform', ['acme']);
    key.globex = await mintKey('globex platform', 'platform', ['globex']);
    key.acmeAdmin = await mintKey('acme admin', 'admin', ['acme']);
    for (const [agent, ws] of [
      ['agent-acme', 'acme'],
      ['agent-globex', 'globex'],
    ]) {
      const r = await host.api('POST', '/v1/admin/agents', { agent_id: agent, runner_id: runnerId, workspace_id: ws });
      expect(r.status).toBe(201);
      expect(r.body.workspace_id).toBe(ws);
    }
  });

  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await db.drop();
  });

  it("behaviour #4: the run's workspace comes from the trusted context; an event naming another is rejected, a missing one is filled", async () => {
    // "A trusted ExecutionContext is mandatory; an event whose workspace_id differs from it is
    // rejected; a missing workspace id is filled from it."
    const filled = await finishedRun('agent-acme', key.acme);
    const auth = await host.api('GET', `/v1/admin/runs/${filled.run_id}/authorization`);
    expect(auth.body.authorization.scope.workspace_id).toBe('acme');
    const log = (await dbRows(db, 'event_log')).find((r) => r.event_id === filled.event_id);
    expect(log?.workspace_id).toBe('acme');

    const before = (await dbRows(db, 'events')).length;
    for (const k of [key.acme, undefined]) {
      // The platform key of acme, and even the global admin key: the agent decides.
      const named = event('agent-acme', 'spoofed');
      (named.conversation as Record<string, unknown>).workspace_id = 'globex';
      const r = await host.api('POST', '/v1/events', named, k);
      expect(r.status).toBe(403);
      expect(r.body.error.details.field).toBe('conversation.workspace_id');
    }
    const same = event('agent-acme', 'same workspace named');
    (same.conversation as Record<string, unknown>).workspace_id = 'acme';
    expect((await host.api('POST', '/v1/events', same, key.acme)).status).toBe(202);
    expect((await dbRows(db, 'events')).length).toBe(before + 1);
  });

  it('refuses every route across the boundary with 404/403 and changes nothing', async () => {
    const a = await finishedRun('agent-acme', key.acme, 'acme secret');
    const g = await finishedRun('agent-globex', key.globex, 'globex secret');

    // Admission: another workspace's agent does not exist for this key.
    const foreign = await host.api('POST', '/v1/events', event('agent-globex', 'x'), key.acme);
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.details.field).toBe('agent_id');

    // Read, cancel, stream, stream token, deliveries of another workspace's run: 404, as if missing.
    for (const [method, path] of [
      ['GET', `/v1/runs/${g.run_id}`],
      ['POST', `/v1/runs/${g.run_id}/cancel`],
      ['GET', `/v1/runs/${g.run_id}/events`],
      ['POST', `/v1/runs/${g.run_id}/stream-tokens`],
      ['GET', `/v1/runs/${g.run_id}/deliveries`],
    ] as const) {
      const r = await host.api(method, path, method === 'POST' ? {} : undefined, key.acme);
      expect({ path, status: r.status, message: r.body?.error?.message }).toEqual({
        path,
        status: 404,
        message: `run ${g.run_id} not found`,
      });
    }
    // An Idempotency-Key is host-wide (docs/tenancy.md): reused by another workspace it answers 409
    // without naming the other workspace's event; reused with its own agent it names its own.
    const reused = await host.api('POST', '/v1/events', event('agent-globex', 'first'), key.globex, {
      'idempotency-key': 'tenancy-shared-key',
    });
    expect(reused.status).toBe(202);
    const across = await host.api('POST', '/v1/events', event('agent-acme', 'other'), key.acme, {
      'idempotency-key': 'tenancy-shared-key',
    });
    expect(across.status).toBe(409);
    expect(JSON.stringify(across.body)).not.toContain(reused.body.event_id as string);
    const sameAgent = await host.api('POST', '/v1/events', event('agent-globex', 'changed'), key.globex, {
      'idempotency-key': 'tenancy-shared-key',
    });
    expect(sameAgent.status).toBe(409);
    expect(sameAgent.body.error.details.event_id).toBe(reused.body.event_id);
    // The owner still reads it.
    expect((await host.api('GET', `/v1/runs/${g.run_id}`, undefined, key.globex)).status).toBe(200);

    // Lists: only the key's own workspace.
    const listed = await host.api('GET', '/v1/runs?limit=100', undefined, key.acme);
    const ids = listed.body.items.map((r: { run_id: string }) => r.run_id);
    expect(ids).toContain(a.run_id);
    expect(ids).not.toContain(g.run_id);

    // History: a platform key reads its workspace's rows only.
    const gConv = (await dbRows(db, 'runs')).find((r) => r.run_id === g.run_id)!.conversation_id as string;
    const history = await host.api('GET', `/v1/conversations/${gConv}/transcript`, undefined, key.acme);
    expect(history.status).toBe(200);
    expect(history.body.items).toEqual([]);
    expect(
      (await host.api('GET', `/v1/conversations/${gConv}/transcript?workspace_id=globex`, undefined, key.acme)).status,
    ).toBe(403);
    const own = await host.api('GET', `/v1/conversations/${gConv}/transcript`, undefined, key.globex);
    expect(own.body.items.map((i: { content: string }) => i.content)).toContain('globex secret');

    // Admin views with a workspace admin key: another workspace's run, agent and workspace are 404.
    for (const [method, path] of [
      ['GET', `/v1/admin/runs/${g.run_id}/authorization`],
      ['GET', `/v1/admin/runs/${g.run_id}/audit`],
      ['GET', `/v1/admin/runs/${g.run_id}/deliveries`],
      ['POST', `/v1/admin/runs/${g.run_id}/deliveries/retry`],
      ['GET', '/v1/admin/agents/agent-globex'],
      ['PUT', '/v1/admin/agents/agent-globex'],
      ['DELETE', '/v1/admin/agents/agent-globex'],
      ['GET', '/v1/admin/workspaces/globex'],
      ['GET', '/v1/admin/workspaces/globex/usage'],
    ] as const) {
      const body = method === 'PUT' ? { runner_id: runnerId } : method === 'POST' ? {} : undefined;
      const r = await host.api(method, path, body, key.acmeAdmin);
      expect({ path, status: r.status }).toEqual({ path, status: 404 });
    }
    // Host-wide routes are for global admins.
    for (const [method, path] of [
      ['GET', '/v1/admin/plugins'],
      ['GET', '/v1/admin/runners'],
      ['POST', '/v1/admin/workspaces'],
    ] as const) {
      const r = await host.api(method, path, method === 'POST' ? { workspace_id: 'evil' } : undefined, key.acmeAdmin);
      expect({ path, status: r.status }).toEqual({ path, status: 403 });
    }
    // Platform keys are not admins at all.
    expect((await host.api('GET', '/v1/admin/agents', undefined, key.acme)).status).toBe(403);

    const agents = await host.api('GET', '/v1/admin/agents', undefined, key.acmeAdmin);
    expect(agents.body.items.map((x: { agent_id: string }) => x.agent_id)).toEqual(['agent-acme']);
    const workspaces = await host.api('GET', '/v1/admin/workspaces', undefined, key.acmeAdmin);
    expect(workspaces.body.map((w: { workspace_id: string }) => w.workspace_id)).toEqual(['acme']);
    const keys = await host.api('GET', '/v1/admin/api-keys', undefined, key.acmeAdmin);
    expect(new Set(keys.body.flatMap((k: { workspace_ids: string[] }) => k.workspace_ids))).toEqual(new Set(['acme']));
    // A workspace admin cannot mint keys for another workspace, nor create in it.
    const mint = await host.api(
      'POST',
      '/v1/admin/api-keys',
      { name: 'x', role: 'platform', workspace_ids: ['globex'] },
      key.acmeAdmin,
    );
    expect(mint.status).toBe(403);
    expect(mint.body.error.details.field).toBe('workspace_ids[0]');
    const create = await host.api(
      'POST',
      '/v1/admin/agents',
      { agent_id: 'intruder', runner_id: runnerId, workspace_id: 'globex' },
      key.acmeAdmin,
    );
    expect(create.status).toBe(403);
    expect(create.body.error.details.field).toBe('workspace_id');

    // Nothing changed: the other workspace's run and agent are as they were.
    expect((await host.api('GET', '/v1/admin/agents/agent-globex')).status).toBe(200);
    expect((await host.api('GET', '/v1/admin/agents/intruder')).status).toBe(404);
    expect((await dbRows(db, 'runs')).find((r) => r.run_id === g.run_id)?.status).toBe('completed');
  });

  it("refuses another workspace's interaction (submit by id, by event, admin listing) with 404 and changes nothing", async () => {
    const ask = { runner_config: { mode: 'interaction' }, delivery_policy: { enable_interactions: true } };
    for (const [agent_id, workspace_id] of [
      ['ask-acme', 'acme'],
      ['ask-globex', 'globex'],
    ]) {
      const r = await host.api('POST', '/v1/admin/agents', { agent_id, runner_id: runnerId, workspace_id, ...ask });
      expect(r.status).toBe(201);
    }
    const delivery = { surface: 'slack', reply_target: { target_type: 'group', target_id: 'G1' }, interactions: {} };
    const started = await host.api('POST', '/v1/events', event('ask-globex', 'hello', { delivery }), key.globex);
    expect(started.status).toBe(202);
    const runId = started.body.run_id as string;
    const request = await waitFor('the interaction request', async () => {
      const res = await fetch(`${host.http}/v1/runs/${runId}/deliveries`, {
        headers: { authorization: `Bearer ${key.globex}` },
      });
      const ops = parseSse(await res.text()).map(
        (e) => e.data as unknown as { op: string; payload: Record<string, any> },
      );
      return ops.find((o) => o.op === 'interaction.request');
    });
    const p = request.payload;
    const answer = { callback_token: p.callback_token, action_id: 'submit', values: { name: 'Ada', agree: true } };

    // Submit by id with acme's key and globex's real token: 404, as for an id that does not exist.
    const byId = await host.api('POST', `/v1/interactions/${p.id}/submit`, answer, key.acme);
    expect(byId.status).toBe(404);
    expect(byId.body.error.message).toBe(`interaction ${p.id} not found`);
    const missing = await host.api('POST', '/v1/interactions/no-such-interaction/submit', answer, key.acme);
    expect(missing.status).toBe(404);
    // As an event: naming globex's agent, the agent is not there; naming acme's own, the token is not.
    const asEvent = (agent_id: string) => ({
      agent_id,
      event: { event_type: 'interaction.submitted', source: 'platform' },
      input: { interaction: answer },
    });
    const foreignAgent = await host.api('POST', '/v1/events', asEvent('ask-globex'), key.acme);
    expect(foreignAgent.status).toBe(404);
    expect(foreignAgent.body.error.details.field).toBe('agent_id');
    const ownAgent = await host.api('POST', '/v1/events', asEvent('ask-acme'), key.acme);
    expect(ownAgent.status).toBe(404);
    expect(ownAgent.body.error.details.field).toBe('callback_token');

    // The admin listing: acme's admin does not see it; the global admin does, still pending.
    const acmeList = await host.api('GET', '/v1/admin/interactions?limit=100', undefined, key.acmeAdmin);
    expect(acmeList.status).toBe(200);
    expect(acmeList.body.items.map((i: { id: string }) => i.id)).not.toContain(p.id);
    const all = await host.api('GET', '/v1/admin/interactions?limit=100');
    expect(all.body.items.find((i: { id: string }) => i.id === p.id)).toMatchObject({
      status: 'pending',
      run_id: runId,
    });

    // Nothing changed: the token still works once for its own workspace.
    const ok = await host.api('POST', `/v1/interactions/${p.id}/submit`, answer, key.globex);
    expect(ok.status).toBe(202);
    expect(ok.body).toMatchObject({ id: p.id, status: 'submitted' });
    expect(
      (await host.api('GET', '/v1/admin/interactions?status=submitted&limit=100', undefined, key.acmeAdmin)).body.items,
    ).toEqual([]);
  });

  it('answers 429 with Retry-After naming the quota, and admits again once it refills', async () => {
    const set = await host.api('PUT', '/v1/admin/workspaces/acme', { quotas: { runs_per_second: 1, runs_burst: 1 } });
    expect(set.status).toBe(200);
    expect(set.body.quotas).toEqual({ runs_per_second: 1, runs_burst: 1 });
    const bad = await host.api('PUT', '/v1/admin/workspaces/acme', { quotas: { runs_per_second: 0 } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.field).toBe('quotas.runs_per_second');

    // One admission takes the bucket's only token; the next one at once is refused.
    const one = event('agent-acme', 'one', {
      event: { event_type: 'message.received', source: 'api', event_id: `q-${Date.now()}` },
    });
    let first: { run_id?: string } = {};
    await waitFor('admitted', async () => {
      const r = await host.api('POST', '/v1/events', one, key.acme);
      first = r.body;
      return r.status === 202;
    });
    const res = await fetch(`${host.http}/v1/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key.acme}` },
      body: JSON.stringify(event('agent-acme', 'two')),
    });
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const refused = (await res.json()) as { error: { details: Record<string, unknown> } };
    expect(refused.error.details).toMatchObject({ quota: 'runs_per_second', workspace_id: 'acme', limit: 1 });
    // A duplicate of the admitted event (a platform's retry) still gets its original answer: a
    // duplicate spends no token and is never refused by the rate.
    const replay = await fetch(`${host.http}/v1/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key.acme}` },
      body: JSON.stringify(one),
    });
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.json()).toMatchObject({ disposition: 'started', run_id: first.run_id });
    // The other workspace is not affected.
    expect((await host.api('POST', '/v1/events', event('agent-globex', 'free'), key.globex)).status).toBe(202);
    // Recovered: once the bucket refills the same workspace is admitted again.
    await waitFor('admitted again', async () => {
      const r = await host.api('POST', '/v1/events', event('agent-acme', 'again'), key.acme);
      return r.status === 202;
    });
    const usage = await host.api('GET', '/v1/admin/workspaces/acme/usage', undefined, key.acmeAdmin);
    expect(usage.status).toBe(200);
    expect(usage.body.runs_per_second.limit).toBe(1);
    expect(usage.body.active_runs).toEqual({ used: expect.any(Number), limit: null });
    expect((await host.api('PUT', '/v1/admin/workspaces/acme', { quotas: {} })).status).toBe(200);
  });

  describe('counted quotas: hit (429, Retry-After, quota named) and recovered', () => {
    const STALL = { runner_config: { mode: 'stall', timeout: 0 } };
    const quotas = async (q: Record<string, number>) =>
      expect((await host.api('PUT', '/v1/admin/workspaces/acme', { quotas: q })).status).toBe(200);
    /** A raw POST /v1/events as acme, for the status and the Retry-After header. */
    const post = async (body: unknown) => {
      const res = await fetch(`${host.http}/v1/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key.acme}` },
        body: JSON.stringify(body),
      });
      return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as any };
    };
    const expectRefused = (
      r: { status: number; retryAfter: string | null; body: any },
      quota: string,
      limit: number,
    ) => {
      expect({ status: r.status, details: r.body.error?.details }).toEqual({
        status: 429,
        details: { workspace_id: 'acme', quota, limit, retry_after_ms: expect.any(Number) },
      });
      expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
    };
    const cancelled = async (runId: string) => {
      expect((await host.api('POST', `/v1/runs/${runId}/cancel`, {}, key.acme)).status).toBeLessThan(300);
      await waitFor(`run ${runId} ended`, async () => {
        const r = await host.api('GET', `/v1/runs/${runId}`, undefined, key.acme);
        return ['completed', 'failed', 'cancelled'].includes(r.body?.status);
      });
    };

    beforeAll(async () => {
      const r = await host.api('POST', '/v1/admin/agents', {
        agent_id: 'stall-acme',
        runner_id: runnerId,
        workspace_id: 'acme',
        ...STALL,
        resource_policy: { allow_plugin_storage: true },
      });
      expect(r.status).toBe(201);
    });
    afterEach(async () => quotas({}));

    it('max_active_runs: a second running run is refused until the first ends', async () => {
      await quotas({ max_active_runs: 1 });
      const first = await post(event('stall-acme', 'one'));
      expect(first.status).toBe(202);
      const before = (await dbRows(db, 'runs')).length;
      expectRefused(await post(event('stall-acme', 'two')), 'max_active_runs', 1);
      expect((await dbRows(db, 'runs')).length).toBe(before);
      // Another workspace is not limited by acme's quota.
      expect((await host.api('POST', '/v1/events', event('agent-globex', 'free'), key.globex)).status).toBe(202);
      await cancelled(first.body.run_id);
      const again = await waitFor('admitted again', async () => {
        const r = await post(event('stall-acme', 'three'));
        return r.status === 202 ? r : null;
      });
      await cancelled(again.body.run_id);
    });

    it("max_steering_queue: a conversation's follow-up beyond the queue is refused until the queue drains", async () => {
      const conversation = { conversation_id: `conv-q-${Date.now()}` };
      const active = await post(event('stall-acme', 'busy', { conversation }));
      expect(active.status).toBe(202);
      await quotas({ max_steering_queue: 1 });
      const followUp = (text: string) =>
        post(
          event('stall-acme', text, {
            conversation,
            concurrency: 'queue',
          }),
        );
      const queued = await followUp('queued');
      expect(queued.status).toBe(202);
      expect(queued.body.disposition).toBe('queued');
      // The count is read at most once a second (docs/tenancy.md#quotas): a follow-up inside that
      // second may still be queued; after it, the full queue refuses.
      const refused = await waitFor('the queue is full', async () => {
        const r = await followUp('one too many');
        return r.status === 429 ? r : null;
      });
      expectRefused(refused, 'max_steering_queue', 1);
      const usage = await host.api('GET', '/v1/admin/workspaces/acme/usage', undefined, key.acmeAdmin);
      expect(usage.body.steering_queue.limit).toBe(1);
      expect(usage.body.steering_queue.used).toBeGreaterThanOrEqual(1);
      // Recovered: the runs end, the queued follow-ups run (and are ended), the queue drains.
      const cancelRunning = async () => {
        const runs = (await host.api('GET', '/v1/runs?limit=100', undefined, key.acme)).body.items;
        for (const run of runs as { run_id: string; status: string }[]) {
          if (run.status === 'running') {
            await host.api('POST', `/v1/runs/${run.run_id}/cancel`, {}, key.acme);
          }
        }
      };
      await waitFor('a follow-up accepted again', async () => {
        await cancelRunning();
        return (await followUp('after the drain')).status === 202;
      });
      await quotas({});
      await waitFor('no acme run left running', async () => {
        await cancelRunning();
        const runs = (await host.api('GET', '/v1/runs?limit=100', undefined, key.acme)).body.items;
        return !runs.some((r: { status: string }) => r.status === 'running' || r.status === 'queued');
      });
    });

    it('max_storage_bytes: a host-API storage write beyond it is refused until a delete frees room', async () => {
      const api = new HostApiClient(host.grpc, pluginToken);
      try {
        const run = await post(event('stall-acme', 'storage'));
        expect(run.status).toBe(202);
        const at = (k: string) => ({ run_id: run.body.run_id as string, area: 'plugin', key: k });
        await quotas({ max_storage_bytes: 64 });
        expect((await api.call('StorageSet', { ...at('a'), value: Buffer.alloc(40, 1) })).err).toBeUndefined();
        const over = await api.call('StorageSet', { ...at('b'), value: Buffer.alloc(40, 2) });
        expect({ code: over.err?.code, xcode: over.err?.xcode }).toEqual({
          code: grpc.status.RESOURCE_EXHAUSTED,
          xcode: 'rate_limited',
        });
        expect(over.err?.details).toContain('max_storage_bytes');
        expect((await api.call('StorageGet', at('b'))).res?.value ?? null).toBeFalsy();
        const usage = await host.api('GET', '/v1/admin/workspaces/acme/usage', undefined, key.acmeAdmin);
        expect(usage.body.storage_bytes).toEqual({ used: 40, limit: 64 });
        // Recovered: a delete frees the bytes (storage is counted fresh on every write).
        expect((await api.call('StorageDelete', at('a'))).err).toBeUndefined();
        expect((await api.call('StorageSet', { ...at('b'), value: Buffer.alloc(40, 2) })).err).toBeUndefined();
        await cancelled(run.body.run_id);
      } finally {
        api.close();
      }
    });
  });

  it('keeps a single-tenant install unchanged: the default workspace and the global admin key', async () => {
    const r = await host.api('POST', '/v1/admin/agents', { agent_id: 'plain', runner_id: runnerId });
    expect(r.body.workspace_id).toBe('default');
    const k = await mintKey('plain platform', 'platform', undefined);
    const listedKey = (await host.api('GET', '/v1/admin/api-keys')).body.find(
      (x: { name: string }) => x.name === 'plain platform',
    );
    expect(listedKey.workspace_ids).toEqual(['default']);
    await finishedRun('plain', k);
    expect((await host.api('DELETE', '/v1/admin/workspaces/default')).status).toBe(409);
  });
});
