import { randomBytes, timingSafeEqual } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import type { Server as McpServer } from '@modelcontextprotocol/sdk/server/index.js';
import { watchAbort } from './abort';
import { HostApiError, RunAbortedError } from './errors';
import type { RunHostApi } from './host-api';
import type { JsonObject } from './json';
import type { RunContext } from './types';

/*
 * The run-scoped MCP bridge (docs/runner-sdk.md#the-run-scoped-mcp-bridge): an MCP server for
 * one run, for an external executor the runner drives (a coding agent, a CLI). It lists exactly
 * what the run's snapshot grants — the granted tools, knowledge retrieval, history and events —
 * and every call goes through the run's host API (its run id, its plugin token), so the host
 * decides and audits it. Streamable HTTP on 127.0.0.1 behind a per-run bearer secret, a stdio
 * relay command for a child that wants a stdio server, or any stream pair; it closes when the
 * run ends. `@modelcontextprotocol/sdk` is loaded on first use only.
 */

/** A stdio MCP server entry for a child process (Claude Code / ACP `mcpServers` shape). */
export interface McpStdioServer {
  name: string;
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** A streamable HTTP MCP server entry (ACP `{type: 'http'}` shape). */
export interface McpHttpServer {
  name: string;
  url: string;
  headers: Record<string, string>;
}

export interface McpBridgeOptions {
  /** The server name announced in `initialize` and used in the server entries (default `runnerhost`). */
  name?: string;
  /** Loopback port of the HTTP endpoint (default 0: any free port). */
  port?: number;
}

export interface McpBridge {
  /** `http://127.0.0.1:<port>/mcp` */
  readonly url: string;
  /** The per-run bearer secret (32 random bytes, hex). */
  readonly secret: string;
  /** The HTTP endpoint as an MCP server entry: url + `Authorization: Bearer <secret>`. */
  readonly http: McpHttpServer;
  /**
   * A stdio MCP server entry: `node -e <relay>` relays stdio JSON-RPC to the HTTP endpoint, the
   * URL and secret in its environment. Give it to a child that launches its MCP servers itself.
   */
  readonly stdio: McpStdioServer;
  /** The names of the tools the bridge lists (granted tools first, then the host tools). */
  readonly tools: string[];
  readonly closed: boolean;
  /** Serves MCP over a stream pair (e.g. a child's stdout/stdin) until either ends or the bridge closes. */
  serve(input: Readable, output: Writable): Promise<void>;
  /** Closes the endpoint and every session; the run's end does this. */
  close(): Promise<void>;
}

/** An MCP tool listing (the `tools/list` item), in plain JSON. */
export interface McpTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: { type: 'object'; [key: string]: unknown };
  annotations?: JsonObject;
}

/** An MCP `tools/call` result, in plain JSON. */
export interface McpToolResult {
  [key: string]: unknown;
  content: ({ type: string } & JsonObject)[];
  structuredContent?: JsonObject;
  isError?: boolean;
}

/** One bridged tool: its MCP listing and the host call it makes. */
export interface BridgedTool {
  tool: McpTool;
  call(args: JsonObject): Promise<McpToolResult>;
}

const OBJECT = { type: 'object' as const };
const str = (description: string) => ({ type: 'string', description });
const int = (description: string, minimum = 1, maximum = 100) => ({ type: 'integer', description, minimum, maximum });

/** A tool argument that is not what the tool's input schema says (answered as invalid params). */
class BridgeArgumentError extends Error {}

function stringArg(args: JsonObject, field: string): string {
  const value = args[field];
  if (typeof value !== 'string' || value === '') {
    throw new BridgeArgumentError(`${field}: must be a non-empty string`);
  }
  return value;
}

/** A result with the host's answer as text and as structured content. */
function jsonResult(value: unknown): McpToolResult {
  const structured = (
    typeof value === 'object' && value !== null && !Array.isArray(value) ? value : { value }
  ) as JsonObject;
  return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: structured };
}

/** The host's tool result (`{is_error, content, structured_content}`) as an MCP McpToolResult. */
export function toolResultToMcp(result: JsonObject): McpToolResult {
  const content = Array.isArray(result.content)
    ? result.content.filter((c): c is JsonObject => typeof c === 'object' && c !== null && !Array.isArray(c))
    : [];
  const structured = result.structured_content;
  const out: McpToolResult = {
    content: content.map((c) => {
      const { mime_type: mimeType, ...rest } = c;
      return (mimeType === undefined ? rest : { ...rest, mimeType }) as McpToolResult['content'][number];
    }),
    isError: result.is_error === true,
  };
  if (typeof structured === 'object' && structured !== null && !Array.isArray(structured)) {
    out.structuredContent = structured;
  }
  if (out.content.length === 0) {
    out.content.push({ type: 'text', text: JSON.stringify(structured ?? {}) });
  }
  return out;
}

/** The tools the bridge lists for a run: what its context says the snapshot grants. */
export function bridgedTools(ctx: RunContext, host: RunHostApi): Map<string, BridgedTool> {
  const tools = new Map<string, BridgedTool>();
  for (const t of ctx.resources?.tools ?? []) {
    if (!t.operations.includes('call')) {
      continue;
    }
    const tool: McpTool = {
      name: t.tool_name,
      description: t.description,
      inputSchema: { ...OBJECT, ...(t.parameters ?? {}) },
    };
    if (t.title) {
      tool.title = t.title;
    }
    if (t.annotations) {
      tool.annotations = t.annotations;
    }
    tools.set(t.tool_name, { tool, call: async (args) => toolResultToMcp(await host.tools.call(t.tool_name, args)) });
  }
  const add = (name: string, description: string, inputSchema: JsonObject, call: BridgedTool['call']) => {
    if (!tools.has(name)) {
      tools.set(name, { tool: { name, description, inputSchema: { ...OBJECT, ...inputSchema } }, call });
    }
  };
  const kbs = (ctx.resources?.knowledge_bases ?? []).filter((kb) => kb.operations.includes('retrieve'));
  if (kbs.length > 0) {
    add(
      'knowledge_retrieve',
      `Retrieves passages from a knowledge base: ${kbs.map((kb) => `${kb.kb_id} (${kb.kb_name})`).join(', ')}`,
      {
        properties: {
          kb_id: { type: 'string', enum: kbs.map((kb) => kb.kb_id) },
          query: str('what to look for'),
          top_k: int('how many passages (default: the host’s)'),
        },
        required: ['kb_id', 'query'],
      },
      async (a) =>
        jsonResult({
          results: await host.knowledge.retrieve(stringArg(a, 'kb_id'), stringArg(a, 'query'), {
            topK: typeof a.top_k === 'number' ? a.top_k : undefined,
          }),
        }),
    );
  }
  const apis = ctx.context?.available_apis;
  if (apis?.history_page) {
    add(
      'history_page',
      "A page of this conversation's earlier messages (newest first unless direction is forward)",
      {
        properties: {
          before_cursor: str('a cursor from a previous page'),
          after_cursor: str('a cursor from a previous page'),
          limit: int('messages per page'),
          direction: { type: 'string', enum: ['backward', 'forward'] },
        },
      },
      async (a) => jsonResult(await host.history.page(a)),
    );
  }
  if (apis?.history_search) {
    add(
      'history_search',
      "Searches this conversation's earlier messages",
      { properties: { query: str('words to look for'), top_k: int('how many messages') }, required: ['query'] },
      async (a) =>
        jsonResult(
          await host.history.search(stringArg(a, 'query'), { topK: typeof a.top_k === 'number' ? a.top_k : undefined }),
        ),
    );
  }
  if (apis?.event_get) {
    add(
      'event_get',
      'One event of this conversation by its id',
      { properties: { event_id: str('the event id') }, required: ['event_id'] },
      async (a) => jsonResult({ event: await host.events.get(stringArg(a, 'event_id')) }),
    );
  }
  if (apis?.event_page) {
    add(
      'event_page',
      "A page of this conversation's events, newest first",
      {
        properties: {
          event_types: { type: 'array', items: { type: 'string' } },
          before_cursor: str('a cursor from a previous page'),
          limit: int('events per page'),
        },
      },
      async (a) => jsonResult(await host.events.page(a)),
    );
  }
  return tools;
}

/**
 * Relays newline-delimited JSON-RPC on stdin to the bridge's HTTP endpoint and its answers to
 * stdout (plain JS for `node -e`, no dependencies: the child may run anywhere node runs).
 */
export const STDIO_RELAY = `'use strict';
const url = process.env.RUNNERHOST_MCP_URL;
const auth = 'Bearer ' + process.env.RUNNERHOST_MCP_SECRET;
let buffer = '';
let pending = 0;
let ended = false;
const out = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
const done = () => { if (ended && pending === 0) process.exit(0); };
async function send(line) {
  let id = null;
  try { const m = JSON.parse(line); id = m && m.id !== undefined ? m.id : null; } catch { out({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } }); return; }
  pending++;
  try {
    const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: auth }, body: line });
    const text = await r.text();
    if (r.ok && text) { const body = JSON.parse(text); for (const m of Array.isArray(body) ? body : [body]) out(m); }
    else if (!r.ok && id !== null) out({ jsonrpc: '2.0', id, error: { code: -32000, message: 'runner host MCP bridge: HTTP ' + r.status + ' ' + text.slice(0, 200) } });
  } catch (e) {
    if (id !== null) out({ jsonrpc: '2.0', id, error: { code: -32000, message: 'runner host MCP bridge unreachable (the run has ended?): ' + e.message } });
  } finally { pending--; done(); }
}
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => { buffer += d; let i; while ((i = buffer.indexOf('\\n')) >= 0) { const line = buffer.slice(0, i).trim(); buffer = buffer.slice(i + 1); if (line) void send(line); } });
process.stdin.on('end', () => { ended = true; done(); });
`;

function sameSecret(header: string | undefined, expected: Buffer): boolean {
  const match = /^Bearer (\S+)$/.exec(header ?? '');
  if (!match) {
    return false;
  }
  const given = Buffer.from(match[1]);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function reply(res: http.ServerResponse, status: number, message: string, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message } }));
}

/** Loads the MCP server side (on first use) and builds one protocol server over the run's tools. */
async function mcpServerFactory(name: string, tools: Map<string, BridgedTool>, host: RunHostApi) {
  const [{ Server }, { CallToolRequestSchema, ListToolsRequestSchema, ErrorCode, McpError }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/index.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  const listing = [...tools.values()].map((t) => t.tool);
  return (): McpServer => {
    const server = new Server({ name, version: '1' }, { capabilities: { tools: { listChanged: false } } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listing }));
    server.setRequestHandler(CallToolRequestSchema, async (request) => {
      const args = (request.params.arguments ?? {}) as JsonObject;
      const tool = tools.get(request.params.name);
      try {
        // A tool the run was not granted still goes to the host: it refuses it, and audits the refusal.
        return tool ? await tool.call(args) : toolResultToMcp(await host.tools.call(request.params.name, args));
      } catch (err) {
        if (err instanceof HostApiError) {
          if (['unauthorized', 'not_found', 'invalid_argument', 'unauthenticated'].includes(err.code)) {
            throw new McpError(ErrorCode.InvalidParams, `${err.code}: ${err.message}`, { code: err.code });
          }
          return { content: [{ type: 'text', text: `${err.code}: ${err.message}` }], isError: true };
        }
        if (err instanceof BridgeArgumentError) {
          throw new McpError(ErrorCode.InvalidParams, `invalid_argument: ${err.message}`, { code: 'invalid_argument' });
        }
        if (err instanceof RunAbortedError) {
          throw new McpError(ErrorCode.InternalError, `the run has ended (${err.kind})`, { code: err.kind });
        }
        throw err;
      }
    });
    return server;
  };
}

/**
 * Starts the MCP bridge of a run (RunIO.mcpBridge() calls this and closes it at the run's end).
 * `signal`: the run's; the bridge closes when it fires.
 */
export async function startMcpBridge(
  ctx: RunContext,
  host: RunHostApi,
  signal: AbortSignal,
  options: McpBridgeOptions = {},
): Promise<McpBridge> {
  const name = options.name ?? 'runnerhost';
  const tools = bridgedTools(ctx, host);
  const newServer = await mcpServerFactory(name, tools, host);
  const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js');
  const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js');
  const secret = randomBytes(32).toString('hex');
  const expected = Buffer.from(secret);
  const open = new Set<McpServer>();
  let closed = false;
  let allowedHosts: string[] = [];

  const httpServer = http.createServer((req, res) => {
    if (closed) {
      return reply(res, 503, 'the run has ended');
    }
    if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') {
      return reply(res, 404, 'not found: the endpoint is /mcp');
    }
    if (!sameSecret(req.headers.authorization, expected)) {
      return reply(res, 401, 'unauthenticated: Authorization: Bearer <the run’s bridge secret> required', {
        'www-authenticate': 'Bearer',
      });
    }
    if (req.method !== 'POST') {
      // Stateless: one protocol server per request, no standalone SSE stream, no session to delete.
      return reply(res, 405, 'method not allowed', { allow: 'POST' });
    }
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      enableDnsRebindingProtection: true,
      allowedHosts,
    });
    open.add(server);
    res.on('close', () => {
      open.delete(server);
      void server.close();
    });
    server
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch((err: unknown) => {
        if (!res.headersSent) {
          reply(res, 500, `internal error: ${err instanceof Error ? err.message : String(err)}`);
        }
      });
  });
  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (httpServer.address() as AddressInfo).port;
  allowedHosts = [`127.0.0.1:${port}`, `localhost:${port}`];
  const url = `http://127.0.0.1:${port}/mcp`;

  const close = async () => {
    if (closed) {
      return;
    }
    closed = true;
    unwatch();
    const stopped = new Promise<void>((resolve) => httpServer.close(() => resolve()));
    httpServer.closeAllConnections();
    await Promise.all([...open].map((s) => s.close().catch(() => undefined)));
    open.clear();
    await stopped;
  };
  const unwatch = watchAbort(signal, () => void close());
  if (signal.aborted) {
    await close();
  }

  return {
    url,
    secret,
    http: { name, url, headers: { Authorization: `Bearer ${secret}` } },
    stdio: {
      name,
      command: process.execPath,
      args: ['-e', STDIO_RELAY],
      env: { RUNNERHOST_MCP_URL: url, RUNNERHOST_MCP_SECRET: secret },
    },
    tools: [...tools.keys()],
    // eslint-disable-next-line no-restricted-syntax -- one bridge per MCP-using run, in the runner's process (not the host's run path)
    get closed() {
      return closed;
    },
    async serve(input: Readable, output: Writable) {
      if (closed) {
        throw new RunAbortedError('stopped', 'the MCP bridge is closed (the run has ended)');
      }
      const server = newServer();
      open.add(server);
      const ended = new Promise<void>((resolve) => {
        server.onclose = () => {
          open.delete(server);
          resolve();
        };
      });
      const transport = new StdioServerTransport(input, output);
      input.once('end', () => void server.close());
      await server.connect(transport);
      await ended;
    },
    close,
  };
}
