import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ScriptedOpenAIServer, scripts } from '@libs/testing';
import { Host, SHORT_LEASE, TestDatabase, freePort, runnerConnected, waitFor } from './harness';
import { OtlpReceiver } from './otlp-receiver';
import { message } from './steering-support';

/*
 * The Python runner SDK (sdk/python) against the real host: sdk/python/examples/echo.py and
 * examples/assistant.py run as child processes with Debian's /usr/bin/python3 (grpcio, protobuf);
 * the assistant streams a model answer through the host after a host tool call, answers a
 * follow-up steered into its run, honours cancel and reconnects after the host restarts. A
 * fixture plugin (sdk/python/tests/e2e_plugin.py) probes the host API (its calls carry the run's
 * traceparent: the host's spans of them join the run's trace) and serves the run-scoped
 * MCP bridge to the official MCP TypeScript client, over streamable HTTP and over its stdio relay.
 */

jest.setTimeout(120_000);

const ROOT = path.resolve(__dirname, '..', '..');
const PYTHON = '/usr/bin/python3';
const KEY = `sk-scripted-${randomBytes(12).toString('hex')}`;

interface PyProc {
  child: ChildProcess;
  lines: string[];
  logs: () => string;
  stop: () => Promise<void>;
}

function launchPython(script: string, env: Record<string, string>): PyProc {
  const child = spawn(PYTHON, [path.join(ROOT, 'sdk/python', script)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const chunks: string[] = [];
  let partial = '';
  child.stdout.on('data', (d: Buffer) => {
    chunks.push(d.toString());
    const parts = (partial + d.toString()).split('\n');
    partial = parts.pop() ?? '';
    lines.push(...parts);
  });
  child.stderr.on('data', (d: Buffer) => chunks.push(d.toString()));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return {
    child,
    lines,
    logs: () => chunks.join(''),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
      }
      await exited;
    },
  };
}

describe('Python runner SDK against the real host', () => {
  const db = new TestDatabase();
  let grpcPort: number;
  let host: Host;
  let server: ScriptedOpenAIServer;
  const receiver = new OtlpReceiver();
  const procs: PyProc[] = [];

  /** The host on a fixed gRPC port, so that the plugins find it again after a restart. */
  const startHost = async () => {
    const next = new Host(db, {
      SCRIPTED_KEY: KEY,
      SECRET_ENV_ALLOWLIST: 'SCRIPTED_KEY',
      GRPC_PORT: String(grpcPort),
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      // After a kill -9 the restarted host takes the killed one's runs over once its lease ran out
      // (docs/scale-out.md#dead-owner-sweep): a short lease keeps the test short.
      ...SHORT_LEASE,
    });
    return next.start().catch((e: Error) => {
      throw new Error(`${e.message}\n${next.proc.logs().slice(-4000)}`);
    });
  };
  const runOf = async (runId: string) => (await host.api('GET', `/v1/runs/${runId}`)).body;
  const modelAsked = (text: string) =>
    waitFor(`the model call with "${text}"`, () =>
      Promise.resolve(server.requests.some((r) => JSON.stringify(r.body).includes(text))),
    );
  const plugin = async (name: string, script: string, runners: string[]) => {
    const reg = await host.api('POST', '/v1/admin/plugins', { author: 'py', name });
    expect(reg.status).toBe(201);
    const proc = launchPython(script, {
      RUNNERHOST_GRPC_URL: `127.0.0.1:${grpcPort}`,
      RUNNERHOST_PLUGIN_TOKEN: reg.body.token as string,
      RUNNERHOST_PLUGIN_AUTHOR: 'py',
      RUNNERHOST_PLUGIN_NAME: name,
    });
    procs.push(proc);
    for (const r of runners) {
      await runnerConnected(host, `plugin:py/${name}/${r}`).catch((e: Error) => {
        throw new Error(`${e.message}\n${proc.logs()}`);
      });
    }
    return proc;
  };
  const agent = async (agentId: string, runnerId: string, policy: Record<string, unknown>, config = {}) => {
    const r = await host.api('POST', '/v1/admin/agents', {
      agent_id: agentId,
      runner_id: runnerId,
      runner_config: config,
      resource_policy: policy,
    });
    expect(r.status).toBe(201);
  };

  beforeAll(async () => {
    grpcPort = await freePort();
    await receiver.start();
    server = await ScriptedOpenAIServer.start();
    host = await startHost();
    const model = await host.api('POST', '/v1/admin/models', {
      model_id: 'scripted',
      kind: 'chat',
      provider: 'openai',
      base_url: server.baseUrl,
      api_key_env: 'SCRIPTED_KEY',
      model_name: 'scripted-gpt',
      context_window: 128000,
      max_output_tokens: 4096,
      abilities: { tool_calling: true, vision: false, streaming: true },
      tokenizer: 'o200k_base',
    });
    expect(model.body).toMatchObject({ model_id: 'scripted' });
    await plugin('echo', 'examples/echo.py', ['default']);
    await plugin('assistant', 'examples/assistant.py', ['default']);
    await plugin('fixture', 'tests/e2e_plugin.py', ['probe', 'bridge']);
    await agent('echo', 'plugin:py/echo/default', {});
    await agent(
      'assistant',
      'plugin:py/assistant/default',
      { allowed_model_ids: ['scripted'], allowed_tool_names: ['current_time'] },
      { steer_wait_ms: 1500 },
    );
    await agent('probe', 'plugin:py/fixture/probe', { allowed_model_ids: ['scripted'] });
    await agent('bridge', 'plugin:py/fixture/bridge', { allowed_tool_names: ['current_time'] });
  });

  afterAll(async () => {
    for (const p of procs) {
      await p.stop();
    }
    await host?.stop();
    await server?.close();
    await receiver.close();
    await db.drop();
  });

  it('echo.py: streams the input back word by word, sequenced by the SDK', async () => {
    const started = await host.api('POST', '/v1/events', message('echo', 'c-echo', 'hello from python'));
    expect(started.status).toBe(202);
    const events = (await host.sse(started.body.run_id)).map((e) => e.data);
    expect(events.map((e) => e.type)).toEqual([
      'message.delta',
      'message.delta',
      'message.delta',
      'message.completed',
      'run.completed',
    ]);
    expect(events.filter((e) => e.type === 'message.delta').map((e) => e.data.chunk.content)).toEqual([
      'hello',
      ' from',
      ' python',
    ]);
    expect(events[3].data.message).toMatchObject({ role: 'assistant', content: 'hello from python' });
    expect(events.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5]);
  });

  it('assistant.py: streams a model answer after a host tool call, and answers a steered follow-up', async () => {
    server.chat(
      scripts.completion({ content: 'Hello there, friend.' }, { delay_ms: 1500 }),
      scripts.reply('Second answer.'),
    );
    const first = await host.api('POST', '/v1/events', message('assistant', 'c-steer', 'hi'));
    expect(first.body).toMatchObject({ disposition: 'started' });
    const follow = await host.api('POST', '/v1/events', message('assistant', 'c-steer', 'and then?'));
    expect(follow.body).toMatchObject({ disposition: 'steered', run_id: first.body.run_id });

    const events = (await host.sse(first.body.run_id)).map((e) => e.data);
    const types = events.map((e) => e.type);
    expect(types.slice(0, 2)).toEqual(['tool.call.started', 'tool.call.completed']);
    expect(events[1].data).toMatchObject({ tool_name: 'current_time', error: null });
    expect(events[1].data.result.structured_content.timezone).toBe('UTC');
    expect(events.filter((e) => e.type === 'message.completed').map((e) => e.data.message.content)).toEqual([
      'Hello there, friend.',
      'Second answer.',
    ]);
    const streamed = events.filter((e) => e.type === 'message.delta').map((e) => e.data.chunk.content as string);
    expect(streamed.join('')).toBe('Hello there, friend.Second answer.');
    expect(types.at(-1)).toBe('run.completed');
    expect(events.filter((e) => e.source === 'runner').map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    expect((await runOf(first.body.run_id)).status).toBe('completed');
    const asked = server.requests
      .slice(-2)
      .map((r) => (r.body as { messages: { role: string; content: string }[] }).messages);
    expect(asked.map((m) => m.at(-1)?.content)).toEqual(['hi', 'and then?']);
    expect(asked[0][0].content).toContain('"timezone": "UTC"');
  });

  it('assistant.py: honours cancel (the stream to the model is abandoned, the runner reports the cancel)', async () => {
    server.chat({ type: 'hang' });
    const started = await host.api('POST', '/v1/events', message('assistant', 'c-cancel', 'take your time'));
    const runId = started.body.run_id as string;
    await modelAsked('take your time');
    const c = await host.api('POST', `/v1/runs/${runId}/cancel`, { reason: 'user left' });
    expect(c.status).toBe(200);
    const last = (await host.sse(runId)).at(-1)!.data;
    expect(last).toMatchObject({ type: 'run.failed', source: 'runner', data: { code: 'cancelled' } });
    expect((await runOf(runId)).status).toBe('cancelled');
  });

  it('host API through the Python SDK: typed refusals, models, token counting, storage and state; calls join the run trace', async () => {
    server.chat(scripts.reply('ok'));
    const traceId = randomBytes(16).toString('hex');
    const started = await host.api('POST', '/v1/events', message('probe', 'c-probe', 'probe'), undefined, {
      traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`,
    });
    const events = (await host.sse(started.body.run_id)).map((e) => e.data);
    expect(events.map((e) => e.type)).toEqual(['message.completed', 'run.completed']);
    expect(JSON.parse(events[0].data.message.content)).toEqual({
      refused: { class: 'UnauthorizedError', code: 'unauthorized', method: 'CallTool', unauthorized: true },
      unknown_model: { class: 'UnauthorizedError', code: 'unauthorized', method: 'InvokeModel', unauthorized: true },
      answer: 'ok',
      tokens_positive: true,
      stored: 'stored',
      missing: null,
      state: 41,
    });
    // The SDK sent RunRequest.traceparent back as metadata: the host's span of each call is a child of the run's.
    const spans = await waitFor('the probe run spans exported', () => {
      const got = receiver.ofTrace(traceId);
      // Every span asserted below: export batches need not hold them all at once.
      const ready = ['run', 'host_api tool.call', 'host_api model.invoke', 'host_api storage.set'].every((n) =>
        got.some((x) => x.name === n),
      );
      return Promise.resolve(ready ? got : null);
    });
    const run = spans.find((x) => x.name === 'run')!;
    for (const name of ['host_api tool.call', 'host_api model.invoke', 'host_api storage.set']) {
      expect({ name, parent: spans.find((x) => x.name === name)?.parentSpanId }).toEqual({ name, parent: run.spanId });
    }
  });

  it('MCP bridge: the official MCP client lists and calls exactly the granted tools, audited in the run', async () => {
    const fixture = procs[2];
    const seen = fixture.lines.length;
    const started = await host.api('POST', '/v1/events', message('bridge', 'c-bridge', 'open'));
    const runId = started.body.run_id as string;
    const line = await waitFor('the bridge address', () =>
      Promise.resolve(fixture.lines.slice(seen).find((l) => l.includes(runId))),
    );
    const { url, secret, stdio } = JSON.parse(line) as {
      url: string;
      secret: string;
      stdio: { command: string; args: string[]; env: Record<string, string> };
    };
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);

    // Without the run's secret: refused.
    const anonymous = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(anonymous.status).toBe(401);

    const client = new Client({ name: 'e2e', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { authorization: `Bearer ${secret}` } },
      }),
    );
    const tools = await client.listTools();
    expect(tools.tools.map((t) => t.name)).toEqual(['current_time']);
    const time = await client.callTool({ name: 'current_time', arguments: {} });
    expect(time.isError).toBe(false);
    expect((time.structuredContent as { timezone: string }).timezone).toBe('UTC');
    // Not granted to this run: the host refuses it (and audits the refusal).
    await expect(client.callTool({ name: 'http_fetch', arguments: { url: 'http://127.0.0.1:1/' } })).rejects.toThrow(
      /unauthorized/,
    );
    await client.close();

    // The same bridge through its stdio relay (python3 -c <relay>), as a child that launches stdio MCP servers.
    expect(stdio.command).toBe(PYTHON);
    const child = new Client({ name: 'e2e-stdio', version: '1.0.0' });
    await child.connect(new StdioClientTransport({ command: stdio.command, args: stdio.args, env: stdio.env }));
    expect((await child.listTools()).tools.map((t) => t.name)).toEqual(['current_time']);
    const viaStdio = await child.callTool({ name: 'current_time', arguments: {} });
    expect((viaStdio.structuredContent as { timezone: string }).timezone).toBe('UTC');
    await child.close();

    const done = await host.api('POST', '/v1/events', message('bridge', 'c-bridge', 'done'));
    expect(done.body).toMatchObject({ disposition: 'steered', run_id: runId });
    const events = (await host.sse(runId)).map((e) => e.data);
    expect(events.map((e) => e.type)).toEqual([
      'tool.call.started',
      'tool.call.completed',
      'tool.call.started',
      'tool.call.completed',
      'tool.call.started',
      'tool.call.completed',
      'message.completed',
      'run.completed',
    ]);
    expect(events[6].data.message.content).toBe('the bridge served 3 calls');
    const audit = (
      await host.api<{ items: { action: string; resource: string; outcome: string }[] }>(
        'GET',
        `/v1/admin/runs/${runId}/audit?limit=100`,
      )
    ).body.items;
    expect(audit.filter((a) => a.action === 'tool.call').map((a) => [a.resource, a.outcome])).toEqual([
      ['tool:current_time', 'allowed'],
      ['tool:http_fetch', 'denied'],
      ['tool:current_time', 'allowed'],
    ]);
    // The bridge closed with its run.
    await expect(fetch(url, { method: 'POST', headers: { authorization: `Bearer ${secret}` } })).rejects.toThrow();
  });

  it('reconnects after the host restarts: the run in flight ends as the host decides, new runs arrive', async () => {
    server.chat({ type: 'hang' });
    const inFlight = await host.api('POST', '/v1/events', message('assistant', 'c-restart', 'are you there?'));
    await modelAsked('are you there?');
    await host.stop('SIGKILL');
    host = await startHost();
    await runnerConnected(host, 'plugin:py/assistant/default');
    const old = await waitFor('the old run to end', async () => {
      const run = await runOf(inFlight.body.run_id);
      return ['queued', 'running'].includes(run.status) ? null : run;
    });
    expect(old.status).toBe('interrupted');

    server.chat(scripts.reply('Back again.'));
    const next = await host.api('POST', '/v1/events', message('assistant', 'c-after', 'hello again'));
    expect(next.status).toBe(202);
    const events = (await host.sse(next.body.run_id)).map((e) => e.data);
    expect(events.at(-1)?.type).toBe('run.completed');
    expect(events.filter((e) => e.type === 'message.completed').map((e) => e.data.message.content)).toEqual([
      'Back again.',
    ]);
  });
});
