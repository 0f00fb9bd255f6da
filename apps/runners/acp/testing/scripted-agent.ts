import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import { Readable, Writable } from 'node:stream';
import { agent, ndJsonStream, PROTOCOL_VERSION } from '@agentclientprotocol/sdk';
import type { AgentContext, McpServer, SessionUpdate } from '@agentclientprotocol/sdk';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/*
 * A small scripted ACP agent over stdio, built with the ACP SDK's agent side, for the ACP
 * runner's tests (docs/reference-runners.md#acp-runner). Sessions live in the JSON file
 * ACP_FIXTURE_STATE, so that a later process can load them (as real agents keep theirs on disk);
 * every method it receives is appended to ACP_FIXTURE_LOG. With `--mcp-http` it advertises
 * `mcpCapabilities.http`. What a prompt does depends on its text:
 * - `tool: <path>`: a tool call (pending, then completed with its output), then an answer;
 * - `mcp: <tool> <json arguments>`: connects to the session's first MCP server with the official
 *   MCP client (streamable HTTP or stdio, as the entry says), lists its tools, calls `<tool>`
 *   (reported as a tool call), answers with the tool names and the call's text;
 * - `hang`: waits for session/cancel, then stops with `cancelled`;
 * - `ask`: asks the client's permission, answers with the option chosen;
 * - anything else: `echo: <text> [turn <n>]`, streamed in pieces.
 */

interface Sessions {
  [id: string]: { turns: [string, string][] };
}

const stateFile = process.env.ACP_FIXTURE_STATE ?? '';
const logFile = process.env.ACP_FIXTURE_LOG ?? '';
const load = (): Sessions =>
  stateFile && fs.existsSync(stateFile) ? (JSON.parse(fs.readFileSync(stateFile, 'utf8')) as Sessions) : {};
const save = (s: Sessions) => stateFile && fs.writeFileSync(stateFile, JSON.stringify(s));
const log = (line: string) => logFile && fs.appendFileSync(logFile, `${line}\n`);

const cancelled = new Map<string, () => void>();
/** The MCP servers each session of this process was given (session/new, load or resume). */
const mcpServersOf = new Map<string, McpServer[]>();
const mcpHttp = process.argv.includes('--mcp-http');

function describeServers(servers: McpServer[]): string {
  return servers.map((s) => ('type' in s ? s.type : 'stdio')).join(',');
}

/** Connects the official MCP client to an ACP MCP server entry. */
async function mcpClient(server: McpServer): Promise<Client> {
  const client = new Client({ name: 'scripted-acp-agent', version: '1' });
  if ('type' in server && server.type === 'http') {
    const headers = Object.fromEntries(server.headers.map((h) => [h.name, h.value]));
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers } }));
  } else if (!('type' in server)) {
    const env = Object.fromEntries(server.env.map((e) => [e.name, e.value]));
    await client.connect(new StdioClientTransport({ command: server.command, args: server.args, env }));
  } else {
    throw new Error(`MCP server type ${server.type} is not supported by the scripted agent`);
  }
  return client;
}

/** `mcp: <tool> <json>`: lists the session's MCP tools and calls one; the answer says what happened. */
async function useMcp(client: AgentContext, sessionId: string, command: string): Promise<string> {
  const [tool, ...rest] = command.split(' ');
  const args = rest.length > 0 ? (JSON.parse(rest.join(' ')) as Record<string, unknown>) : {};
  const server = mcpServersOf.get(sessionId)?.[0];
  if (!server) {
    return 'no MCP server';
  }
  const mcp = await mcpClient(server);
  try {
    const names = (await mcp.listTools()).tools.map((t) => t.name);
    log(`mcp tools/list ${names.join(',')}`);
    await update(client, sessionId, {
      sessionUpdate: 'tool_call',
      toolCallId: 'mcp-1',
      title: tool,
      name: tool,
      kind: 'other',
      status: 'in_progress',
      rawInput: args,
    });
    const result = await mcp.callTool({ name: tool, arguments: args }).then(
      (r) => ({ ok: r.isError !== true, r }),
      (e: unknown) => ({ ok: false, r: { error: e instanceof Error ? e.message : String(e) } }),
    );
    log(`mcp tools/call ${tool} ${result.ok ? 'ok' : 'error'}`);
    await update(client, sessionId, {
      sessionUpdate: 'tool_call_update',
      toolCallId: 'mcp-1',
      status: result.ok ? 'completed' : 'failed',
      rawOutput: result.r,
    });
    const text =
      'content' in result.r && Array.isArray(result.r.content)
        ? (result.r.content as { type: string; text?: string }[]).map((c) => c.text ?? '').join('')
        : JSON.stringify(result.r);
    return `mcp tools: ${names.join(',')}; ${tool} ${result.ok ? 'answered' : 'failed'}: ${text}`;
  } finally {
    await mcp.close();
  }
}

async function update(client: AgentContext, sessionId: string, u: SessionUpdate) {
  await client.notify('session/update', { sessionId, update: u });
}

async function say(client: AgentContext, sessionId: string, text: string) {
  for (const piece of text.match(/\S+\s*/g) ?? []) {
    await update(client, sessionId, { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: piece } });
  }
}

const app = agent({ name: 'scripted-acp-agent' })
  .onRequest('initialize', () => {
    log('initialize');
    return {
      protocolVersion: PROTOCOL_VERSION,
      agentCapabilities: { loadSession: true, mcpCapabilities: { http: mcpHttp, sse: false } },
    };
  })
  .onRequest('session/new', ({ params }) => {
    const sessionId = randomUUID();
    log(
      `session/new mcpServers=${params.mcpServers.length}${params.mcpServers.length ? ` ${describeServers(params.mcpServers)}` : ''}`,
    );
    mcpServersOf.set(sessionId, params.mcpServers);
    save({ ...load(), [sessionId]: { turns: [] } });
    return { sessionId };
  })
  .onRequest('session/load', async ({ params, client }) => {
    log(`session/load ${params.sessionId}`);
    const session = load()[params.sessionId];
    if (!session) {
      throw new Error(`unknown session ${params.sessionId}`);
    }
    mcpServersOf.set(params.sessionId, params.mcpServers);
    // As real agents do: the history is replayed as updates before the load answers.
    for (const [user, answer] of session.turns) {
      await update(client, params.sessionId, {
        sessionUpdate: 'user_message_chunk',
        content: { type: 'text', text: user },
      });
      await say(client, params.sessionId, answer);
    }
    return {};
  })
  .onRequest('session/prompt', async ({ params, client }) => {
    const text = params.prompt.map((b) => (b.type === 'text' ? b.text : '')).join('');
    log(`session/prompt ${params.sessionId} ${text}`);
    const sessions = load();
    const session = sessions[params.sessionId];
    if (!session) {
      throw new Error(`unknown session ${params.sessionId}`);
    }
    let answer: string;
    if (text === 'hang') {
      await say(client, params.sessionId, 'working ');
      await new Promise<void>((resolve) => cancelled.set(params.sessionId, resolve));
      return { stopReason: 'cancelled' as const };
    } else if (text.startsWith('tool: ')) {
      const file = text.slice(6);
      await update(client, params.sessionId, {
        sessionUpdate: 'tool_call',
        toolCallId: 'call-1',
        title: `Read ${file}`,
        name: 'read_file',
        kind: 'read',
        status: 'pending',
        rawInput: { path: file },
      });
      await update(client, params.sessionId, {
        sessionUpdate: 'tool_call_update',
        toolCallId: 'call-1',
        status: 'completed',
        rawOutput: { content: `contents of ${file}` },
      });
      answer = `read ${file}`;
    } else if (text.startsWith('mcp: ')) {
      answer = await useMcp(client, params.sessionId, text.slice(5));
    } else if (text === 'ask') {
      const choice = await client.request('session/request_permission', {
        sessionId: params.sessionId,
        toolCall: { toolCallId: 'call-2', title: 'Write file', kind: 'edit' },
        options: [
          { optionId: 'yes', name: 'Allow', kind: 'allow_once' },
          { optionId: 'no', name: 'Reject', kind: 'reject_once' },
        ],
      });
      answer = `permission: ${choice.outcome.outcome === 'selected' ? choice.outcome.optionId : 'cancelled'}`;
    } else {
      answer = `echo: ${text} [turn ${session.turns.length + 1}]`;
    }
    await say(client, params.sessionId, answer);
    session.turns.push([text, answer]);
    save(sessions);
    return { stopReason: 'end_turn' as const };
  })
  .onNotification('session/cancel', ({ params }) => {
    log(`session/cancel ${params.sessionId}`);
    cancelled.get(params.sessionId)?.();
  });

const connection = app.connect(
  ndJsonStream(Writable.toWeb(process.stdout) as WritableStream<Uint8Array>, Readable.toWeb(process.stdin)),
);
void connection.closed.then(() => process.exit(0));
