import { randomBytes } from 'node:crypto';
import { ScriptedOpenAIServer } from '@libs/testing';
import { BuiltHost } from '../common/host-process';
import type { HostHttp } from '../common/http';
import { rssMiB } from '../common/proc';

/*
 * The system under test: the built host as a child process (SQLite in a fresh temp DATA_DIR,
 * LOG_LEVEL=warn, host API rate limit lifted) with one chat model served by the scripted
 * OpenAI-compatible server in this process, and agents on the built-in local agent that may use
 * the model and the built-in tool `current_time` (in process: its own run time is microseconds,
 * so the time between two model requests is the host's).
 */

const UNLIMITED = '1000000';

export class LocalAgentFixture {
  private constructor(
    readonly built: BuiltHost,
    readonly model: ScriptedOpenAIServer,
  ) {}

  get dataDir(): string {
    return this.built.dataDir;
  }

  get http(): HostHttp {
    return this.built.http;
  }

  static async start(): Promise<LocalAgentFixture> {
    const model = await ScriptedOpenAIServer.start();
    const key = `sk-bench-${randomBytes(12).toString('hex')}`;
    const built = await BuiltHost.start({
      tmpPrefix: 'runner-host-bench-la-',
      env: {
        HOSTAPI_CALLS_PER_SECOND: UNLIMITED,
        HOSTAPI_BURST: UNLIMITED,
        BENCH_MODEL_KEY: key,
        SECRET_ENV_ALLOWLIST: 'BENCH_MODEL_KEY',
      },
    }).catch(async (e: unknown) => {
      await model.close();
      throw e;
    });
    const fixture = new LocalAgentFixture(built, model);
    const http = built.http;
    try {
      await http.expect(201, 'POST', '/v1/admin/models', {
        model_id: 'bench-model',
        kind: 'chat',
        provider: 'openai',
        base_url: model.baseUrl,
        api_key_env: 'BENCH_MODEL_KEY',
        model_name: 'scripted-bench',
        context_window: 128000,
        abilities: { tool_calling: true, vision: false, streaming: true },
        tokenizer: 'o200k_base',
      });
      return fixture;
    } catch (e) {
      await fixture.stop();
      throw new Error(
        `${e instanceof Error ? e.message : String(e)}\n--- host.log ---\n${fixture.hostLog().join('\n')}`,
      );
    }
  }

  async agent(agentId: string, config: Record<string, unknown> = {}): Promise<void> {
    await this.http.expect(201, 'POST', '/v1/admin/agents', {
      agent_id: agentId,
      runner_id: 'builtin:local-agent/default',
      runner_config: { model: { primary: 'bench-model', fallbacks: [] }, ...config },
      resource_policy: { allowed_model_ids: ['bench-model'], allowed_tool_names: ['current_time'] },
    });
  }

  /** Posts one message in a fresh conversation; answers the run id. */
  async start(agentId: string, text: string): Promise<string> {
    const body = (await this.http.expect(202, 'POST', '/v1/events', {
      agent_id: agentId,
      event: { event_type: 'message.received', source: 'api' },
      conversation: { conversation_id: `bench-${randomBytes(6).toString('hex')}` },
      actor: { actor_type: 'user', actor_id: 'bench' },
      input: { text },
    })) as { run_id: string };
    return body.run_id;
  }

  async status(runId: string): Promise<string> {
    return ((await this.http.expect(200, 'GET', `/v1/runs/${runId}`)) as { status: string }).status;
  }

  rssMiB(): number {
    return rssMiB(this.built.child.pid);
  }

  hostLog(): string[] {
    return this.built.logLines();
  }

  async stop(): Promise<void> {
    await this.built.stop();
    await this.model.close();
  }

  remove(): void {
    this.built.removeDataDir();
  }
}
