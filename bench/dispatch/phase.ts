import { setTimeout as sleep } from 'node:timers/promises';
import { HostFixture } from './host-fixture';
import { closedLoop, RunDriver, warmUp } from './load';
import type { DatabaseKind, DispatchOptions, RunnerKind } from './options';
import { BenchDatabase } from './postgres';
import { pgServerWindow } from './pg-server';
import { commandCpuMs, diskCounters, diskDelta } from '../common/machine';
import { cpuMs, machineBusyMs, rssMiB, selfCpuMs } from '../common/proc';
import type { AfterLoad, MeasuredLevel } from './report';
import { soak, type SoakResult } from './soak';
import { streamingLevel, type StreamingCase, type StreamingResult } from './streaming';

/*
 * Everything the bench measures against one database: a fresh host + demo runner, warm-up, the
 * closed-loop levels, the optional soak, the database rows per run, then the streaming levels.
 */

export const AGENT_ID = 'bench';
const STREAM_AGENT_ID = 'bench-stream';
export const INPUT_TEXT = 'hello bench world';
export const WARMUP_CONCURRENCY = 16;
/** The warm-up by runs never lasts longer than this. */
const WARMUP_CAP_MS = 60_000;
const RUN_TIMEOUT_MS = 15_000;
const STREAM_TIMEOUT_MS = 120_000;

/** The command name of a local PostgreSQL server's processes (`/proc/PID/comm`). */
const PG_SERVER_COMMAND = 'postgres';

const STREAMING_WARMUP: StreamingCase = { runs: 10, deltasPerRun: 200, readers: 2 };

export interface DatabaseRun {
  database: DatabaseKind;
  /** The runner process measured. */
  runner: RunnerKind;
  levels: MeasuredLevel[];
  streaming: StreamingResult[];
  soak: SoakResult | null;
  after: AfterLoad;
  /** Failures, runs left open, runner problems: any of these makes the bench exit 1. */
  problems: string[];
  /** Host log lines (LOG_LEVEL=warn: every line is worth a look). */
  hostLines: string[];
  /** Kept when there was a problem or a host log line. */
  dataDir: string;
  removeDataDir: () => void;
}

const progress = (msg: string): void => {
  process.stderr.write(`bench: ${msg}\n`);
};

export async function runDatabase(kind: DatabaseKind, opts: DispatchOptions): Promise<DatabaseRun> {
  const pg = kind === 'postgres' ? await BenchDatabase.create(opts.pgAdminUrl) : null;
  try {
    return await measure(kind, opts, pg);
  } finally {
    await pg?.drop().catch((e: unknown) => progress(`dropping ${pg.name}: ${String(e)}`));
  }
}

async function measure(kind: DatabaseKind, opts: DispatchOptions, pg: BenchDatabase | null): Promise<DatabaseRun> {
  progress(
    `${kind}: starting host and ${opts.runner === 'sdk' ? 'SDK demo' : 'raw floor'} runner${pg ? ` (database ${pg.name})` : ''}`,
  );
  const fixture = await HostFixture.start(AGENT_ID, { mode: 'echo' }, pg, opts.runner, { METRICS: opts.metrics });
  const driver = new RunDriver(fixture.http, AGENT_ID, INPUT_TEXT, RUN_TIMEOUT_MS);
  const pids = { host: fixture.host.pid, runner: fixture.runner.pid };
  const levels: MeasuredLevel[] = [];
  const streaming: StreamingResult[] = [];
  const failures: string[] = [];
  let soakResult: SoakResult | null = null;
  let leftOpen: string[] = [];
  let rssBefore = NaN;
  let warmup = { runs: 0, seconds: 0 };
  let counts: Record<string, number> = {};
  let submitted = 0;
  try {
    progress(
      `${kind}: warm-up at concurrency ${WARMUP_CONCURRENCY}, ${opts.warmupMs / 1000} s and ${opts.warmupRuns} runs at least`,
    );
    const warm = await warmUp(driver, WARMUP_CONCURRENCY, opts.warmupMs, opts.warmupRuns, WARMUP_CAP_MS);
    failures.push(...warm.failures);
    warmup = { runs: warm.timings.length, seconds: warm.elapsedMs / 1000 };
    rssBefore = rssMiB(pids.host);
    for (const concurrency of opts.levels) {
      progress(`${kind}: concurrency ${concurrency}, ${opts.levelMs / 1000} s`);
      levels.push(
        await measuredLevel(
          kind,
          driver,
          pids,
          concurrency,
          opts.levelMs,
          pg && { adminUrl: opts.pgAdminUrl, database: pg.name },
        ),
      );
    }
    failures.push(...levels.flatMap((l) => l.failures));
    if (opts.soakSeconds > 0) {
      progress(`${kind}: soak at c64 for ${opts.soakSeconds} s, host RSS every 10 s`);
      soakResult = await soak(driver, pids.host, opts.soakSeconds, (s) =>
        progress(`${kind}: soak t=${s.t_s} s host RSS ${s.rss_mib.toFixed(1)} MiB, ${s.runs} runs since last sample`),
      );
      failures.push(...soakResult.failures);
    }
    await sleep(200);
    leftOpen = await openRuns(fixture, AGENT_ID);
    // Rows per run of the short echo runs, before the streaming runs add thousands of results each.
    submitted = driver.submitted;
    counts = await fixture.tableCounts();
    if (opts.streaming) {
      await fixture.http.expect(201, 'POST', '/v1/admin/agents', {
        agent_id: STREAM_AGENT_ID,
        runner_id: 'plugin:demo/echo/default',
        runner_config: { mode: 'echo', chunk_delay_ms: 0 },
      });
      progress(`${kind}: streaming warm-up`);
      const warm = await streamingLevel(fixture.http, STREAM_AGENT_ID, STREAMING_WARMUP, pids, STREAM_TIMEOUT_MS);
      failures.push(...warm.failures);
      for (const c of opts.streamingCases) {
        progress(`${kind}: streaming ${c.runs} × ${c.deltasPerRun} deltas, ${c.readers} SSE reader(s) per run`);
        const r = await streamingLevel(fixture.http, STREAM_AGENT_ID, c, pids, STREAM_TIMEOUT_MS);
        streaming.push(r);
        failures.push(...r.failures);
      }
      await sleep(200);
      leftOpen.push(...(await openRuns(fixture, STREAM_AGENT_ID)));
    }
  } catch (e) {
    progress(`${kind}: host and runner logs kept in ${fixture.dataDir}`);
    throw e;
  } finally {
    progress(`${kind}: stopping host and runner`);
    await fixture.stop();
  }

  const runnerLog = fixture.runnerLog();
  const hostLog = fixture.hostLog();
  const rowsPerRun = Object.fromEntries(
    Object.entries(counts)
      .map(([table, n]) => [table, n / Math.max(1, submitted)] as const)
      .filter(([, perRun]) => perRun >= 0.01),
  );
  const after: AfterLoad = { submitted, leftOpen, rssBefore, warmup, hostLog, runnerLog, rowsPerRun };
  const problems = [
    ...failures.map((f) => `${kind}: failed: ${f}`),
    ...leftOpen.map((id) => `${kind}: run ${id} still queued/running after the load`),
    ...runnerLog.problems.map((l) => `${kind}: runner log: ${l}`),
    ...(runnerLog.connects > 1 ? [`${kind}: the runner connected ${runnerLog.connects} times`] : []),
  ];
  return {
    database: kind,
    runner: opts.runner,
    levels,
    streaming,
    soak: soakResult,
    after,
    problems,
    hostLines: hostLog.problems.map((l) => `${kind}: host log: ${l}`),
    dataDir: fixture.dataDir,
    removeDataDir: () => fixture.removeDataDir(),
  };
}

async function measuredLevel(
  database: DatabaseKind,
  driver: RunDriver,
  pids: { host: number; runner: number },
  concurrency: number,
  durationMs: number,
  pg: { adminUrl: string; database: string } | null,
): Promise<MeasuredLevel> {
  // The PostgreSQL server's processes (when local) are not a neighbour: their CPU is given apart
  // from "other processes" (bench/common/machine.ts).
  const serverCpu = (): number => (pg ? commandCpuMs(PG_SERVER_COMMAND) : NaN);
  const cpu0 = {
    host: cpuMs(pids.host),
    runner: cpuMs(pids.runner),
    client: selfCpuMs(),
    machine: machineBusyMs(),
    dbServer: serverCpu(),
  };
  const disk0 = diskCounters();
  let completed = 0;
  const loop = closedLoop(driver, concurrency, durationMs, undefined, () => completed++);
  // The server's commits and WAL flushes per run, read beside the loop (pg-server.ts).
  const server = pg
    ? pgServerWindow(pg.adminUrl, pg.database, durationMs, () => completed, loop, progress)
    : Promise.resolve(null);
  const level = await loop;
  const pgServer = await server;
  const disk = diskDelta(disk0, diskCounters());
  const cpu = {
    host: cpuMs(pids.host) - cpu0.host,
    runner: cpuMs(pids.runner) - cpu0.runner,
    client: selfCpuMs() - cpu0.client,
    dbServer: serverCpu() - cpu0.dbServer,
    other: 0,
  };
  const ours = cpu.host + cpu.runner + cpu.client + (Number.isFinite(cpu.dbServer) ? cpu.dbServer : 0);
  cpu.other = Math.max(0, machineBusyMs() - cpu0.machine - ours);
  return { ...level, database, cpu, disk, hostRssMiB: rssMiB(pids.host), pgServer };
}

async function openRuns(fixture: HostFixture, agentId: string): Promise<string[]> {
  return [...(await fixture.runsWithStatus(agentId, 'queued')), ...(await fixture.runsWithStatus(agentId, 'running'))];
}
