import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { HostHttp } from './http';
import type { BenchDatabase } from './postgres';
import { Child } from './proc';

/*
 * The system under test: the built host (SQLite in a fresh temp DATA_DIR, or PostgreSQL when a
 * BenchDatabase is given; free ports, LOG_LEVEL=warn) and the demo runner, each a child process,
 * plus the admin setup (plugin, token, runner connected, agent). Their stdout/stderr go to files in
 * DATA_DIR, read back afterwards.
 */

const DIST = path.resolve(__dirname, '..', '..');
const HOST_MAIN = path.join(DIST, 'apps', 'host', 'src', 'main.js');
const RUNNER_MAIN = path.join(DIST, 'apps', 'demo-runner', 'src', 'main.js');
export const RUNNER_ID = 'plugin:demo/echo/default';

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

async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined>,
  alive: Child[],
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const c of alive) {
      if (!c.running) {
        throw new Error(`${c.name} exited (${c.exitStatus ?? '?'}) while waiting for ${what}`);
      }
    }
    const value = await probe().catch(() => undefined);
    if (value !== undefined) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await sleep(50);
  }
}

export interface LogSummary {
  lines: number;
  /** Host: every line (LOG_LEVEL=warn). Runner: lines whose level is not info. */
  problems: string[];
  /** Runner only: how many times it (re)connected. */
  connects: number;
}

export class HostFixture {
  private constructor(
    readonly dataDir: string,
    readonly http: HostHttp,
    readonly host: Child,
    readonly runner: Child,
    /** PostgreSQL database of this host; null = SQLite in dataDir. */
    readonly pg: BenchDatabase | null,
  ) {}

  get database(): 'sqlite' | 'postgres' {
    return this.pg ? 'postgres' : 'sqlite';
  }

  static async start(
    agentId: string,
    runnerConfig: Record<string, unknown>,
    pg: BenchDatabase | null = null,
  ): Promise<HostFixture> {
    for (const file of [HOST_MAIN, RUNNER_MAIN]) {
      if (!fs.existsSync(file)) {
        throw new Error(`${file} is missing: run npm run build first`);
      }
    }
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'runner-host-bench-'));
    const [port, grpcPort] = [await freePort(), await freePort()];
    const adminKey = `bench-admin-${randomBytes(18).toString('hex')}`;
    const hostEnv: NodeJS.ProcessEnv = {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(grpcPort),
      DATA_DIR: dataDir,
      ADMIN_API_KEY: adminKey,
      LOG_LEVEL: 'warn',
      // The streaming level follows 100 runs with 10 readers each under one API key: 1,000 streams,
      // above the per-key default (256) that bounds what one key can make the host hold.
      SSE_MAX_STREAMS_PER_KEY: '2048',
    };
    delete hostEnv.DATABASE_URL;
    if (pg) {
      hostEnv.DATABASE_URL = pg.url;
    }
    const hostLog = fs.openSync(path.join(dataDir, 'host.log'), 'a');
    // BENCH_HOST_NODE_ARGS: extra node flags for the host only, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
    const nodeArgs = (process.env.BENCH_HOST_NODE_ARGS ?? '').split(/\s+/).filter((a) => a !== '');
    const host = new Child('host', HOST_MAIN, hostEnv, ['ignore', hostLog, hostLog], nodeArgs);
    fs.closeSync(hostLog);
    const http = new HostHttp(`http://127.0.0.1:${port}`, adminKey);
    let runner: Child | undefined;
    try {
      await waitFor(
        'the host to be ready',
        30_000,
        async () => ((await http.json('GET', '/health/ready')).status === 200 ? true : undefined),
        [host],
      );
      const plugin = (await http.expect(201, 'POST', '/v1/admin/plugins', { author: 'demo', name: 'echo' })) as {
        token: string;
      };

      const runnerLog = fs.openSync(path.join(dataDir, 'runner.log'), 'a');
      runner = new Child(
        'demo-runner',
        RUNNER_MAIN,
        {
          ...process.env,
          RUNNERHOST_GRPC_URL: `127.0.0.1:${grpcPort}`,
          RUNNERHOST_PLUGIN_TOKEN: plugin.token,
          RUNNERHOST_PROTO_DIR: path.join(DIST, 'proto'),
        },
        ['ignore', runnerLog, runnerLog],
      );
      fs.closeSync(runnerLog);
      await waitFor(
        `${RUNNER_ID} to connect`,
        15_000,
        async () => {
          const runners = (await http.expect(200, 'GET', '/v1/admin/runners')) as {
            runner_id: string;
            state: string;
          }[];
          return runners.some((r) => r.runner_id === RUNNER_ID && r.state === 'connected') ? true : undefined;
        },
        [host, runner],
      );
      await http.expect(201, 'POST', '/v1/admin/agents', {
        agent_id: agentId,
        runner_id: RUNNER_ID,
        runner_config: runnerConfig,
      });
      return new HostFixture(dataDir, http, host, runner, pg);
    } catch (e) {
      http.close();
      await runner?.stop();
      await host.stop();
      throw new Error(
        `${e instanceof Error ? e.message : String(e)}\n--- host.log (tail) ---\n${tail(path.join(dataDir, 'host.log'))}`,
      );
    }
  }

  /** Runs with the given status (first page only: the bench wants to know whether there are any). */
  async runsWithStatus(agentId: string, status: string): Promise<string[]> {
    const page = (await this.http.expect(200, 'GET', `/v1/runs?agent_id=${agentId}&status=${status}&limit=100`)) as {
      items: { run_id: string }[];
    };
    return page.items.map((r) => r.run_id);
  }

  /** Stops the runner (it closes its stream), then the host. */
  async stop(): Promise<void> {
    this.http.close();
    await this.runner.stop();
    await this.host.stop();
  }

  hostLog(): LogSummary {
    const lines = readLines(path.join(this.dataDir, 'host.log'));
    return { lines: lines.length, problems: lines, connects: 0 };
  }

  runnerLog(): LogSummary {
    const lines = readLines(path.join(this.dataDir, 'runner.log'));
    const problems = lines.filter((l) => !l.startsWith('{"level":"info"'));
    const connects = lines.filter((l) => l.includes('"msg":"connecting"')).length;
    return { lines: lines.length, problems, connects };
  }

  /** Row count of every table of the host's database (after stop()). */
  async tableCounts(): Promise<Record<string, number>> {
    if (this.pg) {
      return this.pg.tableCounts();
    }
    const db = new Database(path.join(this.dataDir, 'runner-host.sqlite'), { readonly: true });
    try {
      const tables = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .all() as {
        name: string;
      }[];
      const counts: Record<string, number> = {};
      for (const { name } of tables) {
        counts[name] = (db.prepare(`SELECT COUNT(*) AS n FROM "${name}"`).get() as { n: number }).n;
      }
      return counts;
    } finally {
      db.close();
    }
  }

  removeDataDir(): void {
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}

function readLines(file: string): string[] {
  try {
    return fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '');
  } catch {
    return [];
  }
}

function tail(file: string, n = 20): string {
  return readLines(file).slice(-n).join('\n');
}
