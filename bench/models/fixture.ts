import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { HostHttp } from '../dispatch/http';
import { Child } from '../dispatch/proc';
import { BenchPlugin } from './plugin-client';

/*
 * The system under test: the scripted provider and the built host (SQLite in a fresh temp
 * DATA_DIR, LOG_LEVEL=warn, host API rate limit lifted) as child processes; the chat model
 * registered over the admin API with its key in an environment variable only the host gets; a
 * hand-driven plugin (in the bench process) connected, granted the model, and holding one run.
 */

const DIST = path.resolve(__dirname, '..', '..');
const HOST_MAIN = path.join(DIST, 'apps', 'host', 'src', 'main.js');
const SCRIPTED_MAIN = path.join(__dirname, 'scripted-server.js');
export const MODEL_ID = 'bench-chat';
const AUTHOR = 'bench';
const PLUGIN = 'models';

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

async function until(
  what: string,
  probe: () => Promise<boolean>,
  children: Child[],
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const c of children) {
      if (!c.running) {
        throw new Error(`${c.name} exited (${c.exitStatus ?? '?'}) while waiting for ${what}`);
      }
    }
    if (await probe().catch(() => false)) {
      return;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await sleep(50);
  }
}

export class ModelsFixture {
  private constructor(
    readonly dataDir: string,
    readonly http: HostHttp,
    readonly host: Child,
    readonly scripted: Child,
    readonly providerBaseUrl: string,
    readonly plugin: BenchPlugin,
    readonly runId: string,
    readonly key: string,
  ) {}

  static async start(chunks: number): Promise<ModelsFixture> {
    if (!fs.existsSync(HOST_MAIN)) {
      throw new Error(`${HOST_MAIN} is missing: run the build first`);
    }
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'runner-host-bench-models-'));
    const [port, grpcPort, scriptedPort] = [await freePort(), await freePort(), await freePort()];
    const key = `sk-bench-${randomBytes(16).toString('hex')}`;
    const adminKey = `bench-admin-${randomBytes(18).toString('hex')}`;
    const log = (name: string) => fs.openSync(path.join(dataDir, `${name}.log`), 'a');
    const scriptedLog = log('scripted');
    const scripted = new Child(
      'scripted-server',
      SCRIPTED_MAIN,
      { ...process.env, SCRIPTED_PORT: String(scriptedPort), SCRIPTED_CHUNKS: String(chunks) },
      ['ignore', scriptedLog, scriptedLog],
    );
    const hostLog = log('host');
    const hostEnv: NodeJS.ProcessEnv = {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(grpcPort),
      DATA_DIR: dataDir,
      ADMIN_API_KEY: adminKey,
      LOG_LEVEL: 'warn',
      HOSTAPI_CALLS_PER_SECOND: '1000000',
      HOSTAPI_BURST: '1000000',
      HOSTAPI_MAX_PAYLOAD_BYTES: String(8 * 1024 * 1024),
      BENCH_SCRIPTED_KEY: key,
    };
    delete hostEnv.DATABASE_URL;
    delete hostEnv.OPENAI_API_KEY;
    // BENCH_HOST_NODE_ARGS: extra node flags for the host only, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
    const nodeArgs = (process.env.BENCH_HOST_NODE_ARGS ?? '').split(/\s+/).filter((a) => a !== '');
    const host = new Child('host', HOST_MAIN, hostEnv, ['ignore', hostLog, hostLog], nodeArgs);
    fs.closeSync(scriptedLog);
    fs.closeSync(hostLog);
    const http = new HostHttp(`http://127.0.0.1:${port}`, adminKey);
    const providerBaseUrl = `http://127.0.0.1:${scriptedPort}/v1`;
    try {
      await until('the scripted provider', async () => (await fetch(`${providerBaseUrl}/models`)).status === 404, [
        scripted,
      ]);
      await until('the host', async () => (await http.json('GET', '/health/ready')).status === 200, [host]);
      await http.expect(201, 'POST', '/v1/admin/models', {
        model_id: MODEL_ID,
        kind: 'chat',
        base_url: providerBaseUrl,
        api_key_env: 'BENCH_SCRIPTED_KEY',
        model_name: 'scripted-bench',
        tokenizer: 'o200k_base',
      });
      const { token } = (await http.expect(201, 'POST', '/v1/admin/plugins', { author: AUTHOR, name: PLUGIN })) as {
        token: string;
      };
      const plugin = new BenchPlugin(`127.0.0.1:${grpcPort}`, token);
      await plugin.hello(AUTHOR, PLUGIN, {
        id: `plugin:${AUTHOR}/${PLUGIN}/default`,
        name: 'default',
        label: { en_US: 'models bench' },
        protocol_version: '1',
        capabilities: { streaming: true },
        permissions: { models: ['invoke', 'stream', 'count_tokens'] },
        config_schema: [],
        metadata: {},
      });
      await http.expect(201, 'POST', '/v1/admin/agents', {
        agent_id: 'bench-models',
        runner_id: `plugin:${AUTHOR}/${PLUGIN}/default`,
        runner_config: { timeout: 0 },
        resource_policy: { allowed_model_ids: [MODEL_ID] },
      });
      await http.expect(202, 'POST', '/v1/events', {
        agent_id: 'bench-models',
        event: { event_type: 'message.received', source: 'api' },
        conversation: { conversation_id: 'bench-models' },
        actor: { actor_type: 'user', actor_id: 'bench' },
        input: { text: 'bench' },
      });
      const runId = await plugin.nextRun();
      return new ModelsFixture(dataDir, http, host, scripted, providerBaseUrl, plugin, runId, key);
    } catch (e) {
      http.close();
      await host.stop();
      await scripted.stop();
      throw new Error(`${e instanceof Error ? e.message : String(e)} (logs in ${dataDir})`);
    }
  }

  async stop(): Promise<void> {
    this.plugin.complete(this.runId);
    await sleep(200);
    this.plugin.close();
    this.http.close();
    await this.host.stop();
    await this.scripted.stop();
  }

  hostLogLines(): string[] {
    const file = path.join(this.dataDir, 'host.log');
    return fs.existsSync(file)
      ? fs
          .readFileSync(file, 'utf8')
          .split('\n')
          .filter((l) => l.trim() !== '')
      : [];
  }

  /** model_usage rows of the bench run, read after stop(). */
  usageRows(): { operation: string; complete: number }[] {
    const db = new Database(path.join(this.dataDir, 'runner-host.sqlite'), { readonly: true });
    try {
      return db.prepare('SELECT operation, complete FROM model_usage WHERE run_id = ?').all(this.runId) as {
        operation: string;
        complete: number;
      }[];
    } finally {
      db.close();
    }
  }

  removeDataDir(): void {
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}
