import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ElicitRequestSchema, ErrorCode, McpError, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { DomainError } from '@libs/protocol';
import { canonicalJson } from '@libs/authz';
import { ElicitationBroker } from './elicitation';
import { StderrTail } from './stderr-tail';
import { resolveEnvRefs, type McpSpec } from './tool-config';

/** Tools kept per MCP source; the catalogue, run snapshots and model prompts carry each of them. */
export const MAX_LISTED_TOOLS = 1000;
/** Names read past the cap only to report them in `skipped_tools`; pages beyond are not read. */
const MAX_READ_TOOLS = 10 * MAX_LISTED_TOOLS;

/** One listing of an MCP server: the kept tools, the names over the cap, whether pages were left unread. */
export interface McpListing {
  tools: Tool[];
  beyondCap: string[];
  unread: boolean;
}

/**
 * What the host tells MCP servers it can do on a shared connection: nothing beyond calling
 * tools. No `sampling` (the host does not lend a run's model to a server; see
 * docs/models-tools-knowledge.md#mcp-compatibility), no `roots`. Servers hide the tools that need
 * them; a server that asks anyway gets JSON-RPC "method not found". `elicitation` is offered only
 * on a run's own connection, when the run may ask a person (docs/interactions.md#mcp-elicitation).
 */
const CLIENT_CAPABILITIES = {};
const RUN_CLIENT_CAPABILITIES = { elicitation: {} };

/** A run that may ask a person: its calls use a connection of its own that offers elicitation. */
export interface McpRunScope {
  runId: string;
  /** Aborted when the run ends: its connections are closed. */
  runSignal: AbortSignal;
}

/** One connection to one MCP server. */
interface Connection {
  /** The source config it was made with: another config means another connection. */
  key: string;
  ready: Promise<Client>;
  client: Client;
  closed: boolean;
  /** A run's own connection: the signals of its calls in flight (an elicitation ends with them). */
  calls?: Set<AbortSignal>;
}

export type ConnectionState = 'connected' | 'connecting' | 'disconnected';

/**
 * Live MCP client connections, one per source: made on first use, kept open, and made again
 * lazily when the last one closed or failed (a stdio child that exited, an HTTP session that is
 * gone). The owner hears about every new connection (to re-list its tools) and about servers'
 * `tools/list_changed` notifications. Everything is closed when the host shuts down.
 */
@Injectable()
export class McpClientPool implements OnModuleDestroy {
  private readonly logger = new Logger('McpClientPool');
  private readonly connections = new Map<string, Connection>();
  private readonly errors = new Map<string, string>();
  /** Set by the registry: a new connection was made, or the server's tool list changed. */
  onToolsChanged: (sourceId: string) => void = () => undefined;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly broker: ElicitationBroker,
  ) {}

  /**
   * The source's live client; `fresh` when this call made the connection. With `run` (a run that
   * may ask a person) a connection of the run's own, offering elicitation, closed when the run
   * ends; `release` ends the call (`signal`: the call's own).
   */
  async acquire(
    sourceId: string,
    spec: McpSpec,
    run: McpRunScope | null = null,
    signal: AbortSignal | null = null,
  ): Promise<{ client: Client; fresh: boolean; release: () => void }> {
    if (run && this.broker.requester && !run.runSignal.aborted) {
      return this.acquireForRun(sourceId, spec, run, signal);
    }
    const r = await this.acquireShared(sourceId, spec);
    return { ...r, release: () => undefined };
  }

  private async acquireForRun(
    sourceId: string,
    spec: McpSpec,
    run: McpRunScope,
    signal: AbortSignal | null,
  ): Promise<{ client: Client; fresh: boolean; release: () => void }> {
    const id = `${sourceId}\u0000run:${run.runId}`;
    const key = canonicalJson(spec);
    let conn = this.connections.get(id);
    let fresh = false;
    if (!conn || conn.closed || conn.key !== key) {
      if (conn) {
        void this.discard(id, conn);
      }
      conn = this.connect(sourceId, spec, key, run);
      this.connections.set(id, conn);
      const made = conn;
      run.runSignal.addEventListener('abort', () => void this.discard(id, made), { once: true });
      fresh = true;
    }
    const calls = conn.calls!;
    const mine = signal ?? new AbortController().signal;
    calls.add(mine);
    try {
      return { client: await conn.ready, fresh, release: () => calls.delete(mine) };
    } catch (e) {
      calls.delete(mine);
      throw e;
    }
  }

  private async acquireShared(sourceId: string, spec: McpSpec): Promise<{ client: Client; fresh: boolean }> {
    const key = canonicalJson(spec);
    const current = this.connections.get(sourceId);
    if (current && !current.closed && current.key === key) {
      return { client: await current.ready, fresh: false };
    }
    if (current) {
      void this.discard(sourceId, current);
    }
    const conn = this.connect(sourceId, spec, key);
    this.connections.set(sourceId, conn);
    return { client: await conn.ready, fresh: true };
  }

  state(sourceId: string): ConnectionState {
    const c = this.connections.get(sourceId);
    if (!c || c.closed) {
      return 'disconnected';
    }
    return c.client.getServerVersion() ? 'connected' : 'connecting';
  }

  /** The last connection failure of a source, until a connection succeeds. */
  lastError(sourceId: string): string | null {
    return this.errors.get(sourceId) ?? null;
  }

  recordError(sourceId: string, message: string): void {
    this.errors.set(sourceId, message);
  }

  /** Forgets a recorded failure (the source's tools were listed and stored since). */
  clearError(sourceId: string): void {
    this.errors.delete(sourceId);
  }

  /** Drops the source's connection if it is still `client` (the next use connects again). */
  invalidate(sourceId: string, client: Client): void {
    const c = this.connections.get(sourceId);
    if (c && c.client === client) {
      void this.discard(sourceId, c);
    }
  }

  /** Closes the source's connection (source deleted, disabled or reconfigured). */
  async close(sourceId: string): Promise<void> {
    const c = this.connections.get(sourceId);
    this.errors.delete(sourceId);
    if (c) {
      await this.discard(sourceId, c);
    }
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all([...this.connections.entries()].map(([id, c]) => this.discard(id, c)));
  }

  /**
   * The server's tools, following pages: the first MAX_LISTED_TOOLS are kept; the names of the
   * rest are read (up to MAX_READ_TOOLS) so the source can say what it left out.
   */
  async listTools(client: Client): Promise<McpListing> {
    const tools: Tool[] = [];
    const beyondCap: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor ? { cursor } : undefined, {
        timeout: this.config.tools.mcpConnectTimeoutMs,
      });
      for (const tool of page.tools) {
        if (tools.length < MAX_LISTED_TOOLS) {
          tools.push(tool);
        } else if (beyondCap.length < MAX_READ_TOOLS - MAX_LISTED_TOOLS) {
          beyondCap.push(tool.name);
        }
      }
      cursor = page.nextCursor;
    } while (cursor && tools.length + beyondCap.length < MAX_READ_TOOLS);
    return { tools, beyondCap, unread: cursor !== undefined };
  }

  private discard(sourceId: string, c: Connection): Promise<void> {
    c.closed = true;
    if (this.connections.get(sourceId) === c) {
      this.connections.delete(sourceId);
    }
    return c.client.close().catch((e: unknown) => this.logger.warn(`closing MCP source ${sourceId}: ${String(e)}`));
  }

  private connect(sourceId: string, spec: McpSpec, key: string, run: McpRunScope | null = null): Connection {
    const client = new Client(
      { name: 'runner-host', version: '1' },
      {
        capabilities: run ? RUN_CLIENT_CAPABILITIES : CLIENT_CAPABILITIES,
        listChanged: { tools: { autoRefresh: false, onChanged: () => this.onToolsChanged(sourceId) } },
      },
    );
    const stderr = new StderrTail();
    const conn: Connection = { key, client, closed: false, ready: Promise.resolve(client) };
    if (run) {
      const calls = new Set<AbortSignal>();
      conn.calls = calls;
      client.setRequestHandler(ElicitRequestSchema, (req, extra) => {
        const requester = this.broker.requester;
        if (!requester) {
          return { action: 'decline' as const };
        }
        return requester.request(run.runId, req.params, elicitationSignal(calls, extra.signal, run.runSignal));
      });
    }
    client.onclose = () => {
      if (!conn.closed) {
        const why = `MCP source ${sourceId}: the server closed the connection${stderr.suffix()}`;
        this.logger.warn(`${why}; the next use reconnects`);
        this.errors.set(sourceId, why);
        conn.closed = true;
        if (this.connections.get(sourceId) === conn) {
          this.connections.delete(sourceId);
        }
      }
    };
    client.onerror = (e) => this.logger.debug(`MCP source ${sourceId}: ${e.message}`);
    const timeout = this.config.tools.mcpConnectTimeoutMs;
    conn.ready = (async () => {
      try {
        await client.connect(this.transport(sourceId, spec, stderr), { timeout });
      } catch (e) {
        this.discard(sourceId, conn).catch(() => undefined);
        const timedOut = e instanceof McpError && e.code === (ErrorCode.RequestTimeout as number);
        const why = timedOut
          ? `no answer to MCP initialize within ${timeout} ms (MCP_CONNECT_TIMEOUT_MS)`
          : (e as Error).message;
        const message =
          e instanceof DomainError ? e.message : `MCP source ${sourceId}: cannot connect: ${why}${stderr.suffix()}`;
        this.errors.set(sourceId, message);
        throw new DomainError('unavailable', message, { source_id: sourceId });
      }
      this.errors.delete(sourceId);
      if (run) {
        return client; // a run's own connection: the shared one keeps the catalogue
      }
      this.logger.log(`MCP source ${sourceId}: connected (${spec.kind})`);
      this.onToolsChanged(sourceId);
      return client;
    })();
    // Callers await `ready`; this keeps a failure nobody awaited from being unhandled.
    conn.ready.catch(() => undefined);
    return conn;
  }

  private transport(sourceId: string, spec: McpSpec, tail: StderrTail): Transport {
    if (spec.kind === 'mcp_http') {
      const headers = resolveEnvRefs(spec.config.headers, `source ${sourceId} config.headers`, this.config.secret);
      return new StreamableHTTPClientTransport(new URL(spec.config.url), { requestInit: { headers } });
    }
    const { command, args, env, cwd } = spec.config;
    const transport = new StdioClientTransport({
      command,
      args,
      cwd,
      env: resolveEnvRefs(env, `source ${sourceId} config.env`, this.config.secret),
      stderr: 'pipe',
    });
    // The child's stderr goes to the debug log and its tail to last_error (and must be read, or a
    // chatty child would block).
    transport.stderr?.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      tail.push(text);
      this.logger.debug(`MCP source ${sourceId} stderr: ${text.trimEnd()}`);
    });
    return transport;
  }
}

/**
 * An elicitation lives as long as the tool calls that can have asked it: aborted when the server
 * withdraws it, when the run ends, or when no call of the connection is in flight any more (the
 * call that asked timed out, was cancelled or ended).
 */
function elicitationSignal(calls: ReadonlySet<AbortSignal>, server: AbortSignal, runEnd: AbortSignal): AbortSignal {
  const ctl = new AbortController();
  const live = [...calls].filter((s) => !s.aborted);
  const check = () => {
    if (live.every((s) => s.aborted)) {
      ctl.abort(new Error('the tool call that asked has ended'));
    }
  };
  for (const s of live) {
    s.addEventListener('abort', check, { once: true });
  }
  server.addEventListener('abort', () => ctl.abort(new Error('the MCP server withdrew the request')), { once: true });
  runEnd.addEventListener('abort', () => ctl.abort(new Error('the run ended')), { once: true });
  check();
  return ctl.signal;
}
