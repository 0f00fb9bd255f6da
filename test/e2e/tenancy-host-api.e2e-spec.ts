import { randomBytes } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { ScriptedOpenAIServer, scripts } from '@libs/testing';
import { Host, TestDatabase, dbRows, event, waitFor } from './harness';
import { HostApiClient, type RpcResult } from './host-api-client';
import { RawPlugin, manifestFor } from './raw-plugin';

/*
 * Tenancy over the host API (docs/tenancy.md#resources, #storage, #quotas), on SQLite and
 * PostgreSQL (E2E_DATABASE): one plugin serves an agent in each of two workspaces. From a run of
 * one workspace it tries to reach the other's model, tool, knowledge base and storage over real gRPC: refused,
 * audited, nothing changes (the other workspace's tool never runs). The model-tokens-per-day quota is hit (RESOURCE_EXHAUSTED naming it) and
 * recovered.
 */

jest.setTimeout(120_000);

const KEY = `sk-scripted-${randomBytes(20).toString('hex')}`;
const PERMISSIONS = {
  models: ['invoke', 'stream', 'count_tokens'],
  tools: ['detail', 'call'],
  storage: ['plugin'],
  knowledge_bases: ['retrieve'],
};
const HI = [{ role: 'user', content: 'hi' }];

describe('tenancy over the host API: one plugin serving two workspaces', () => {
  const db = new TestDatabase();
  const host = new Host(db, { SCRIPTED_KEY: KEY, SECRET_ENV_ALLOWLIST: 'SCRIPTED_KEY' });
  let server: ScriptedOpenAIServer;
  let plugin: RawPlugin;
  let api: HostApiClient;
  /** Each workspace's HTTP tool answers here; every request it received (the workspace's name). */
  let toolServer: http.Server;
  const toolHits: string[] = [];
  const run: Record<'acme' | 'globex', string> = { acme: '', globex: '' };
  const runs: string[] = [];

  const admin = (method: string, path: string, body?: unknown) => host.api(method, path, body);
  const startRun = async (agentId: string) => {
    const r = await host.api('POST', '/v1/events', event(agentId, 'use the model'));
    expect(r.status).toBe(202);
    const msg = await plugin.next();
    expect(msg.run.context.run_id).toBe(r.body.run_id);
    runs.push(r.body.run_id);
    return r.body.run_id as string;
  };
  const refusal = (r: RpcResult<unknown>) => (r.err ? { code: grpc.status[r.err.code], xcode: r.err.xcode } : r.res);
  /** The run's audit holds a denied row of `action` on `resource` (rows are written after the answer). */
  const audited = (runId: string, action: string, resource: string) =>
    waitFor(`audit ${action} denied`, async () =>
      (await admin('GET', `/v1/admin/runs/${runId}/audit?limit=100`)).body.items.some(
        (a: { action: string; resource: string; outcome: string }) =>
          a.action === action && a.resource === resource && a.outcome === 'denied',
      ),
    );
  const value = async (runId: string, key: string) => {
    const r = await api.call('StorageGet', { run_id: runId, area: 'plugin', key });
    return r.err ? `error ${grpc.status[r.err.code]}` : Buffer.from(r.res.value ?? []).toString();
  };

  beforeAll(async () => {
    server = await ScriptedOpenAIServer.start();
    toolServer = http.createServer((req, res) => {
      const ws = new URL(req.url ?? '/', 'http://x').pathname.slice(1);
      toolHits.push(ws);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ answer: `${ws} internal data` }));
    });
    await new Promise<void>((resolve) => toolServer.listen(0, '127.0.0.1', resolve));
    const toolBase = `http://127.0.0.1:${(toolServer.address() as AddressInfo).port}`;
    await host.start();
    const token = (await admin('POST', '/v1/admin/plugins', { author: 'ten', name: 'raw' })).body.token as string;
    plugin = new RawPlugin(host.grpc, token);
    plugin.hello('ten', 'raw', [
      manifestFor('ten', 'raw', {
        capabilities: { streaming: true, knowledge_retrieval: true, tool_calling: true },
        permissions: PERMISSIONS,
      }),
    ]);
    expect((await plugin.next()).welcome.runners).toHaveLength(1);
    api = new HostApiClient(host.grpc, token);
    for (const ws of ['acme', 'globex'] as const) {
      expect((await admin('POST', '/v1/admin/workspaces', { workspace_id: ws })).status).toBe(201);
      const model = await admin('POST', '/v1/admin/models', {
        model_id: `m-${ws}`,
        kind: 'chat',
        provider: 'openai',
        base_url: server.baseUrl,
        api_key_env: 'SCRIPTED_KEY',
        model_name: 'scripted-gpt',
        workspace_id: ws,
      });
      expect(model.status).toBe(201);
      const kb = await admin('POST', '/v1/admin/knowledge-bases', { kb_id: `kb-${ws}`, name: ws, workspace_id: ws });
      expect(kb.status).toBe(201);
      const doc = await admin('POST', `/v1/admin/knowledge-bases/kb-${ws}/documents`, {
        name: 'plans',
        content_type: 'text/plain',
        content: `The ${ws} launch plan is codenamed ${ws}-aurora.`,
      });
      expect(doc.status).toBe(201);
      const tools = await admin('POST', '/v1/admin/tools/sources', {
        source_id: `src-${ws}`,
        kind: 'http',
        workspace_id: ws,
        config: { tools: [{ name: `lookup_${ws}`, method: 'GET', url: `${toolBase}/${ws}` }] },
      });
      expect(tools.status).toBe(201);
      expect(tools.body.tools).toEqual([`lookup_${ws}`]);
      const agent = await admin('POST', '/v1/admin/agents', {
        agent_id: `a-${ws}`,
        runner_id: 'plugin:ten/raw/default',
        workspace_id: ws,
        resource_policy: {
          allowed_model_ids: [`m-${ws}`],
          allowed_kb_ids: [`kb-${ws}`],
          allowed_tool_names: [`lookup_${ws}`],
          allow_plugin_storage: true,
        },
      });
      expect(agent.status).toBe(201);
      run[ws] = await startRun(`a-${ws}`);
    }
  });

  afterAll(async () => {
    runs.forEach((runId, i) => plugin?.result(runId, 'run.completed', { finish_reason: 'stop' }, 1000 + i));
    await new Promise((r) => setTimeout(r, 300));
    api?.close();
    plugin?.close();
    await host.stop();
    await server?.close();
    toolServer?.closeAllConnections();
    await new Promise((resolve) => (toolServer ? toolServer.close(resolve) : resolve(undefined)));
    await db.drop();
  });

  it("an agent's policy cannot name another workspace's model", async () => {
    const r = await admin('POST', '/v1/admin/agents', {
      agent_id: 'a-greedy',
      runner_id: 'plugin:ten/raw/default',
      workspace_id: 'acme',
      resource_policy: { allowed_model_ids: ['m-globex'] },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.details.field).toBe('resource_policy.allowed_model_ids[0]');
    const authz = await admin('GET', `/v1/admin/runs/${run.acme}/authorization`);
    expect(authz.body.authorization.scope.workspace_id).toBe('acme');
    expect(authz.body.authorization.resources.models.map((m: { model_id: string }) => m.model_id)).toEqual(['m-acme']);
  });

  it("the plugin cannot reach another workspace's model from a run, nor its storage; nothing changes", async () => {
    const sentBefore = server.requests.length;
    for (const [method, action] of [
      ['InvokeModel', 'model.invoke'],
      ['CountTokens', 'model.count_tokens'],
    ] as const) {
      const r = await api.call(method, { run_id: run.acme, model_id: 'm-globex', messages: HI });
      expect(refusal(r)).toEqual({ code: 'PERMISSION_DENIED', xcode: 'unauthorized' });
      await audited(run.acme, action, 'model:m-globex');
    }
    const stream = await api.streamModel({ run_id: run.acme, model_id: 'm-globex', messages: HI });
    expect(refusal(stream)).toEqual({ code: 'PERMISSION_DENIED', xcode: 'unauthorized' });
    await audited(run.acme, 'model.stream', 'model:m-globex');
    expect(server.requests.length).toBe(sentBefore);

    // Plugin storage is per workspace: the same plugin and key name reach two separate values.
    const set = (runId: string, v: string) =>
      api.call('StorageSet', { run_id: runId, area: 'plugin', key: 'probe', value: Buffer.from(v) });
    expect((await set(run.globex, 'globex secret')).err).toBeUndefined();
    expect(await value(run.acme, 'probe')).not.toBe('globex secret');
    expect((await set(run.acme, 'acme value')).err).toBeUndefined();
    expect(await value(run.globex, 'probe')).toBe('globex secret');
    expect(await value(run.acme, 'probe')).toBe('acme value');
    const del = await api.call('StorageDelete', { run_id: run.acme, area: 'plugin', key: 'probe' });
    expect(del.err).toBeUndefined();
    expect(await value(run.globex, 'probe')).toBe('globex secret');
    expect((await dbRows(db, 'storage_entries')).length).toBe(1);
  });

  it("the plugin cannot call another workspace's tool: PERMISSION_DENIED, audited denied, the tool never runs", async () => {
    const call = (runId: string, tool: string) =>
      api.call('CallTool', { run_id: runId, tool_name: tool, parameters: {} });
    const detail = await api.call('GetToolDetail', { run_id: run.acme, tool_name: 'lookup_globex' });
    expect(refusal(detail)).toEqual({ code: 'PERMISSION_DENIED', xcode: 'unauthorized' });
    await audited(run.acme, 'tool.detail', 'tool:lookup_globex');
    const foreign = await call(run.acme, 'lookup_globex');
    expect(refusal(foreign)).toEqual({ code: 'PERMISSION_DENIED', xcode: 'unauthorized' });
    expect(JSON.stringify(foreign.err ?? {})).not.toContain('globex internal data');
    await audited(run.acme, 'tool.call', 'tool:lookup_globex');
    expect(toolHits).toEqual([]);
    // Each workspace's own run calls its own tool.
    const own = await call(run.acme, 'lookup_acme');
    expect(own.err).toBeUndefined();
    expect(JSON.stringify(own.res)).toContain('acme internal data');
    expect(refusal(await call(run.globex, 'lookup_acme'))).toEqual({
      code: 'PERMISSION_DENIED',
      xcode: 'unauthorized',
    });
    await audited(run.globex, 'tool.call', 'tool:lookup_acme');
    expect(JSON.stringify((await call(run.globex, 'lookup_globex')).res)).toContain('globex internal data');
    expect(toolHits).toEqual(['acme', 'globex']);
  });

  it("the plugin cannot retrieve from another workspace's knowledge base; its own answers", async () => {
    const retrieve = (runId: string, kbId: string) =>
      api.call('RetrieveKnowledge', { run_id: runId, kb_id: kbId, query_text: 'launch plan codenamed' });
    const own = await retrieve(run.acme, 'kb-acme');
    expect(own.err).toBeUndefined();
    expect(JSON.stringify(own.res)).toContain('acme-aurora');
    const foreign = await retrieve(run.acme, 'kb-globex');
    expect(refusal(foreign)).toEqual({ code: 'PERMISSION_DENIED', xcode: 'unauthorized' });
    expect(JSON.stringify(foreign.err ?? {})).not.toContain('globex-aurora');
    await audited(run.acme, 'knowledge.retrieve', 'knowledge_base:kb-globex');
    // The other workspace's own run still reads it.
    expect(JSON.stringify((await retrieve(run.globex, 'kb-globex')).res)).toContain('globex-aurora');
  });

  it('max_model_tokens_per_day: a model call is refused once the day is spent, and accepted when the quota allows', async () => {
    expect((await admin('PUT', '/v1/admin/workspaces/acme', { quotas: { max_model_tokens_per_day: 10 } })).status).toBe(
      200,
    );
    let scripted = false;
    const invoke = async (runId: string, model: string) => {
      if (!scripted) {
        server.chat(scripts.reply('ok', { usage: { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 } }));
        scripted = true;
      }
      const r = await api.call('InvokeModel', { run_id: runId, model_id: model, messages: HI });
      if (!r.err) {
        scripted = false;
      }
      return r;
    };
    expect((await invoke(run.acme, 'm-acme')).err).toBeUndefined();
    // Usage is read at most once a second (docs/tenancy.md#quotas): wait for the refusal.
    // Bounded by time, not by a number of calls: a fast machine makes 200 calls within one period.
    let refused: RpcResult<unknown> | null = null;
    // Paced below the per-run rate limit (100 calls/s), which would refuse first otherwise.
    for (const until = Date.now() + 20_000; refused === null && Date.now() < until;) {
      const r = await invoke(run.acme, 'm-acme');
      refused = r.err ? r : null;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(refusal(refused!)).toEqual({ code: 'RESOURCE_EXHAUSTED', xcode: 'rate_limited' });
    expect(refused!.err.details).toContain('max_model_tokens_per_day');
    const usage = await admin('GET', '/v1/admin/workspaces/acme/usage');
    expect(usage.body.model_tokens_today.limit).toBe(10);
    expect(usage.body.model_tokens_today.used).toBeGreaterThanOrEqual(16);
    // The other workspace's calls are not limited by acme's quota.
    expect((await invoke(run.globex, 'm-globex')).err).toBeUndefined();
    // Recovered: the day's window cannot pass in a test; raising the quota admits the call again.
    expect(
      (await admin('PUT', '/v1/admin/workspaces/acme', { quotas: { max_model_tokens_per_day: 1_000_000 } })).status,
    ).toBe(200);
    expect((await invoke(run.acme, 'm-acme')).err).toBeUndefined();
  });
});
