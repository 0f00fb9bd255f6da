import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { BuiltHost, DIST, HOST_MAIN, hostNodeArgs, readLines, requireBuilt, waitFor } from '../common/host-process';
import type { HostHttp } from '../common/http';
import { Child } from '../common/proc';
import type { RunnerKind } from './options';
import type { BenchDatabase } from './postgres';

/*
 * The system under test: the built host (SQLite in a fresh temp DATA_DIR, or PostgreSQL when a
 * BenchDatabase is given; free ports, LOG_LEVEL=warn) and the demo runner, each a child process,
 * plus the admin setup (plugin, token, runner connected, agent). Their stdout/stderr go to files in
 * DATA_DIR, read back afterwards.
 */

/** `raw`: the floor runner on raw grpc-js (raw-runner/); `sdk`: the demo runner on libs/runner-sdk. */
const RUNNER_MAIN: Record<RunnerKind, string> = {
  raw: path.join(DIST, 'bench', 'dispatch', 'raw-runner', 'main.js'),
  sdk: path.join(DIST, 'apps', 'demo-runner', 'src', 'main.js'),
};
export const RUNNER_ID = 'plugin:demo/echo/default';

/** BENCH_RUNNER_NODE_ARGS: extra node flags for the runner only, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof". */
export function runnerNodeArgs(env: NodeJS.ProcessEnv = process.env): string[] {
  return (env.BENCH_RUNNER_NODE_ARGS ?? '').split(/\s+/).filter((a) => a !== '');
}

/** Starts a runner process connecting to `grpcAddress`; its stdout and stderr go to `output`. */
export function startRunner(kind: RunnerKind, grpcAddress: string, token: string, output: number | 'ignore'): Child {
  requireBuilt(RUNNER_MAIN[kind]);
  return new Child(
    kind === 'sdk' ? 'demo-runner' : 'raw-runner',
    RUNNER_MAIN[kind],
    {
      ...process.env,
      RUNNERHOST_GRPC_URL: grpcAddress,
      RUNNERHOST_PLUGIN_TOKEN: token,
      RUNNERHOST_PROTO_DIR: path.join(DIST, 'proto'),
    },
    ['ignore', output, output],
    runnerNodeArgs(),
  );
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
    runnerKind: RunnerKind = 'raw',
    env: Record<string, string> = {},
  ): Promise<HostFixture> {
    requireBuilt(HOST_MAIN, RUNNER_MAIN[runnerKind]);
    const built = await BuiltHost.start({
      tmpPrefix: 'runner-host-bench-',
      // The streaming level follows 100 runs with 10 readers each under one API key: 1,000 streams,
      // above the per-key default (256) that bounds what one key can make the host hold.
      env: { SSE_MAX_STREAMS_PER_KEY: '2048', ...env },
      databaseUrl: pg?.url,
      nodeArgs: hostNodeArgs(),
    });
    const { dataDir, http, child: host } = built;
    let runner: Child | undefined;
    try {
      const plugin = (await http.expect(201, 'POST', '/v1/admin/plugins', { author: 'demo', name: 'echo' })) as {
        token: string;
      };

      const runnerLog = fs.openSync(path.join(dataDir, 'runner.log'), 'a');
      runner = startRunner(runnerKind, built.grpcAddress, plugin.token, runnerLog);
      fs.closeSync(runnerLog);
      await waitFor(
        `${RUNNER_ID} to connect`,
        15_000,
        async () => {
          const runners = (await http.expect(200, 'GET', '/v1/admin/runners')) as {
            runner_id: string;
            state: string;
          }[];
          return runners.some((r) => r.runner_id === RUNNER_ID && r.state === 'connected');
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
      await runner?.stop();
      await built.stop();
      throw new Error(`${e instanceof Error ? e.message : String(e)}\n--- host.log (tail) ---\n${built.logTail()}`);
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
