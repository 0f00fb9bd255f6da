import * as os from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { bidiFloor, sqliteFloor } from './floors';
import { HostFixture } from './host-fixture';
import { closedLoop, RunDriver } from './load';
import { cpuMs, machineBusyMs, rssMiB, selfCpuMs } from './proc';
import {
  afterLoadLines,
  floorsTable,
  groupLines,
  levelsTable,
  machineLine,
  ratiosTable,
  type AfterLoad,
  type MeasuredLevel,
} from './report';

/*
 * Dispatch benchmark of the Runner Host: POST /v1/events → run on the demo runner over gRPC →
 * results on the run's SSE stream, closed loop at concurrency 1, 16 and 64, next to the floors
 * measured in the same run (bare grpc-js bidi round trip, bare SQLite insert).
 *
 *   npm run bench:dispatch        (builds, then runs dist/bench/dispatch/main.js; about 1 minute)
 *
 * Exits 1 if any run fails, gets stuck, or the stream misbehaves.
 */

const AGENT_ID = 'bench';
const INPUT_TEXT = 'hello bench world';
const LEVELS = [1, 16, 64];
const LEVEL_MS = 9_000;
const WARMUP = { concurrency: 16, ms: 3_000 };
const RUN_TIMEOUT_MS = 15_000;
const FLOOR_WARMUP_MS = 500;
const FLOOR_MS = 3_000;

const progress = (msg: string): void => {
  process.stderr.write(`bench: ${msg}\n`);
};

async function main(): Promise<number> {
  const started = performance.now();
  const loadBefore = os.loadavg()[0];
  progress('floors: grpc-js bidi ping-pong');
  const bidi = await bidiFloor(FLOOR_WARMUP_MS, FLOOR_MS);
  progress('floors: better-sqlite3 insert');
  const sqlite = sqliteFloor(FLOOR_WARMUP_MS, FLOOR_MS);

  progress('starting host and demo runner');
  const fixture = await HostFixture.start(AGENT_ID, { mode: 'echo' });
  const driver = new RunDriver(fixture.http, AGENT_ID, INPUT_TEXT, RUN_TIMEOUT_MS);
  const levels: MeasuredLevel[] = [];
  let warmupFailures: string[] = [];
  let leftOpen: string[] = [];
  let rssBefore = NaN;
  try {
    progress(`warm-up: ${WARMUP.ms / 1000} s at concurrency ${WARMUP.concurrency}`);
    warmupFailures = (await closedLoop(driver, WARMUP.concurrency, WARMUP.ms)).failures;
    rssBefore = rssMiB(fixture.host.pid);
    for (const concurrency of LEVELS) {
      progress(`concurrency ${concurrency}: ${LEVEL_MS / 1000} s`);
      const cpu0 = {
        host: cpuMs(fixture.host.pid),
        runner: cpuMs(fixture.runner.pid),
        client: selfCpuMs(),
        machine: machineBusyMs(),
      };
      const level = await closedLoop(driver, concurrency, LEVEL_MS);
      const cpu = {
        host: cpuMs(fixture.host.pid) - cpu0.host,
        runner: cpuMs(fixture.runner.pid) - cpu0.runner,
        client: selfCpuMs() - cpu0.client,
        other: 0,
      };
      cpu.other = Math.max(0, machineBusyMs() - cpu0.machine - cpu.host - cpu.runner - cpu.client);
      levels.push({ ...level, cpu, hostRssMiB: rssMiB(fixture.host.pid) });
    }
    await sleep(200);
    leftOpen = [
      ...(await fixture.runsWithStatus(AGENT_ID, 'queued')),
      ...(await fixture.runsWithStatus(AGENT_ID, 'running')),
    ];
  } catch (e) {
    progress(`host and runner logs kept in ${fixture.dataDir}`);
    throw e;
  } finally {
    progress('stopping host and demo runner');
    await fixture.stop();
  }

  const runnerLog = fixture.runnerLog();
  const hostLog = fixture.hostLog();
  const rowsPerRun = Object.fromEntries(
    Object.entries(fixture.tableCounts())
      .map(([table, n]) => [table, n / Math.max(1, driver.submitted)] as const)
      .filter(([, perRun]) => perRun >= 0.01),
  );
  const after: AfterLoad = { submitted: driver.submitted, leftOpen, rssBefore, hostLog, runnerLog, rowsPerRun };
  const failures = [...warmupFailures, ...levels.flatMap((l) => l.failures)];

  const out = [
    '## Runner Host dispatch benchmark',
    '',
    `machine: ${machineLine()}; bench client, host and runner share these cores`,
    `setup: host (SQLite WAL + synchronous=NORMAL, LOG_LEVEL=warn) and demo runner (mode echo, input "${INPUT_TEXT}") as child processes;`,
    `       closed loop, warm-up ${WARMUP.ms / 1000} s at c${WARMUP.concurrency}, then ${LEVEL_MS / 1000} s per level; times from POST /v1/events sent`,
    '',
    '### Floors (measured in this run)',
    '',
    floorsTable(bidi, sqlite),
    '',
    '### Runner Host: POST /v1/events → results on the run’s SSE stream',
    '',
    levelsTable(levels),
    '',
    '### Ratios to the floors',
    '',
    ratiosTable(levels, bidi, sqlite),
    '',
    '### After the load',
    '',
    ...afterLoadLines(levels, after).map((l) => `- ${l}`),
    '',
    `total bench time: ${((performance.now() - started) / 1000).toFixed(1)} s; 1-min load average ${loadBefore.toFixed(2)} at start, ${os.loadavg()[0].toFixed(2)} at end`,
  ];
  process.stdout.write(out.join('\n') + '\n');

  const problems = [
    ...failures.map((f) => `failed: ${f}`),
    ...leftOpen.map((id) => `run ${id} still queued/running after the load`),
    ...runnerLog.problems.map((l) => `runner log: ${l}`),
    ...(runnerLog.connects > 1 ? [`the runner connected ${runnerLog.connects} times`] : []),
  ];
  if (problems.length > 0 || hostLog.lines > 0) {
    const lines = groupLines([...problems, ...hostLog.problems.map((l) => `host log: ${l}`)]);
    process.stdout.write(`\n### Problems\n\n${lines.slice(0, 40).join('\n')}\n`);
    process.stdout.write(`\nhost and runner logs kept in ${fixture.dataDir}\n`);
  } else {
    fixture.removeDataDir();
  }
  return problems.length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`bench: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
