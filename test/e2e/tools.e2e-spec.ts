import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { startMcpHttpServer, type McpHttpServer } from './fixtures/mcp-http-server';
import { Host, TestDatabase, event, waitFor } from './harness';
import { HostApiClient, type JsonObject, type RpcResult } from './host-api-client';
import { RawPlugin, fromStruct, manifestFor } from './raw-plugin';

/*
 * The tool registry end to end: a real MCP server over stdio run by the host as a child
 * process, a streamable-HTTP MCP server and a plain HTTP server in this process, built-ins; a
 * hand-driven runner plugin calls them over gRPC with the tools its run was granted.
 */

jest.setTimeout(120_000);

const S = grpc.status;
/** The stdio fixture runs through ts-node (a dev dependency): no build step on a clean checkout. */
const MCP_STDIO_ARGS = [
  '-r',
  require.resolve('ts-node/register/transpile-only'),
  path.join(__dirname, 'fixtures', 'mcp-stdio-server.ts'),
];
const SECRET = `child-secret-${randomBytes(6).toString('hex')}`;
const TOKEN = `mcp-token-${randomBytes(6).toString('hex')}`;
const API_KEY = `api-key-${randomBytes(6).toString('hex')}`;
const RESULT_CAP = 65_536;

/** The response of a successful call (loosely typed: these tests read into JSON results). */
function ok(r: RpcResult<unknown>): any {
  if (r.err) {
    throw new Error(`expected success, got ${S[r.err.code]} (${r.err.xcode}): ${r.err.details}`);
  }
  return r.res;
}

function refused(r: RpcResult<unknown>) {
  return r.err ? { code: S[r.err.code], xcode: r.err.xcode, details: r.err.details } : { res: r.res };
}

/** The local HTTP server behind the HTTP tools and http_fetch; records what it got. */
async function startApi() {
  const seen: { method: string; url: string; auth: string | undefined; body: string }[] = [];
  const srv = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, auth: req.headers['x-api-key'] as string | undefined, body });
      const url = new URL(req.url!, 'http://x');
      const json = (status: number, v: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(v));
      switch (url.pathname) {
        case '/weather':
          return json(200, { city: url.searchParams.get('city'), temp_c: 21 });
        case '/orders':
          return json(201, { created: JSON.parse(body) });
        case '/missing':
          return res.writeHead(404, { 'content-type': 'text/plain' }).end('no such thing');
        case '/page':
          return res.writeHead(200, { 'content-type': 'text/html' }).end('<p>hello page</p>');
        case '/large':
          return res.writeHead(200, { 'content-type': 'text/plain' }).end('y'.repeat(200_000));
        case '/slow':
          return void setTimeout(() => json(200, { late: true }), 5_000);
        default:
          return res.writeHead(500).end();
      }
    });
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  return { base, seen, close: () => new Promise<void>((r) => (srv.closeAllConnections(), srv.close(() => r()))) };
}

describe('tool registry and call_tool over real gRPC', () => {
  const db = new TestDatabase();
  const host = new Host(db, {
    HOSTAPI_CALLS_PER_SECOND: '1000',
    HOSTAPI_BURST: '1000',
    TOOL_RESULT_MAX_BYTES: String(RESULT_CAP),
    E2E_CHILD_SECRET: SECRET,
    E2E_MCP_TOKEN: TOKEN,
    E2E_API_KEY: API_KEY,
    SECRET_ENV_ALLOWLIST: 'E2E_*',
  });
  const extraToolsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rh-tools-')), 'extra-tools');
  let mcpHttp: McpHttpServer;
  let api: Awaited<ReturnType<typeof startApi>>;
  let plugin: RawPlugin;
  let client: HostApiClient;
  /** Every admin response body, to check that no secret value ever appears in one. */
  const adminBodies: string[] = [];

  const admin = async (method: string, p: string, body?: unknown) => {
    const r = await host.api(method, p, body);
    adminBodies.push(JSON.stringify(r.body ?? null));
    return r;
  };
  const call = (runId: string, tool: string, parameters: Record<string, unknown> = {}) =>
    client.call('CallTool', { run_id: runId, tool_name: tool, parameters: parameters as JsonObject });
  const toolNames = async () => (await admin('GET', '/v1/admin/tools')).body.map((t: any) => t.tool_name) as string[];

  /** Starts a run of an agent; the plugin gets it and keeps it open. */
  async function run(agentId: string) {
    const r = await host.api('POST', '/v1/events', event(agentId, 'use your tools'));
    expect(r.status).toBe(202);
    for (;;) {
      // Skips what the host sends about earlier runs (a cancel at a deadline).
      const msg = await plugin.next();
      if (msg.run?.context.run_id === r.body.run_id) {
        return msg.run.context;
      }
    }
  }
  const agent = async (agentId: string, resourcePolicy: object, runnerConfig: object = {}) => {
    const r = await host.api('POST', '/v1/admin/agents', {
      agent_id: agentId,
      runner_id: 'plugin:tools/raw/default',
      runner_config: runnerConfig,
      resource_policy: resourcePolicy,
    });
    expect(r.status).toBe(201);
  };

  beforeAll(async () => {
    [mcpHttp, api] = await Promise.all([startMcpHttpServer(), startApi()]);
    await host.start();
    const token = (await host.api('POST', '/v1/admin/plugins', { author: 'tools', name: 'raw' })).body.token;
    plugin = new RawPlugin(host.grpc, token);
    plugin.hello('tools', 'raw', [
      manifestFor('tools', 'raw', {
        capabilities: { streaming: true, tool_calling: true },
        permissions: { tools: ['detail', 'call'] },
      }),
    ]);
    expect((await plugin.next()).welcome.runners).toHaveLength(1);
    client = new HostApiClient(host.grpc, token);
  });

  afterAll(async () => {
    plugin?.close();
    client?.close();
    await host.stop();
    await Promise.all([mcpHttp?.close(), api?.close()]);
    await db.drop();
  });

  it('registers MCP (stdio, streamable HTTP) and HTTP sources and lists their tools by the collision rule', async () => {
    const local = await admin('POST', '/v1/admin/tools/sources', {
      source_id: 'local',
      kind: 'mcp_stdio',
      config: {
        command: process.execPath,
        args: [...MCP_STDIO_ARGS, `--extra-tools-file=${extraToolsFile}`],
        env: { FIXTURE_SECRET: { env: 'E2E_CHILD_SECRET' } },
        timeout_ms: 3_000,
      },
    });
    expect(local.status).toBe(201);
    expect(local.body).toMatchObject({ kind: 'mcp_stdio', enabled: true, status: 'connected', last_error: null });
    expect(local.body.tools).toEqual(expect.arrayContaining(['add', 'echo', 'fail', 'slow', 'big', 'env', 'exit']));

    const remote = await admin('POST', '/v1/admin/tools/sources', {
      source_id: 'remote',
      kind: 'mcp_http',
      config: { url: mcpHttp.url, headers: { Authorization: { env: 'E2E_MCP_TOKEN', prefix: 'Bearer ' } } },
    });
    expect(remote.status).toBe(201);
    // "echo" is held by the source registered first: this one gets the prefixed name.
    expect(remote.body.tools.sort()).toEqual(['remote__echo', 'whoami']);

    const httpSrc = await admin('POST', '/v1/admin/tools/sources', {
      source_id: 'api',
      kind: 'http',
      config: {
        headers: { 'X-Api-Key': { env: 'E2E_API_KEY' } },
        timeout_ms: 1_000,
        tools: [
          {
            name: 'get_weather',
            description: 'Weather of a city',
            method: 'GET',
            url: `${api.base}/weather`,
            parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
          },
          { name: 'create_order', method: 'POST', url: `${api.base}/orders` },
          { name: 'missing', method: 'GET', url: `${api.base}/missing` },
          { name: 'large', method: 'GET', url: `${api.base}/large` },
          { name: 'slow_api', method: 'GET', url: `${api.base}/slow` },
          { name: 'current_time', method: 'GET', url: `${api.base}/page` },
        ],
      },
    });
    expect(httpSrc.status).toBe(201);
    expect(httpSrc.body.status).toBe('ready');
    // Built-in names are reserved, whether the built-in is on or not.
    expect(httpSrc.body.tools).toContain('api__current_time');

    const tools = (await admin('GET', '/v1/admin/tools')).body as any[];
    const byName = Object.fromEntries(tools.map((t) => [t.tool_name, t]));
    expect(byName.current_time).toMatchObject({ source: 'builtin', source_id: null, enabled: true });
    expect(byName.http_fetch).toMatchObject({ source: 'builtin', source_id: null, enabled: false });
    expect(byName.add).toMatchObject({ source: 'mcp', source_id: 'local', kind: 'mcp_stdio', source_tool_name: 'add' });
    expect(byName.add.parameters).toMatchObject({ type: 'object', required: ['a', 'b'] });
    expect(byName.remote__echo).toMatchObject({ source: 'mcp', source_id: 'remote', source_tool_name: 'echo' });
    expect(byName.get_weather).toMatchObject({ source: 'http', source_id: 'api', kind: 'http' });
    expect(byName.api__current_time).toMatchObject({ source_id: 'api', source_tool_name: 'current_time' });
    const sourceIds = (await admin('GET', '/v1/admin/tools/sources')).body.map((s: any) => s.source_id);
    expect(sourceIds.sort()).toEqual(['api', 'local', 'remote']);
  });

  it('validates sources: env values are references only; duplicates, bad kinds and bad schemas are refused', async () => {
    const post = (body: object) => admin('POST', '/v1/admin/tools/sources', body);
    const literal = await post({ source_id: 'x1', kind: 'mcp_stdio', config: { command: 'x', env: { A: 'value' } } });
    expect(literal.status).toBe(400);
    expect(literal.body.error.message).toContain('config.env.A');
    expect((await post({ source_id: 'local', kind: 'mcp_stdio', config: { command: 'x' } })).status).toBe(409);
    expect((await post({ source_id: 'x2', kind: 'builtin', config: {} })).status).toBe(400);
    expect((await post({ source_id: 'builtin', kind: 'http', config: { tools: [] } })).status).toBe(400);
    const schema = { type: 'object', properties: { a: { type: 'nonsense' } } };
    const badSchema = await post({
      source_id: 'x3',
      kind: 'http',
      config: { tools: [{ name: 't', url: api.base, parameters: schema }] },
    });
    expect(badSchema.status).toBe(400);
    expect(badSchema.body.error.details.field).toBe('config.tools[0].parameters');

    // A server that cannot be reached still registers, with its error; no tools.
    const down = await post({ source_id: 'down', kind: 'mcp_http', config: { url: 'http://127.0.0.1:9/mcp' } });
    expect(down.status).toBe(201);
    expect(down.body).toMatchObject({ status: 'error', tools: [] });
    expect(down.body.last_error).toContain('cannot connect');
    const missingEnv = await post({
      source_id: 'noenv',
      kind: 'mcp_stdio',
      config: { command: process.execPath, args: MCP_STDIO_ARGS, env: { K: { env: 'E2E_NOT_SET_ANYWHERE' } } },
    });
    expect(missingEnv.body.last_error).toContain('host environment variable E2E_NOT_SET_ANYWHERE is not set');
    for (const id of ['down', 'noenv']) {
      expect((await admin('DELETE', `/v1/admin/tools/sources/${id}`)).status).toBe(204);
    }
    expect((await admin('GET', '/v1/admin/tools/sources/down')).status).toBe(404);
  });

  it('grants tools with their JSON schema and frozen source; detail and call run the granted implementation', async () => {
    await agent('all-tools', { allow_all_tools: true });
    const ctx = await run('all-tools');
    const granted = Object.fromEntries(
      ctx.resources.tools.map((t: any) => [t.tool_name, { ...t, parameters: fromStruct(t.parameters) }]),
    );
    expect(granted.add).toMatchObject({
      source: 'mcp',
      source_id: 'local',
      tool_type: 'mcp',
      operations: ['detail', 'call'],
    });
    expect(granted.add.parameters).toMatchObject({ properties: { a: { type: 'number' } } });
    expect(granted.current_time).toMatchObject({ source: 'builtin', tool_type: 'builtin' });
    expect(granted.http_fetch).toBeUndefined();

    const detail = ok(await client.call('GetToolDetail', { run_id: ctx.run_id, tool_name: 'add' })).tool;
    expect(detail).toMatchObject({
      name: 'add',
      description: 'Adds two numbers',
      parameters: { required: ['a', 'b'] },
    });

    expect(ok(await call(ctx.run_id, 'add', { a: 2, b: 3 })).result).toEqual({
      is_error: false,
      content: [{ type: 'text', text: '5' }],
      structured_content: { sum: 5 },
    });
    expect(ok(await call(ctx.run_id, 'echo', { text: 'hi' })).result.content).toEqual([
      { type: 'text', text: 'stdio:hi' },
    ]);
    expect(ok(await call(ctx.run_id, 'remote__echo', { text: 'hi' })).result.content).toEqual([
      { type: 'text', text: 'http:hi' },
    ]);
    // Environment references are resolved for the child and for the HTTP headers.
    expect(ok(await call(ctx.run_id, 'env', { name: 'FIXTURE_SECRET' })).result.content).toEqual([
      { type: 'text', text: SECRET },
    ]);
    expect(ok(await call(ctx.run_id, 'env', { name: 'E2E_MCP_TOKEN' })).result.content).toEqual([
      { type: 'text', text: '(unset)' },
    ]);
    expect(ok(await call(ctx.run_id, 'whoami')).result.content).toEqual([{ type: 'text', text: `Bearer ${TOKEN}` }]);

    // Tool failures come back as results the runner hands to its model.
    expect(ok(await call(ctx.run_id, 'fail')).result).toEqual({
      is_error: true,
      content: [{ type: 'text', text: 'it failed on purpose' }],
    });
    expect(ok(await call(ctx.run_id, 'boom')).result).toMatchObject({ is_error: true });
    expect(ok(await call(ctx.run_id, 'add', { a: 'x' })).result).toMatchObject({ is_error: true });

    // A timeout is an error; an oversized result comes back cut, with a marker; the connection stays usable.
    const t0 = Date.now();
    expect(refused(await call(ctx.run_id, 'slow', { ms: 20_000 }))).toMatchObject({
      code: 'DEADLINE_EXCEEDED',
      xcode: 'deadline_exceeded',
    });
    expect(Date.now() - t0).toBeLessThan(8_000);
    const big = ok(await call(ctx.run_id, 'big', { bytes: RESULT_CAP + 10 })).result;
    expect(big).toMatchObject({ is_error: false, truncated: true });
    expect(Buffer.byteLength(JSON.stringify(big))).toBeLessThanOrEqual(RESULT_CAP);
    expect(big.content.at(-1).text).toContain(`over the ${RESULT_CAP}-byte limit`);
    expect(ok(await call(ctx.run_id, 'big', { bytes: 1000 })).result.is_error).toBe(false);
    expect(ok(await call(ctx.run_id, 'add', { a: 1, b: 1 })).result.content).toEqual([{ type: 'text', text: '2' }]);

    const audit = (await host.api('GET', `/v1/admin/runs/${ctx.run_id}/audit?limit=100`)).body.items as any[];
    expect(audit.filter((a) => a.resource === 'tool:slow').map((a) => [a.outcome, a.error_code])).toEqual([
      ['failed', 'deadline_exceeded'],
    ]);
    expect(audit.find((a) => a.resource === 'tool:fail')).toMatchObject({ action: 'tool.call', outcome: 'allowed' });
    plugin.result(ctx.run_id, 'run.completed', {}, 1);
    await host.sse(ctx.run_id);
  });
  it('calls HTTP tools: parameters as query or JSON body, header references, non-2xx as is_error', async () => {
    await agent('http-tools', {
      allowed_tool_names: ['get_weather', 'create_order', 'missing', 'large', 'slow_api', 'api__current_time'],
    });
    const ctx = await run('http-tools');
    const weather = ok(await call(ctx.run_id, 'get_weather', { city: 'Paris' })).result;
    expect(weather).toMatchObject({ is_error: false, status: 200, structured_content: { city: 'Paris', temp_c: 21 } });
    expect(api.seen.at(-1)).toMatchObject({ method: 'GET', url: '/weather?city=Paris', auth: API_KEY });
    const order = ok(await call(ctx.run_id, 'create_order', { item: 'book', qty: 2 })).result;
    expect(order).toMatchObject({
      is_error: false,
      status: 201,
      structured_content: { created: { item: 'book', qty: 2 } },
    });
    expect(api.seen.at(-1)).toMatchObject({ method: 'POST', body: '{"item":"book","qty":2}' });
    expect(ok(await call(ctx.run_id, 'missing')).result).toEqual({
      is_error: true,
      status: 404,
      content: [{ type: 'text', text: 'no such thing' }],
    });
    expect(ok(await call(ctx.run_id, 'api__current_time')).result.content).toEqual([
      { type: 'text', text: '<p>hello page</p>' },
    ]);
    // The host checks HTTP tool parameters against their schema.
    expect(refused(await call(ctx.run_id, 'get_weather', { town: 'Paris' }))).toMatchObject({
      code: 'INVALID_ARGUMENT',
      xcode: 'invalid_argument',
    });
    const large = ok(await call(ctx.run_id, 'large')).result;
    expect(large).toMatchObject({ is_error: false, status: 200, truncated: true });
    expect(large.content[0].text).toMatch(/^y+$/);
    expect(Buffer.byteLength(JSON.stringify(large))).toBeLessThanOrEqual(RESULT_CAP);
    const t0 = Date.now();
    expect(refused(await call(ctx.run_id, 'slow_api'))).toMatchObject({ xcode: 'deadline_exceeded' });
    expect(Date.now() - t0).toBeLessThan(4_000);
    plugin.result(ctx.run_id, 'run.completed', {}, 1);
    await host.sse(ctx.run_id);
  });

  it('runs built-ins: current_time on by default, http_fetch only once an admin switches it on', async () => {
    await agent('builtins', { allowed_tool_names: ['current_time'] });
    const before = await run('builtins');
    const now = ok(await call(before.run_id, 'current_time', { timezone: 'Europe/Paris' })).result;
    expect(now).toMatchObject({ is_error: false, structured_content: { timezone: 'Europe/Paris' } });
    expect(Math.abs(Date.parse(now.structured_content.iso) - Date.now())).toBeLessThan(60_000);
    expect(refused(await call(before.run_id, 'current_time', { timezone: 'Mars/Olympus' }))).toMatchObject({
      xcode: 'invalid_argument',
    });
    // Not granted: refused by the guard, and audited.
    expect(refused(await call(before.run_id, 'http_fetch', { url: `${api.base}/page` }))).toMatchObject({
      code: 'PERMISSION_DENIED',
      xcode: 'unauthorized',
    });
    expect(refused(await call(before.run_id, 'add', { a: 1, b: 2 }))).toMatchObject({ code: 'PERMISSION_DENIED' });
    const audit = (await host.api('GET', `/v1/admin/runs/${before.run_id}/audit?limit=100`)).body.items as any[];
    expect(audit.slice(-2).map((a) => [a.action, a.resource, a.outcome, a.error_code])).toEqual([
      ['tool.call', 'tool:http_fetch', 'denied', 'unauthorized'],
      ['tool.call', 'tool:add', 'denied', 'unauthorized'],
    ]);
    // An agent cannot even name a tool that is off.
    const off = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'fetcher',
      runner_id: 'plugin:tools/raw/default',
      resource_policy: { allowed_tool_names: ['http_fetch'] },
    });
    expect(off.status).toBe(400);

    const on = await admin('PUT', '/v1/admin/tools/builtins/http_fetch', { enabled: true });
    expect(on.body).toMatchObject({ tool_name: 'http_fetch', enabled: true, source: 'builtin' });
    expect((await admin('PUT', '/v1/admin/tools/builtins/rm_rf', { enabled: true })).status).toBe(404);
    await agent('fetcher', { allowed_tool_names: ['http_fetch', 'current_time'] });
    const ctx = await run('fetcher');
    const page = ok(await call(ctx.run_id, 'http_fetch', { url: `${api.base}/page` })).result;
    expect(page).toMatchObject({
      is_error: false,
      content: [{ type: 'text', text: '<p>hello page</p>' }],
      structured_content: { status: 200, truncated: false },
    });
    const large = ok(await call(ctx.run_id, 'http_fetch', { url: `${api.base}/large`, max_bytes: 1000 })).result;
    expect(large.structured_content).toMatchObject({ bytes: 1000, truncated: true });
    expect(ok(await call(ctx.run_id, 'http_fetch', { url: `${api.base}/missing` })).result).toMatchObject({
      is_error: true,
      structured_content: { status: 404 },
    });
    expect(refused(await call(ctx.run_id, 'http_fetch', { url: 'file:///etc/passwd' }))).toMatchObject({
      xcode: 'invalid_argument',
    });
    // Switched off again: the run that was granted it gets not_found, not something else.
    await admin('PUT', '/v1/admin/tools/builtins/http_fetch', { enabled: false });
    expect(refused(await call(ctx.run_id, 'http_fetch', { url: `${api.base}/page` }))).toMatchObject({
      code: 'NOT_FOUND',
      xcode: 'not_found',
    });
    for (const c of [before, ctx]) {
      plugin.result(c.run_id, 'run.completed', {}, 1);
      await host.sse(c.run_id);
    }
  });

  it('bounds a tool call by the run deadline', async () => {
    await agent('short', { allowed_tool_names: ['slow'] }, { timeout: 2 });
    const ctx = await run('short');
    const t0 = Date.now();
    const r = refused(await call(ctx.run_id, 'slow', { ms: 20_000 }));
    expect(r).toMatchObject({ code: 'DEADLINE_EXCEEDED', xcode: 'deadline_exceeded' });
    expect(Date.now() - t0).toBeLessThan(2_900);
    await host.sse(ctx.run_id);
  });

  it('reconnects lazily after the server went away, and lists the tools again when it does', async () => {
    await agent('mcp', { allowed_tool_names: ['pid', 'exit', 'echo', 'whoami', 'remote__echo'] });
    const ctx = await run('mcp');
    const pid1 = Number(ok(await call(ctx.run_id, 'pid')).result.content[0].text);
    fs.writeFileSync(extraToolsFile, 'late_tool\n');
    expect(await toolNames()).not.toContain('late_tool');
    expect(refused(await call(ctx.run_id, 'exit'))).toMatchObject({ code: 'UNAVAILABLE', xcode: 'unavailable' });
    const pid2 = Number(ok(await call(ctx.run_id, 'pid')).result.content[0].text);
    expect(pid2).not.toBe(pid1);
    expect(() => process.kill(pid1, 0)).toThrow();
    await waitFor('the new listing', async () => (await toolNames()).includes('late_tool'));

    // A streamable-HTTP session the server forgot: reconnected, and the call goes through.
    mcpHttp.forgetSessions();
    expect(ok(await call(ctx.run_id, 'whoami')).result.content).toEqual([{ type: 'text', text: `Bearer ${TOKEN}` }]);

    const refreshed = await admin('POST', '/v1/admin/tools/sources/local/refresh');
    expect(refreshed.status).toBe(200);
    expect(refreshed.body).toMatchObject({ status: 'connected', last_error: null });
    expect(refreshed.body.tools).toContain('late_tool');

    // Removed source: not_found. A name now held by another source: not_found, never the other tool.
    expect((await admin('DELETE', '/v1/admin/tools/sources/local')).status).toBe(204);
    expect(() => process.kill(pid2, 0)).toThrow();
    expect(refused(await call(ctx.run_id, 'pid'))).toMatchObject({ code: 'NOT_FOUND', xcode: 'not_found' });
    const moved = await admin('POST', '/v1/admin/tools/sources/remote/refresh');
    expect(moved.body.tools.sort()).toEqual(['echo', 'whoami']);
    const echo = refused(await call(ctx.run_id, 'echo', { text: 'x' }));
    expect(echo).toMatchObject({ code: 'NOT_FOUND', xcode: 'not_found' });
    expect(echo.details).toContain('now belongs to mcp source remote');
    expect(refused(await call(ctx.run_id, 'remote__echo', { text: 'x' }))).toMatchObject({ xcode: 'not_found' });
    const fresh = await run('mcp');
    expect(ok(await call(fresh.run_id, 'echo', { text: 'x' })).result.content).toEqual([
      { type: 'text', text: 'http:x' },
    ]);
    expect((await admin('DELETE', '/v1/admin/tools/sources/remote')).status).toBe(204);
    expect(refused(await call(fresh.run_id, 'whoami'))).toMatchObject({ xcode: 'not_found' });
    for (const c of [ctx, fresh]) {
      plugin.result(c.run_id, 'run.completed', {}, 1);
      await host.sse(c.run_id);
    }
  });

  it('never returns an environment value from the admin API', async () => {
    await admin('GET', '/v1/admin/tools/sources');
    await admin('GET', '/v1/admin/tools/sources/api');
    const all = adminBodies.join('\n');
    expect(all).toContain('E2E_API_KEY');
    for (const secret of [SECRET, TOKEN, API_KEY]) {
      expect(all).not.toContain(secret);
    }
  });

  it('closes the MCP children when the host shuts down', async () => {
    await admin('POST', '/v1/admin/tools/sources', {
      source_id: 'last',
      kind: 'mcp_stdio',
      config: { command: process.execPath, args: MCP_STDIO_ARGS },
    });
    await agent('last', { allowed_tool_names: ['pid'] });
    const ctx = await run('last');
    const pid = Number(ok(await call(ctx.run_id, 'pid')).result.content[0].text);
    expect(() => process.kill(pid, 0)).not.toThrow();
    await host.stop();
    await waitFor('the MCP child to exit', () => {
      try {
        process.kill(pid, 0);
        return Promise.resolve(false);
      } catch {
        return Promise.resolve(true);
      }
    });
  });
});
