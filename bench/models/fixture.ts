import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { BuiltHost, freePort, hostNodeArgs, readLines, waitFor } from '../common/host-process';
import type { HostHttp } from '../common/http';
import { Child } from '../common/proc';
import { BenchPlugin } from './plugin-client';

/*
 * The system under test: the scripted provider and the built host (SQLite in a fresh temp
 * DATA_DIR, LOG_LEVEL=warn, host API rate limit lifted) as child processes; the chat model
 * registered over the admin API with its key in an environment variable only the host gets; a
 * hand-driven plugin (in the bench process) connected, granted the model, and holding one run.
 */

const SCRIPTED_MAIN = path.join(__dirname, 'scripted-server.js');
export const MODEL_ID = 'bench-chat';
const AUTHOR = 'bench';
const PLUGIN = 'models';

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
    const key = `sk-bench-${randomBytes(16).toString('hex')}`;
    const env: Record<string, string> = {
      HOSTAPI_CALLS_PER_SECOND: '1000000',
      HOSTAPI_BURST: '1000000',
      HOSTAPI_MAX_PAYLOAD_BYTES: String(8 * 1024 * 1024),
      BENCH_SCRIPTED_KEY: key,
      // A model's api_key_env must be on the host's secret allowlist (SPEC: secrets).
      SECRET_ENV_ALLOWLIST: 'BENCH_SCRIPTED_KEY',
    };
    const built = await BuiltHost.start({
      tmpPrefix: 'runner-host-bench-models-',
      env,
      // The host calls only the scripted provider, with the key above.
      unset: ['OPENAI_API_KEY'],
      nodeArgs: hostNodeArgs(),
    });
    const { dataDir, http, child: host } = built;
    const scriptedPort = await freePort();
    const scriptedLog = fs.openSync(path.join(dataDir, 'scripted.log'), 'a');
    const scripted = new Child(
      'scripted-server',
      SCRIPTED_MAIN,
      { ...process.env, SCRIPTED_PORT: String(scriptedPort), SCRIPTED_CHUNKS: String(chunks) },
      ['ignore', scriptedLog, scriptedLog],
    );
    fs.closeSync(scriptedLog);
    const providerBaseUrl = `http://127.0.0.1:${scriptedPort}/v1`;
    try {
      await waitFor(
        'the scripted provider',
        30_000,
        async () => (await fetch(`${providerBaseUrl}/models`)).status === 404,
        [scripted],
      );
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
      const plugin = new BenchPlugin(built.grpcAddress, token);
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
      await built.stop();
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
    return readLines(path.join(this.dataDir, 'host.log'));
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
