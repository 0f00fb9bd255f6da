import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ScriptedOpenAIServer } from '@libs/testing';
import { HostHttp } from '../dispatch/http';
import { Child, rssMiB } from '../dispatch/proc';

/*
 * The system under test: the built host as a child process (SQLite in a fresh temp DATA_DIR,
 * LOG_LEVEL=warn, host API rate limit lifted) with one chat model served by the scripted
 * OpenAI-compatible server in this process, and agents on the built-in local agent that may use
 * the model and the built-in tool `current_time` (in process: its own run time is microseconds,
 * so the time between two model requests is the host's).
 */

const HOST_MAIN = path.resolve(__dirname, '..', '..', 'apps', 'host', 'src', 'main.js');
const UNLIMITED = '1000000';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export class LocalAgentFixture {
  private constructor(
    readonly dataDir: string,
    readonly http: HostHttp,
    readonly host: Child,
    readonly model: ScriptedOpenAIServer,
  ) {}

  static async start(): Promise<LocalAgentFixture> {
    if (!fs.existsSync(HOST_MAIN)) {
      throw new Error(`${HOST_MAIN} is missing: run npm run build first`);
    }
    const model = await ScriptedOpenAIServer.start();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'runner-host-bench-la-'));
    const [port, grpcPort] = [await freePort(), await freePort()];
    const adminKey = `bench-admin-${randomBytes(18).toString('hex')}`;
    const key = `sk-bench-${randomBytes(12).toString('hex')}`;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(grpcPort),
      DATA_DIR: dataDir,
      ADMIN_API_KEY: adminKey,
      LOG_LEVEL: 'warn',
      HOSTAPI_CALLS_PER_SECOND: UNLIMITED,
      HOSTAPI_BURST: UNLIMITED,
      BENCH_MODEL_KEY: key,
      SECRET_ENV_ALLOWLIST: 'BENCH_MODEL_KEY',
    };
    delete env.DATABASE_URL;
    const log = fs.openSync(path.join(dataDir, 'host.log'), 'a');
    const host = new Child('host', HOST_MAIN, env, ['ignore', log, log]);
    fs.closeSync(log);
    const http = new HostHttp(`http://127.0.0.1:${port}`, adminKey);
    const fixture = new LocalAgentFixture(dataDir, http, host, model);
    try {
      const until = Date.now() + 30_000;
      while ((await http.json('GET', '/health/ready').catch(() => ({ status: 0 }))).status !== 200) {
        if (!host.running || Date.now() > until) {
          throw new Error('the host did not get ready');
        }
        await sleep(50);
      }
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
    return rssMiB(this.host.pid);
  }

  hostLog(): string[] {
    try {
      return fs
        .readFileSync(path.join(this.dataDir, 'host.log'), 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== '');
    } catch {
      return [];
    }
  }

  async stop(): Promise<void> {
    this.http.close();
    await this.host.stop();
    await this.model.close();
  }

  remove(): void {
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}
