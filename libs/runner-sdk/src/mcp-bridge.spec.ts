import { PassThrough } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { toolResultToMcp, type McpBridge } from './mcp-bridge';
import { defineRunner } from './runner';
import { FakeHost } from './testing';

/*
 * The run-scoped MCP bridge against the fake host, with the official MCP client: it lists what
 * the run was granted, calls go through the run's host API, what was not granted is refused by
 * the host, the secret is required, and the bridge is gone once the run has ended.
 */

jest.setTimeout(20_000);

/** A runner that opens the bridge, hands it to the test and ends when the test says so. */
function bridgeRunner() {
  let handOver!: (bridge: McpBridge) => void;
  const opened = new Promise<McpBridge>((resolve) => (handOver = resolve));
  let finish!: () => void;
  const release = new Promise<void>((resolve) => (finish = resolve));
  const runner = defineRunner({
    name: 'bridge',
    permissions: { tools: ['call'], history: ['page'], knowledge_bases: ['retrieve'] },
    async run(_ctx, io) {
      handOver(await io.mcpBridge({ name: 'test-bridge' }));
      await release;
      await io.message('done');
    },
  });
  return { runner, opened, finish };
}

function newHost(runner: ReturnType<typeof bridgeRunner>['runner']) {
  return new FakeHost({
    runners: [runner],
    tools: {
      current_time: () => ({
        is_error: false,
        content: [{ type: 'text', text: 'noon' }],
        structured_content: { t: 12 },
      }),
    },
    knowledgeBases: { kb1: (query) => [{ content: `about ${query}` }] },
    history: [{ role: 'user', content: 'earlier' }],
  });
}

async function httpClient(bridge: McpBridge, secret = bridge.secret): Promise<Client> {
  const client = new Client({ name: 'spec', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(bridge.url), {
      requestInit: { headers: { Authorization: `Bearer ${secret}` } },
    }),
  );
  return client;
}

describe('MCP bridge', () => {
  it('lists exactly what the run was granted and calls through the run’s host API', async () => {
    const { runner, opened, finish } = bridgeRunner();
    const host = newHost(runner);
    const run = host.start({ text: 'go' });
    const bridge = await opened;
    expect(bridge.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const client = await httpClient(bridge);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['current_time', 'knowledge_retrieve', 'history_page']);
    expect(tools[1].inputSchema).toMatchObject({
      properties: { kb_id: { enum: ['kb1'] } },
      required: ['kb_id', 'query'],
    });

    expect(await client.callTool({ name: 'current_time', arguments: {} })).toEqual({
      content: [{ type: 'text', text: 'noon' }],
      structuredContent: { t: 12 },
      isError: false,
    });
    const kb = await client.callTool({ name: 'knowledge_retrieve', arguments: { kb_id: 'kb1', query: 'cats' } });
    expect(kb.structuredContent).toEqual({ results: [{ content: 'about cats' }] });
    const history = await client.callTool({ name: 'history_page', arguments: { limit: 5 } });
    expect(history.structuredContent).toMatchObject({ items: [{ role: 'user', content: 'earlier' }] });

    // Bad input: a field-named error, and no host call.
    const bad = await client
      .callTool({ name: 'knowledge_retrieve', arguments: { kb_id: 'kb1' } })
      .catch((e: unknown) => e);
    expect((bad as McpError).message).toContain('query: must be a non-empty string');

    // Not granted: the call still goes to the host, which refuses it.
    const refused = await client
      .callTool({ name: 'http_fetch', arguments: { url: 'http://x' } })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(McpError);
    expect((refused as McpError).message).toContain('unauthorized');

    const calls = host.calls.filter((c) => c.request.run_id === run.runId).map((c) => c.method);
    expect(calls).toEqual(['CallTool', 'RetrieveKnowledge', 'HistoryPage', 'CallTool']);
    await client.close();
    finish();
    expect((await run.done).status).toBe('completed');
  });

  it('refuses a wrong or missing secret', async () => {
    const { runner, opened, finish } = bridgeRunner();
    const run = newHost(runner).start({ text: 'go' });
    const bridge = await opened;
    await expect(httpClient(bridge, 'f'.repeat(64))).rejects.toThrow(/unauthenticated/);
    const bare = await fetch(bridge.url, {
      method: 'POST',
      body: '{}',
      headers: { 'content-type': 'application/json' },
    });
    expect(bare.status).toBe(401);
    finish();
    await run.done;
  });

  it('closes when the run ends, and when the run is cancelled', async () => {
    const first = bridgeRunner();
    const host = newHost(first.runner);
    const run = host.start({ text: 'go' });
    const bridge = await first.opened;
    first.finish();
    await run.done;
    await new Promise((r) => setImmediate(r));
    expect(bridge.closed).toBe(true);
    await expect(fetch(bridge.url, { method: 'POST' })).rejects.toThrow();

    const second = bridgeRunner();
    const host2 = newHost(second.runner);
    const cancelled = host2.start({ text: 'go' });
    const bridge2 = await second.opened;
    host2.cancel(cancelled.runId, 'stop');
    expect((await cancelled.done).code).toBe('cancelled');
    await new Promise((r) => setImmediate(r));
    expect(bridge2.closed).toBe(true);
    second.finish();
  });

  it('serves a child through the stdio relay command', async () => {
    const { runner, opened, finish } = bridgeRunner();
    const run = newHost(runner).start({ text: 'go' });
    const bridge = await opened;
    const client = new Client({ name: 'spec-stdio', version: '1' });
    await client.connect(
      new StdioClientTransport({ command: bridge.stdio.command, args: bridge.stdio.args, env: bridge.stdio.env }),
    );
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual([
      'current_time',
      'knowledge_retrieve',
      'history_page',
    ]);
    expect((await client.callTool({ name: 'current_time', arguments: {} })).structuredContent).toEqual({ t: 12 });
    await client.close();
    finish();
    await run.done;
  });

  it('serves MCP over a stream pair', async () => {
    const { runner, opened, finish } = bridgeRunner();
    const run = newHost(runner).start({ text: 'go' });
    const bridge = await opened;
    const toServer = new PassThrough();
    const toClient = new PassThrough();
    const served = bridge.serve(toServer, toClient);
    const client = new Client({ name: 'spec-pipe', version: '1' });
    await client.connect(pipeTransport(toClient, toServer));
    expect((await client.listTools()).tools).toHaveLength(3);
    toServer.end();
    await served;
    finish();
    await run.done;
  });

  it('maps the host’s tool result to MCP', () => {
    expect(
      toolResultToMcp({ is_error: true, content: [{ type: 'image', data: 'AA', mime_type: 'image/png' }] }),
    ).toEqual({
      content: [{ type: 'image', data: 'AA', mimeType: 'image/png' }],
      isError: true,
    });
    expect(toolResultToMcp({ is_error: false, content: [], structured_content: { a: 1 } })).toEqual({
      content: [{ type: 'text', text: '{"a":1}' }],
      structuredContent: { a: 1 },
      isError: false,
    });
  });
});

/** A client transport over a stream pair, newline-delimited JSON-RPC (what StdioServerTransport speaks). */
function pipeTransport(input: PassThrough, output: PassThrough): Transport {
  let buffer = '';
  const transport: Transport = {
    start: () => {
      input.setEncoding('utf8');
      input.on('data', (d: string) => {
        buffer += d;
        let i: number;
        while ((i = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, i);
          buffer = buffer.slice(i + 1);
          transport.onmessage?.(JSON.parse(line) as JSONRPCMessage);
        }
      });
      return Promise.resolve();
    },
    send: (message) => {
      output.write(`${JSON.stringify(message)}\n`);
      return Promise.resolve();
    },
    close: () => {
      output.end();
      transport.onclose?.();
      return Promise.resolve();
    },
  };
  return transport;
}
