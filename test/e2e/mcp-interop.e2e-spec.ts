import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { ADMIN_KEY, Host, TestDatabase, event, freePort, waitFor } from './harness';
import { HostApiClient, type JsonObject, type RpcResult } from './host-api-client';
import { RawPlugin, fromStruct, manifestFor } from './raw-plugin';
import { RawSseReader } from './sse-client';

/*
 * The host against the official MCP reference servers from npm (devDependencies), not fixtures
 * of ours: server-everything over stdio and over streamable HTTP (a separate process that is
 * restarted mid-test), server-filesystem and server-memory over stdio. A hand-driven runner
 * plugin calls their tools over gRPC.
 */

jest.setTimeout(180_000);

const S = grpc.status;
const PKG = path.resolve(__dirname, '..', '..', 'node_modules', '@modelcontextprotocol');
const EVERYTHING = path.join(PKG, 'server-everything', 'dist', 'index.js');
const FILESYSTEM = path.join(PKG, 'server-filesystem', 'dist', 'index.js');
const MEMORY = path.join(PKG, 'server-memory', 'dist', 'index.js');
/** A source id long enough that `<source_id>__<tool>` is over 64 characters for every tool. */
const LONG_ID = 'everything-over-streamable-http-with-a-deliberately-long-id';
const EXPOSED = /^[A-Za-z0-9_-]{1,64}$/;
const CONNECT_TIMEOUT_MS = 3_000;

function ok(r: RpcResult<unknown>): any {
  if (r.err) {
    throw new Error(`expected success, got ${S[r.err.code]} (${r.err.xcode}): ${r.err.details}`);
  }
  return r.res;
}

/** server-everything over streamable HTTP in its own process, restartable on the same port. */
class EverythingHttp {
  child?: ChildProcess;
  constructor(readonly port: number) {}

  get url() {
    return `http://127.0.0.1:${this.port}/mcp`;
  }

  async start(): Promise<void> {
    const child = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
      env: { ...process.env, PORT: String(this.port) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    this.child = child;
    let err = '';
    await new Promise<void>((resolve, reject) => {
      child.stderr.on('data', (d: Buffer) => {
        err += d.toString();
        if (err.includes('listening on port')) {
          resolve();
        }
      });
      child.once('exit', (code) => reject(new Error(`server-everything exited (${code}): ${err}`)));
    });
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
  }
}

describe('MCP interoperability with the reference servers', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rh-mcp-interop-'));
  const files = path.join(dir, 'files');
  fs.mkdirSync(files);
  const db = new TestDatabase();
  const host = new Host(db, {
    HOSTAPI_CALLS_PER_SECOND: '1000',
    HOSTAPI_BURST: '1000',
    MCP_CONNECT_TIMEOUT_MS: String(CONNECT_TIMEOUT_MS),
    SECRET_ENV_ALLOWLIST: 'E2E_*',
    E2E_MEMORY_FILE: path.join(dir, 'memory.jsonl'),
  });
  let http: EverythingHttp;
  let plugin: RawPlugin;
  let client: HostApiClient;

  const call = (runId: string, tool: string, parameters: Record<string, unknown> = {}) =>
    client.call('CallTool', { run_id: runId, tool_name: tool, parameters: parameters as JsonObject });
  const tools = async () => (await host.api('GET', '/v1/admin/tools')).body as any[];
  const source = async (id: string) => (await host.api('GET', `/v1/admin/tools/sources/${id}`)).body;
  const addSource = async (source_id: string, kind: string, config: object) => {
    const r = await host.api('POST', '/v1/admin/tools/sources', { source_id, kind, config });
    expect(r.status).toBe(201);
    return r.body;
  };
  /** The exposed name of a source's tool. */
  const exposed = async (sourceId: string, name: string) =>
    (await tools()).find((t) => t.source_id === sourceId && t.source_tool_name === name)!.tool_name as string;

  async function run(agentId: string, resourcePolicy: object = { allow_all_tools: true }) {
    await host.api('POST', '/v1/admin/agents', {
      agent_id: agentId,
      runner_id: 'plugin:interop/raw/default',
      resource_policy: resourcePolicy,
    });
    const r = await host.api('POST', '/v1/events', event(agentId, 'use the reference servers'));
    expect(r.status).toBe(202);
    for (;;) {
      const msg = await plugin.next();
      if (msg.run?.context.run_id === r.body.run_id) {
        return msg.run.context;
      }
    }
  }
  const finish = async (runId: string) => {
    plugin.result(runId, 'run.completed', {}, 1_000);
    await host.sse(runId);
  };

  beforeAll(async () => {
    http = new EverythingHttp(await freePort());
    await http.start();
    await host.start();
    const token = (await host.api('POST', '/v1/admin/plugins', { author: 'interop', name: 'raw' })).body.token;
    plugin = new RawPlugin(host.grpc, token);
    plugin.hello('interop', 'raw', [
      manifestFor('interop', 'raw', {
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
    await http?.stop();
    await db.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('lists every tool with its schema, title, annotations and output schema, under names the model APIs accept', async () => {
    const stdio = await addSource('everything', 'mcp_stdio', {
      command: process.execPath,
      args: [EVERYTHING, 'stdio'],
      timeout_ms: 2_500,
    });
    expect(stdio).toMatchObject({ status: 'connected', last_error: null, skipped_tools: [] });
    expect(stdio.tools).toEqual(expect.arrayContaining(['echo', 'get-tiny-image', 'trigger-long-running-operation']));
    const remote = await addSource(LONG_ID, 'mcp_http', { url: http.url, timeout_ms: 1_500 });
    expect(remote).toMatchObject({ status: 'connected', skipped_tools: [] });
    expect(remote.tools).toHaveLength(stdio.tools.length);
    await addSource('fs', 'mcp_stdio', { command: process.execPath, args: [FILESYSTEM, files] });
    await addSource('memory', 'mcp_stdio', {
      command: process.execPath,
      args: [MEMORY],
      env: { MEMORY_FILE_PATH: { env: 'E2E_MEMORY_FILE' } },
    });

    const all = await tools();
    const names = all.map((t) => t.tool_name as string);
    expect(names.length).toBeGreaterThan(40);
    expect(new Set(names).size).toBe(names.length);
    for (const n of names) {
      expect(n).toMatch(EXPOSED);
    }
    // The HTTP copy of server-everything collides on every name, and its prefixed names are too long.
    const echo = all.find((t) => t.source_id === LONG_ID && t.source_tool_name === 'echo');
    expect(echo.tool_name).toMatch(/^echo_[0-9a-f]{8}$/);

    const structured = all.find((t) => t.source_id === 'everything' && t.tool_name === 'get-structured-content');
    expect(structured).toMatchObject({
      title: 'Get Structured Content Tool',
      annotations: { readOnlyHint: true, destructiveHint: false },
      output_schema: { type: 'object', properties: { temperature: { type: 'number' } } },
      parameters: { type: 'object', properties: { location: { enum: ['New York', 'Chicago', 'Los Angeles'] } } },
    });
    expect(all.find((t) => t.tool_name === 'create_entities')).toMatchObject({
      source_id: 'memory',
      title: 'Create Entities',
      annotations: { readOnlyHint: false },
    });
    // The host offers no sampling, roots or elicitation: the servers hide the tools that need them.
    for (const hidden of ['trigger-sampling-request', 'trigger-elicitation-request', 'get-roots-list']) {
      expect(names).not.toContain(hidden);
    }
  });

  it('grants the metadata in the run context and GetToolDetail; images and resources pass through', async () => {
    const ctx = await run('everything');
    const granted = ctx.resources.tools.find((t: any) => t.tool_name === 'get-structured-content');
    expect(granted.title).toBe('Get Structured Content Tool');
    expect(fromStruct(granted.annotations)).toMatchObject({ readOnlyHint: true });
    expect(fromStruct(granted.output_schema)).toMatchObject({ properties: { humidity: { type: 'number' } } });
    const detail = ok(await client.call('GetToolDetail', { run_id: ctx.run_id, tool_name: 'get-structured-content' }));
    expect(detail.tool).toMatchObject({
      name: 'get-structured-content',
      title: 'Get Structured Content Tool',
      annotations: { readOnlyHint: true },
      output_schema: { properties: { conditions: { type: 'string' } } },
    });

    expect(ok(await call(ctx.run_id, 'get-structured-content', { location: 'Chicago' })).result).toEqual({
      is_error: false,
      content: [
        { type: 'text', text: JSON.stringify({ temperature: 36, conditions: 'Light rain / drizzle', humidity: 82 }) },
      ],
      structured_content: { temperature: 36, conditions: 'Light rain / drizzle', humidity: 82 },
    });
    const image = ok(await call(ctx.run_id, 'get-tiny-image')).result;
    expect(image.content.map((b: any) => b.type)).toEqual(['text', 'image', 'text']);
    expect(image.content[1]).toMatchObject({
      mimeType: 'image/png',
      data: expect.stringMatching(/^[A-Za-z0-9+/]+=*$/),
    });
    const links = ok(await call(ctx.run_id, 'get-resource-links', { count: 2 })).result;
    expect(links.content.filter((b: any) => b.type === 'resource_link')).toHaveLength(2);
    const embedded = ok(
      await call(ctx.run_id, 'get-resource-reference', { resourceType: 'Text', resourceId: 1 }),
    ).result;
    expect(embedded.content.find((b: any) => b.type === 'resource')).toMatchObject({
      resource: { uri: expect.stringContaining('1'), text: expect.any(String) },
    });
    const echoHttp = await exposed(LONG_ID, 'echo');
    expect(ok(await call(ctx.run_id, echoHttp, { message: 'over http' })).result.content).toEqual([
      { type: 'text', text: 'Echo: over http' },
    ]);
    // server-memory: a call with structured output, through an env reference for its data file.
    const created = ok(
      await call(ctx.run_id, 'create_entities', {
        entities: [{ name: 'host', entityType: 'service', observations: ['runs agents'] }],
      }),
    ).result;
    expect(created).toMatchObject({ is_error: false, structured_content: { entities: [{ name: 'host' }] } });
    expect(fs.readFileSync(path.join(dir, 'memory.jsonl'), 'utf8')).toContain('runs agents');
    await finish(ctx.run_id);
  });

  it('recovers the streamable-HTTP session after the server restarts: the first call goes through', async () => {
    const ctx = await run('restart', { allowed_tool_names: [await exposed(LONG_ID, 'echo')] });
    const echo = ctx.resources.tools[0].tool_name;
    expect(ok(await call(ctx.run_id, echo, { message: 'before' })).result.content[0].text).toBe('Echo: before');
    await http.stop();
    await http.start();
    // The restarted server answers the old session "400 No valid session ID provided".
    expect(ok(await call(ctx.run_id, echo, { message: 'after' })).result.content[0].text).toBe('Echo: after');
    expect(await source(LONG_ID)).toMatchObject({ status: 'connected', last_error: null });
    // A listing on the forgotten session (an admin refresh) recovers the same way.
    const count = (await source(LONG_ID)).tools.length;
    await http.stop();
    await http.start();
    const refreshed = await host.api('POST', `/v1/admin/tools/sources/${LONG_ID}/refresh`);
    expect(refreshed.body).toMatchObject({ status: 'connected', last_error: null });
    expect(refreshed.body.tools).toHaveLength(count);
    await finish(ctx.run_id);
  });

  it('returns a file that fits once in whole (text and its structured copy), and a marked preview of one that does not', async () => {
    fs.writeFileSync(path.join(files, 'fits.txt'), 'a'.repeat(900_000));
    fs.writeFileSync(path.join(files, 'huge.txt'), `${'b'.repeat(3_000_000)}THE END`);
    const ctx = await run('files', { allowed_tool_names: ['read_text_file'] });
    const fits = ok(await call(ctx.run_id, 'read_text_file', { path: path.join(files, 'fits.txt') })).result;
    expect(fits.truncated).toBeUndefined();
    expect(fits.structured_content).toBeUndefined();
    expect(fits.content).toEqual([{ type: 'text', text: 'a'.repeat(900_000) }]);
    const huge = ok(await call(ctx.run_id, 'read_text_file', { path: path.join(files, 'huge.txt') })).result;
    expect(huge).toMatchObject({ is_error: false, truncated: true });
    expect(huge.original_bytes).toBeGreaterThan(6_000_000);
    expect(Buffer.byteLength(JSON.stringify(huge))).toBeLessThanOrEqual(1024 * 1024);
    expect(huge.content[0].text).toMatch(/^b{1000000,}$/);
    expect(huge.content.at(-1).text).toMatch(
      /^\[tool result truncated: \d+ bytes of JSON is over the 1048576-byte limit/,
    );
    // The sandbox of the server itself still holds.
    expect(ok(await call(ctx.run_id, 'read_text_file', { path: '/etc/passwd' })).result.is_error).toBe(true);
    await finish(ctx.run_id);
  });

  it('keeps a reporting tool alive past its timeout, forwards progress to the run stream, and runs task-based tools', async () => {
    const ctx = await run('progress', {
      allowed_tool_names: ['trigger-long-running-operation', 'simulate-research-query'],
    });
    const stream = await RawSseReader.open(host.http, `/v1/runs/${ctx.run_id}/events`, ADMIN_KEY);
    // 6 s in all against a source timeout of 2.5 s: a report every second restarts it.
    const long = ok(await call(ctx.run_id, 'trigger-long-running-operation', { duration: 6, steps: 6 })).result;
    expect(long).toEqual({
      is_error: false,
      content: [{ type: 'text', text: 'Long running operation completed. Duration: 6 seconds, Steps: 6.' }],
    });
    // A task-based tool (execution.taskSupport "required"): created, polled, its result fetched.
    const research = ok(await call(ctx.run_id, 'simulate-research-query', { topic: 'mcp tasks' })).result;
    expect(research.is_error).toBe(false);
    expect(research.content[0].text).toContain('# Research Report: mcp tasks');
    plugin.result(ctx.run_id, 'run.completed', {}, 1);
    const frames = await stream.readToEnd();
    const progress = frames.filter((f) => f.event === 'tool.call.progress');
    const steps = progress.filter((f) => f.data.data.tool_name === 'trigger-long-running-operation');
    expect(steps.length).toBeGreaterThan(0);
    // (The SDK handles a notification a microtask late: the last one can arrive after the result.)
    expect(steps.every((f) => f.data.source === 'host' && f.data.data.total === 6)).toBe(true);
    const counts = steps.map((f) => f.data.data.progress as number);
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
    expect(counts.at(-1)).toBeGreaterThanOrEqual(2);
    // Live-only telemetry: no SSE id, so a reconnect resumes after the runner's own results.
    expect(steps.every((f) => Number.isNaN(f.id))).toBe(true);
    const statuses = progress.filter((f) => f.data.data.tool_name === 'simulate-research-query');
    expect(statuses.map((f) => f.data.data.task_status)).toContain('working');
    expect(frames.at(-1)).toMatchObject({ event: 'run.completed', id: 1 });
    // Nothing of it was persisted: the stored stream is the runner's results alone.
    expect((await host.sse(ctx.run_id)).map((f) => f.event)).toEqual(['run.completed']);
  });

  it("shows a failing child's stderr in last_error, gives up on a child that never speaks MCP, and reconnects after a crash", async () => {
    const crash = await addSource('crash', 'mcp_stdio', {
      command: process.execPath,
      args: ['-e', "console.error('fatal: cannot open /var/lib/thing.db'); process.exit(3)"],
    });
    expect(crash).toMatchObject({ status: 'error', tools: [] });
    expect(crash.last_error).toContain('fatal: cannot open /var/lib/thing.db');
    const mute = await addSource('mute', 'mcp_stdio', {
      command: process.execPath,
      args: ['-e', "console.error('listening on nothing'); setInterval(() => {}, 1000)"],
    });
    expect(mute).toMatchObject({ status: 'error', tools: [] });
    expect(mute.last_error).toContain(
      `no answer to MCP initialize within ${CONNECT_TIMEOUT_MS} ms (MCP_CONNECT_TIMEOUT_MS)`,
    );
    expect(mute.last_error).toContain('listening on nothing');

    const ctx = await run('crash', { allowed_tool_names: ['read_graph'] });
    expect(ok(await call(ctx.run_id, 'read_graph')).result.is_error).toBe(false);
    const child = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(host.proc.child.pid)], { encoding: 'utf8' })
      .split('\n')
      .find((l) => l.includes('server-memory'))!;
    process.kill(Number(child.trim().split(/\s+/)[0]), 'SIGKILL');
    await waitFor('the crash to show', async () => (await source('memory')).status === 'error');
    expect((await source('memory')).last_error).toContain('the server closed the connection');
    expect(ok(await call(ctx.run_id, 'read_graph')).result.structured_content).toMatchObject({
      entities: [{ name: 'host' }],
    });
    expect(await source('memory')).toMatchObject({ status: 'connected', last_error: null });
    await finish(ctx.run_id);
    for (const id of ['crash', 'mute']) {
      expect((await host.api('DELETE', `/v1/admin/tools/sources/${id}`)).status).toBe(204);
    }
  });

  it('keeps every exposed name across a host restart', async () => {
    const before = (await tools()).map((t) => `${t.source_id}:${t.source_tool_name}=${t.tool_name}`).sort();
    plugin.close();
    client.close();
    await host.stop();
    await host.start();
    // Four MCP servers spawn again (stdio children and an HTTP session): seconds each on a loaded machine.
    await waitFor(
      'the sources to reconnect',
      async () =>
        ((await host.api('GET', '/v1/admin/tools/sources')).body as any[]).every((s) => s.status === 'connected'),
      60_000,
    );
    const after = (await tools()).map((t) => `${t.source_id}:${t.source_tool_name}=${t.tool_name}`).sort();
    expect(after).toEqual(before);
  });
});
