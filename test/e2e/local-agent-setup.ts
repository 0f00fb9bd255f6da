import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ScriptedOpenAIServer } from '@libs/testing';
import { ADMIN_KEY, Host, TestDatabase, parseSse, waitFor, type SseEvent } from './harness';

/*
 * What the local-agent e2e tests share: a host with the scripted OpenAI-compatible server as its
 * model provider (two chat models, so a fallback has somewhere to go), a real MCP server over
 * stdio as a tool source, a knowledge base with one document, and agents bound to the built-in
 * runner `builtin:local-agent/default`.
 */

export const LOCAL_AGENT = 'builtin:local-agent/default';
export const KB_FACT = 'The reset code of the Model 7 router is 4711.';
export const SKILL_DESCRIPTION = 'Resetting a Model 7 router step by step';
export const SKILL_INSTRUCTIONS = 'Unplug the router, hold RESET for ten seconds, plug it back in.';
const KEY = `sk-scripted-${randomBytes(12).toString('hex')}`;
const MCP_STDIO_ARGS = [
  '-r',
  require.resolve('ts-node/register/transpile-only'),
  path.join(__dirname, 'fixtures', 'mcp-stdio-server.ts'),
];

export interface AuditRow {
  run_id: string;
  action: string;
  resource: string | null;
  scope: string | null;
  outcome: 'allowed' | 'denied' | 'failed';
  error_code: string | null;
  plugin_id: string | null;
  runner_id: string | null;
  duration_us: number;
  [more: string]: unknown;
}

export class LocalAgentWorld {
  readonly db = new TestDatabase();
  /** SKILLS_DIR of the host: one skill package, `router-reset`. */
  readonly skillsDir = path.join(this.db.dataDir, 'skills');
  host: Host;
  private readonly env: Record<string, string>;

  /** `env`: more host environment (limits) for this world's host. */
  constructor(env: Record<string, string> = {}) {
    this.env = env;
    this.host = new Host(this.db, {
      SCRIPTED_KEY: KEY,
      SECRET_ENV_ALLOWLIST: 'SCRIPTED_KEY',
      CANCEL_GRACE_MS: '3000',
      SKILLS_DIR: this.skillsDir,
      ...env,
    });
  }
  server!: ScriptedOpenAIServer;

  async start(): Promise<void> {
    fs.mkdirSync(path.join(this.skillsDir, 'router-reset', 'references'), { recursive: true });
    fs.writeFileSync(
      path.join(this.skillsDir, 'router-reset', 'SKILL.md'),
      `---\nname: router-reset\ndescription: ${SKILL_DESCRIPTION}\n---\n${SKILL_INSTRUCTIONS}\n`,
    );
    fs.writeFileSync(path.join(this.skillsDir, 'router-reset', 'references', 'codes.md'), 'Factory code: 0000\n');
    this.server = await ScriptedOpenAIServer.start();
    await this.host.start();
    for (const [id, name] of [
      ['primary', 'scripted-primary'],
      ['backup', 'scripted-backup'],
    ]) {
      await this.created('/v1/admin/models', {
        model_id: id,
        kind: 'chat',
        provider: 'openai',
        base_url: this.server.baseUrl,
        api_key_env: 'SCRIPTED_KEY',
        model_name: name,
        context_window: 128000,
        max_output_tokens: 4096,
        abilities: { tool_calling: true, vision: false, streaming: true },
        tokenizer: 'o200k_base',
      });
    }
    const source = await this.host.api('POST', '/v1/admin/tools/sources', {
      source_id: 'local',
      kind: 'mcp_stdio',
      config: { command: process.execPath, args: MCP_STDIO_ARGS },
    });
    expect(source.body).toMatchObject({ status: 'connected' });
    await this.created('/v1/admin/knowledge-bases', { kb_id: 'manual', name: 'Router manual' });
    await this.created('/v1/admin/knowledge-bases/manual/documents', {
      name: 'router.md',
      content_type: 'text/markdown',
      content: `# Model 7 router\n\n${KB_FACT} Hold the button for ten seconds after entering it.`,
    });
  }

  /** Stops the host (`SIGKILL`: no shutdown at all) and starts a new one on the same database. */
  async restart(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.host.stop(signal);
    this.host = new Host(this.db, {
      SCRIPTED_KEY: KEY,
      SECRET_ENV_ALLOWLIST: 'SCRIPTED_KEY',
      CANCEL_GRACE_MS: '3000',
      SKILLS_DIR: this.skillsDir,
      ...this.env,
    });
    // Boot connects the MCP tool source (a ts-node child): slower than a first start on a busy machine.
    await this.host.launch();
    await waitFor(
      'host readiness after the restart',
      async () => (await fetch(`${this.host.http}/health/ready`)).ok,
      120_000,
    );
  }

  async stop(): Promise<void> {
    await this.host.stop();
    await this.server?.close();
    await this.db.drop();
  }

  private async created(p: string, body: unknown): Promise<void> {
    const r = await this.host.api('POST', p, body);
    expect({ path: p, status: r.status, body: r.status === 201 ? null : r.body }).toEqual({
      path: p,
      status: 201,
      body: null,
    });
  }

  /** An agent on the built-in runner; runner_config gets the two models unless it names its own. */
  async agent(
    agentId: string,
    opts: { config?: object; tools?: string[]; kbs?: string[]; concurrency?: string; delivery?: object } = {},
  ): Promise<void> {
    await this.created('/v1/admin/agents', {
      agent_id: agentId,
      runner_id: LOCAL_AGENT,
      runner_config: { model: { primary: 'primary', fallbacks: ['backup'] }, ...opts.config },
      resource_policy: {
        allowed_model_ids: ['primary', 'backup'],
        allowed_tool_names: opts.tools ?? [],
        allowed_kb_ids: opts.kbs ?? [],
      },
      ...(opts.concurrency ? { concurrency_policy: { mode: opts.concurrency } } : {}),
      ...(opts.delivery ? { delivery_policy: opts.delivery } : {}),
    });
  }

  /** Posts a user message; answers the run id. */
  async say(agentId: string, conversationId: string, text: string): Promise<string> {
    const r = await this.host.api('POST', '/v1/events', {
      agent_id: agentId,
      event: { event_type: 'message.received', source: 'api' },
      conversation: { conversation_id: conversationId },
      actor: { actor_type: 'user', actor_id: 'u1' },
      input: { text },
    });
    expect({ status: r.status, disposition: r.body.disposition }).toEqual({ status: 202, disposition: 'started' });
    return r.body.run_id as string;
  }

  /** The run's whole result stream (waits for its terminal result). */
  results(runId: string): Promise<SseEvent[]> {
    return this.host.sse(runId);
  }

  async run(runId: string): Promise<any> {
    return (await this.host.api('GET', `/v1/runs/${runId}`)).body;
  }

  async audit(runId: string): Promise<AuditRow[]> {
    const r = await this.host.api<{ items: AuditRow[] }>('GET', `/v1/admin/runs/${runId}/audit?limit=100`);
    expect(r.status).toBe(200);
    return r.body.items;
  }

  /** Chat requests the provider got, as [model name, messages]. */
  chats(): { model: string; messages: any[]; tools: any[] }[] {
    return this.server.requests
      .filter((r) => r.path.endsWith('/chat/completions'))
      .map((r) => ({ model: r.body.model, messages: r.body.messages, tools: r.body.tools ?? [] }));
  }

  /**
   * Reads the run's result stream until `until` holds for an event, then calls `then` and reads
   * on to the end: for acting in the middle of a run (a cancel after the first delta).
   */
  async streamUntil(runId: string, until: (e: SseEvent) => boolean, then: () => Promise<void>): Promise<SseEvent[]> {
    const res = await fetch(`${this.host.http}/v1/runs/${runId}/events`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
    });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    let acted = false;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        break;
      }
      text += decoder.decode(value, { stream: true });
      if (!acted && parseSse(text.slice(0, text.lastIndexOf('\n\n') + 2)).some(until)) {
        acted = true;
        await then();
      }
    }
    expect(acted).toBe(true);
    return parseSse(text);
  }
}

/** Text of every message of a chat request, joined (to find what the model was shown). */
export function shown(messages: any[]): string {
  return messages
    .map((m) =>
      typeof m.content === 'string'
        ? m.content
        : Array.isArray(m.content)
          ? m.content.map((c: any) => c.text ?? '').join(' ')
          : '',
    )
    .join('\n');
}

export { waitFor };
