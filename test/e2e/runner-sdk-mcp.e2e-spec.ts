import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { defineRunner, RunnerPlugin, type Logger, type McpBridge } from '@runner-host/runner-sdk';
import { Host, TestDatabase } from './harness';
import { message } from './steering-support';

/*
 * The run-scoped MCP bridge of the TypeScript SDK against the real host, with the official MCP
 * client: it lists exactly the tools the run was granted, a call is answered by the host and is
 * in the run's audit, a tool the run was not granted is refused (and the refusal audited), a
 * wrong secret is refused, and the bridge is gone once the run has ended.
 */

jest.setTimeout(120_000);

const quiet: Logger = () => undefined;

describe('runner SDK: the run-scoped MCP bridge against the real host', () => {
  const db = new TestDatabase();
  let host: Host;
  let plugin: RunnerPlugin;
  let handOver: (bridge: McpBridge) => void = () => undefined;
  let release: () => void = () => undefined;

  const bridgeRunner = defineRunner({
    name: 'bridge',
    capabilities: { tool_calling: true },
    permissions: { tools: ['detail', 'call'], history: ['page'] },
    async run(_ctx, io) {
      const ended = new Promise<void>((resolve) => (release = resolve));
      handOver(await io.mcpBridge());
      await ended;
      await io.message('bridge done');
    },
  });

  const client = async (bridge: McpBridge, secret = bridge.secret) => {
    const c = new Client({ name: 'e2e', version: '1' });
    await c.connect(
      new StreamableHTTPClientTransport(new URL(bridge.url), {
        requestInit: { headers: { Authorization: `Bearer ${secret}` } },
      }),
    );
    return c;
  };

  beforeAll(async () => {
    host = await new Host(db).start();
    const reg = await host.api('POST', '/v1/admin/plugins', { author: 'sdk', name: 'mcp' });
    expect(reg.status).toBe(201);
    plugin = new RunnerPlugin({
      url: host.grpc,
      token: reg.body.token,
      author: 'sdk',
      plugin: 'mcp',
      runners: [bridgeRunner],
      log: quiet,
    });
    const welcome = await plugin.start();
    expect(welcome.rejected).toEqual([]);
    const agent = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'bridge',
      runner_id: 'plugin:sdk/mcp/bridge',
      resource_policy: { allowed_tool_names: ['current_time'] },
    });
    expect(agent.status).toBe(201);
  });

  afterAll(async () => {
    await plugin?.stop();
    await host?.stop();
    await db.drop();
  });

  it('lists the granted tools, answers and audits calls, refuses the rest, and closes with the run', async () => {
    const opened = new Promise<McpBridge>((resolve) => (handOver = resolve));
    const started = await host.api('POST', '/v1/events', message('bridge', 'c-mcp', 'bridge please'));
    expect(started.status).toBe(202);
    const runId = started.body.run_id as string;
    const bridge = await opened;

    const mcp = await client(bridge);
    const { tools } = await mcp.listTools();
    expect(tools.map((t) => t.name)).toEqual(['current_time', 'history_page']);

    const time = await mcp.callTool({ name: 'current_time', arguments: {} });
    expect(time.isError).toBe(false);
    expect((time.structuredContent as { timezone: string }).timezone).toBe('UTC');

    const refused = await mcp
      .callTool({ name: 'http_fetch', arguments: { url: 'http://127.0.0.1:1/' } })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(McpError);
    expect((refused as McpError).message).toContain('unauthorized');

    // The same bridge for a child that launches a stdio MCP server.
    const child = new Client({ name: 'e2e-stdio', version: '1' });
    await child.connect(new StdioClientTransport(bridge.stdio));
    expect((await child.listTools()).tools.map((t) => t.name)).toEqual(['current_time', 'history_page']);
    await child.close();

    await expect(client(bridge, 'f'.repeat(64))).rejects.toThrow(/unauthenticated/);

    const audit = (await host.api('GET', `/v1/admin/runs/${runId}/audit`)).body.items as {
      action: string;
      resource: string | null;
      outcome: string;
      plugin_id: string | null;
    }[];
    const toolCalls = audit.filter((a) => a.resource === 'tool:current_time' || a.resource === 'tool:http_fetch');
    expect(toolCalls.map((a) => [a.resource, a.outcome])).toEqual([
      ['tool:current_time', 'allowed'],
      ['tool:http_fetch', 'denied'],
    ]);

    await mcp.close();
    release();
    const events = (await host.sse(runId)).map((e) => e.data);
    expect(events.map((e) => e.type)).toEqual(['message.completed', 'run.completed']);
    await expect(fetch(bridge.url, { method: 'POST' })).rejects.toThrow();
    expect(bridge.closed).toBe(true);
  });
});
