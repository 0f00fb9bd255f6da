import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { Readable, Writable } from 'node:stream';
// The ACP SDK is ESM-only; Node (>= 20.19) loads it with require(). Jest's module system cannot,
// so this module is tested through a child process (runner.spec.ts).
import { client, ndJsonStream, PROTOCOL_VERSION } from '@agentclientprotocol/sdk';
import type {
  AgentCapabilities,
  ClientConnection,
  InitializeResponse,
  McpServer,
  RequestPermissionRequest,
  RequestPermissionResponse,
  SessionNotification,
  StopReason,
} from '@agentclientprotocol/sdk';
import { defineRunner, type JsonObject, type RunContext, type RunIO } from '@runner-host/runner-sdk';
import { configError, readConfig } from '../common/config';

/*
 * The ACP reference runner (docs/reference-runners.md#acp-runner): drives an ACP-compatible agent
 * (Agent Client Protocol over stdio) as a runner. Per run it starts the agent command, initializes,
 * opens the conversation's ACP session (resumed or loaded when the conversation state holds its id,
 * new otherwise), prompts it with the run's input and then with every follow-up steered into the
 * run, and maps the session updates to results: message chunks → message.delta (a turn's text →
 * message.completed), tool calls → tool.call.started / tool.call.completed, the prompt's end →
 * the next turn or run.completed. Cancel sends session/cancel; the agent process ends with the run.
 * The session gets the run's MCP bridge (the SDK's io.mcpBridge()) as its MCP server, so the
 * agent calls the host's tools, knowledge and history with the run's identity and audit.
 */

export const ACP_STATE_KEY = 'acp.session_id';

export const ACP_CONFIG_SCHEMA = [
  { type: 'string', name: 'command', required: true, label: { en_US: 'Agent command' } },
  { type: 'array', name: 'args', default: [], label: { en_US: 'Arguments' } },
  {
    type: 'string',
    name: 'cwd',
    default: '',
    label: { en_US: 'Working directory' },
    description: { en_US: "Absolute; '' : the runner process's working directory." },
  },
  {
    type: 'select',
    name: 'permissions',
    default: 'reject',
    options: [
      { name: 'reject', label: { en_US: 'Reject what the agent asks permission for' } },
      { name: 'allow', label: { en_US: 'Allow once what the agent asks permission for' } },
    ],
    label: { en_US: 'Permission requests' },
  },
  { type: 'integer', name: 'steer_wait_ms', default: 0, label: { en_US: 'Wait for follow-ups (ms)' } },
  {
    type: 'boolean',
    name: 'mcp_bridge',
    default: true,
    label: { en_US: "Hand the agent the run's MCP bridge" },
    description: { en_US: "The host's tools, knowledge and history this run is granted, as an MCP server." },
  },
];

interface AcpConfig {
  command: string;
  args: string[];
  cwd: string;
  permissions: 'reject' | 'allow';
  steer_wait_ms: number;
  mcp_bridge: boolean;
}

export function acpConfig(config: JsonObject): AcpConfig {
  const c = readConfig<AcpConfig>(config, ACP_CONFIG_SCHEMA);
  if (c.command.trim() === '') {
    throw configError('command', 'must not be empty');
  }
  if (!Array.isArray(c.args) || c.args.some((a) => typeof a !== 'string')) {
    throw configError('args', 'must be an array of strings');
  }
  if (c.cwd !== '' && !path.isAbsolute(c.cwd)) {
    throw configError('cwd', 'must be an absolute path');
  }
  if (c.steer_wait_ms < 0) {
    throw configError('steer_wait_ms', 'must be 0 or more');
  }
  return { ...c, cwd: c.cwd || process.cwd() };
}

/**
 * The MCP servers handed to the agent's session: the run's MCP bridge (docs/runner-sdk.md#the-run-scoped-mcp-bridge),
 * which lists what the run's snapshot grants and sends every call through the host API with the
 * run's identity (the host decides and audits it); it closes when the run ends. The streamable
 * HTTP entry (loopback URL, the run's bearer secret as a header) when the agent advertises
 * `mcpCapabilities.http`, else the stdio relay (every ACP agent takes stdio servers). None when
 * the config turns the bridge off or the run is granted nothing to bridge.
 */
export async function mcpServersForRun(
  ctx: RunContext,
  io: RunIO,
  agent: AgentCapabilities = {},
  enabled = true,
): Promise<McpServer[]> {
  if (!enabled) {
    return [];
  }
  const bridge = await io.mcpBridge();
  if (bridge.tools.length === 0) {
    await bridge.close();
    return [];
  }
  const pairs = (record: Record<string, string>) => Object.entries(record).map(([name, value]) => ({ name, value }));
  if (agent.mcpCapabilities?.http) {
    return [{ type: 'http', name: bridge.http.name, url: bridge.http.url, headers: pairs(bridge.http.headers) }];
  }
  const { name, command, args, env } = bridge.stdio;
  return [{ name, command, args, env: pairs(env) }];
}

/** A failure of the agent process or of the ACP exchange. */
export class AgentError extends Error {}

function jsonObject(value: unknown): JsonObject {
  return value && typeof value === 'object' && !Array.isArray(value)
    ? (JSON.parse(JSON.stringify(value)) as JsonObject)
    : value === undefined
      ? {}
      : { value: JSON.parse(JSON.stringify(value)) as JsonObject };
}

/** Maps the session updates of the turn in progress to the run's results. */
class UpdateMapper {
  /** While true (session/load replays the history as updates), updates are not results. */
  replaying = false;
  turnText = '';
  private readonly tools = new Map<string, { name: string; done: boolean }>();

  constructor(private readonly io: RunIO) {}

  apply(n: SessionNotification): void {
    if (this.replaying) {
      return;
    }
    const u = n.update;
    // Thoughts, plans, modes, commands and usage updates are not results of this runner.
    if (u.sessionUpdate === 'agent_message_chunk') {
      if (u.content.type === 'text' && u.content.text) {
        this.turnText += u.content.text;
        void this.io.delta(u.content.text);
      }
    } else if (u.sessionUpdate === 'tool_call' || u.sessionUpdate === 'tool_call_update') {
      if (!this.tools.has(u.toolCallId)) {
        const name = u.name ?? u.title ?? 'tool';
        this.tools.set(u.toolCallId, { name, done: false });
        void this.io.toolCallStarted({ id: u.toolCallId, name, parameters: jsonObject(u.rawInput) });
      }
      this.finishTool(u.toolCallId, u.status, u.rawOutput, u.content);
    }
  }

  private finishTool(id: string, status: string | null | undefined, rawOutput: unknown, content: unknown): void {
    const tool = this.tools.get(id);
    if (!tool || tool.done || (status !== 'completed' && status !== 'failed')) {
      return;
    }
    tool.done = true;
    const output = rawOutput ?? content;
    void this.io.toolCallCompleted({
      id,
      name: tool.name,
      result: status === 'completed' ? jsonObject(output) : null,
      error: status === 'failed' ? JSON.stringify(output ?? 'failed') : null,
    });
  }
}

function permissionAnswer(c: AcpConfig, req: RequestPermissionRequest): RequestPermissionResponse {
  const kind = c.permissions === 'allow' ? 'allow_once' : 'reject_once';
  const option = req.options.find((o) => o.kind === kind) ?? req.options.find((o) => o.kind.startsWith(c.permissions));
  return { outcome: option ? { outcome: 'selected', optionId: option.optionId } : { outcome: 'cancelled' } };
}

/** Starts the agent and connects to it over its stdio. */
function startAgent(
  c: AcpConfig,
  mapper: UpdateMapper,
): { child: ChildProcess; connection: ClientConnection; stderr: () => string; exited: Promise<void> } {
  const child = spawn(c.command, c.args, { cwd: c.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  const errors: string[] = [];
  child.stderr.on('data', (d: Buffer) => {
    errors.push(d.toString());
    errors.splice(0, errors.length - 20);
  });
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', (e) => {
      errors.push(e.message);
      resolve();
    });
  });
  const stream = ndJsonStream(Writable.toWeb(child.stdin) as WritableStream<Uint8Array>, Readable.toWeb(child.stdout));
  const app = client({ name: 'runner-host-acp-runner' })
    .onNotification('session/update', ({ params }) => mapper.apply(params))
    .onRequest('session/request_permission', ({ params }) => permissionAnswer(c, params));
  return { child, connection: app.connect(stream), stderr: () => errors.join('').trim(), exited };
}

/** Opens the conversation's session: resumed or loaded when the agent can, else a new one. */
async function openSession(
  connection: ClientConnection,
  init: InitializeResponse,
  stored: string | null,
  c: AcpConfig,
  mcpServers: McpServer[],
  mapper: UpdateMapper,
): Promise<string> {
  const caps = init.agentCapabilities ?? {};
  if (stored && caps.sessionCapabilities?.resume) {
    const resumed = await connection.agent
      .request('session/resume', { sessionId: stored, cwd: c.cwd, mcpServers })
      .then(() => true)
      .catch(() => false);
    if (resumed) {
      return stored;
    }
  }
  if (stored && caps.loadSession) {
    mapper.replaying = true;
    const loaded = await connection.agent
      .request('session/load', { sessionId: stored, cwd: c.cwd, mcpServers })
      .then(() => true)
      .catch(() => false);
    mapper.replaying = false;
    if (loaded) {
      return stored;
    }
  }
  return (await connection.agent.request('session/new', { cwd: c.cwd, mcpServers })).sessionId;
}

export const acp = defineRunner({
  name: 'default',
  label: { en_US: 'ACP agent' },
  description: { en_US: 'An ACP-compatible coding agent driven over stdio (Agent Client Protocol).' },
  capabilities: { streaming: true, tool_calling: true, knowledge_retrieval: true, steering: true, interrupt: true },
  // What the run's MCP bridge may offer the agent; the agent binding's policy narrows it.
  permissions: { tools: ['detail', 'call'], knowledge_bases: ['retrieve'], history: ['page', 'search'] },
  configSchema: ACP_CONFIG_SCHEMA,
  async run(ctx, io) {
    let c: AcpConfig;
    try {
      c = acpConfig(ctx.config);
    } catch (e) {
      return io.failed((e as Error).message, { code: 'runner.config_invalid' });
    }
    const mapper = new UpdateMapper(io);
    const agent = startAgent(c, mapper);
    let sessionId: string | null = null;
    const cancel = () => {
      if (sessionId) {
        void agent.connection.agent.notify('session/cancel', { sessionId }).catch(() => undefined);
      }
    };
    io.signal.addEventListener('abort', cancel, { once: true });
    let stopReason: StopReason = 'end_turn';
    try {
      const init = await Promise.race([
        agent.connection.agent.request('initialize', {
          protocolVersion: PROTOCOL_VERSION,
          clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
          clientInfo: { name: 'runner-host-acp-runner', version: '1.0.0' },
        }),
        agent.exited.then(() => {
          throw new AgentError(`the agent exited before initializing: ${agent.stderr() || 'no output'}`);
        }),
      ]);
      const stored = ctx.state?.conversation?.[ACP_STATE_KEY];
      sessionId = await openSession(
        agent.connection,
        init,
        typeof stored === 'string' ? stored : null,
        c,
        await mcpServersForRun(ctx, io, init.agentCapabilities ?? {}, c.mcp_bridge),
        mapper,
      );
      if (sessionId !== stored && ctx.conversation?.conversation_id) {
        await io.state('conversation', ACP_STATE_KEY, sessionId);
      }
      for await (const turn of io.turns({ waitMs: c.steer_wait_ms })) {
        mapper.turnText = '';
        const response = await agent.connection.agent.request('session/prompt', {
          sessionId,
          prompt: [{ type: 'text', text: turn.text }],
        });
        stopReason = response.stopReason;
        if (stopReason === 'cancelled' || io.signal.aborted) {
          return;
        }
        await io.message({ role: 'assistant', content: mapper.turnText });
        if (stopReason === 'refusal') {
          return io.failed('the agent refused the prompt', { code: 'runner.agent_refused' });
        }
      }
      await io.completed({ finishReason: stopReason === 'end_turn' ? 'stop' : stopReason });
    } catch (e) {
      if (io.signal.aborted) {
        throw e;
      }
      const detail = e instanceof Error ? e.message : JSON.stringify(e);
      return io.failed(
        e instanceof AgentError
          ? detail
          : `acp: ${detail}${agent.stderr() ? ` (agent stderr: ${agent.stderr().slice(-500)})` : ''}`,
        {
          code: 'runner.agent_failed',
        },
      );
    } finally {
      io.signal.removeEventListener('abort', cancel);
      agent.connection.close();
      agent.child.stdin?.end();
      // The agent has a moment to end on its own after its stdin closes.
      const timer = setTimeout(() => agent.child.kill('SIGKILL'), 2000);
      await agent.exited;
      clearTimeout(timer);
    }
  },
});
