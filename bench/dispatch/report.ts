import * as os from 'node:os';
import type { DiskCounters } from '../common/machine';
import type { FloorResult } from './floors';
import type { LevelResult } from './load';
import type { RunnerKind } from './options';
import type { PgServerLevel } from './pg-server';
import { fmtDuration, fmtInt, fmtNum, markdownTable, summarize } from '../common/stats';

/** One closed-loop level with the CPU time the three processes spent on it (ms). */
export interface MeasuredLevel extends LevelResult {
  database: 'sqlite' | 'postgres';
  /**
   * CPU ms in the level: the host, the runner, the bench client, the database server's processes
   * (PostgreSQL on this machine; NaN on SQLite or a remote server) and every other process (the
   * neighbours: the machine's busy time minus all of those).
   */
  cpu: { host: number; runner: number; client: number; dbServer: number; other: number };
  /** The machine's disks in the level (bench/common/machine.ts); null if unread. */
  disk: DiskCounters | null;
  /** Host RSS at the end of the level. */
  hostRssMiB: number;
  /** PostgreSQL: the server's commits and WAL flushes per run (pg-server.ts); null on SQLite or if unread. */
  pgServer: PgServerLevel | null;
}

export interface AfterLoad {
  submitted: number;
  leftOpen: string[];
  /** Host RSS after the warm-up. */
  rssBefore: number;
  /** The warm-up's runs and seconds (it lasts until both its minimum runs and seconds are done). */
  warmup: { runs: number; seconds: number };
  hostLog: { lines: number; problems: string[] };
  runnerLog: { problems: string[]; connects: number };
  rowsPerRun: Record<string, number>;
}

export const DB_LABEL = { sqlite: 'SQLite', postgres: 'PostgreSQL' } as const;

export function floorsTable(bidi: FloorResult, sqlite: FloorResult, pg: FloorResult | null): string {
  const cpu = (f: FloorResult): string =>
    Number.isNaN(f.cpuServerMs)
      ? fmtDuration(f.cpuClientMs)
      : `${fmtDuration(f.cpuClientMs)} / ${fmtDuration(f.cpuServerMs)}`;
  const row = (label: string, f: FloorResult, unit: string): string[] => [
    label,
    fmtInt(f.latency.count),
    fmtDuration(f.latency.p50),
    fmtDuration(f.latency.p99),
    `${fmtInt(f.rate)} ${unit}`,
    cpu(f),
  ];
  return markdownTable(
    ['floor', 'ops', 'p50', 'p99', 'throughput', 'CPU/op (client / server)'],
    [
      row('grpc-js bidi ping-pong, one open stream, 2 processes', bidi, 'round trips/s'),
      row('better-sqlite3 1-row insert per txn, WAL, synchronous=NORMAL', sqlite, 'inserts/s'),
      ...(pg ? [row('PostgreSQL 1-row autocommit insert, one pg connection', pg, 'inserts/s')] : []),
    ],
  );
}

export const runsPerSecond = (l: LevelResult): number => (l.timings.length * 1000) / l.elapsedMs;

/**
 * The share of all the machine's cores (0–1) that processes other than the host, the runner, the
 * bench client and a local PostgreSQL server used during a level: a neighbour's load, told apart
 * from ours.
 */
export const otherProcessesShare = (l: MeasuredLevel): number => l.cpu.other / l.elapsedMs / os.cpus().length;

/** A share of the cores as a whole percentage. */
export const fmtShare = (share: number): string => (Number.isFinite(share) ? `${(100 * share).toFixed(0)} %` : '—');

/**
 * Host CPU per run in units of the same run's bidi floor's server CPU per round trip (what one
 * grpc-js round trip costs the serving process on this machine today): comparable between days
 * whose machines run faster or slower, as the absolute figure is not. NaN without a measured floor CPU.
 */
export const hostCpuInBidiRoundTrips = (l: MeasuredLevel, bidi: FloorResult): number =>
  l.cpu.host / Math.max(1, l.timings.length) / bidi.cpuServerMs;

export function levelsTable(levels: MeasuredLevel[]): string {
  const cores = os.cpus().length;
  return markdownTable(
    [
      'database',
      'concurrency',
      'runs',
      'failed',
      'runs/s',
      '202 p50',
      'first result p50 / p99',
      'terminal p50 / p99',
      'CPU/run host / runner / client',
      `CPU use of ${cores} cores: ours / other processes`,
    ],
    levels.map((l) => {
      const admitted = summarize(l.timings.map((t) => t.admittedMs));
      const first = summarize(l.timings.map((t) => t.firstMs));
      const terminal = summarize(l.timings.map((t) => t.terminalMs));
      const n = Math.max(1, l.timings.length);
      const pct = (ms: number): string => fmtShare(ms / l.elapsedMs / cores);
      return [
        DB_LABEL[l.database],
        String(l.concurrency),
        fmtInt(l.timings.length),
        fmtInt(l.failures.length),
        fmtNum(runsPerSecond(l)),
        fmtDuration(admitted.p50),
        `${fmtDuration(first.p50)} / ${fmtDuration(first.p99)}`,
        `${fmtDuration(terminal.p50)} / ${fmtDuration(terminal.p99)}`,
        `${fmtDuration(l.cpu.host / n)} / ${fmtDuration(l.cpu.runner / n)} / ${fmtDuration(l.cpu.client / n)}`,
        `${pct(l.cpu.host + l.cpu.runner + l.cpu.client)} / ${fmtShare(otherProcessesShare(l))}`,
      ];
    }),
  );
}

/**
 * PostgreSQL levels: the server's commits (bench database) and WAL flushes (whole server) per run
 * (pg-server.ts). SQLite (WAL, synchronous=NORMAL) flushes nothing per commit.
 */
export function pgServerTable(levels: MeasuredLevel[]): string | null {
  const rows = levels.flatMap((l) => {
    const s = l.pgServer;
    if (!s) {
      return [];
    }
    return [
      [
        String(l.concurrency),
        `${fmtInt(s.runs)} in ${fmtNum(s.windowMs / 1000)} s`,
        fmtNum(s.commitsPerRun),
        fmtNum(s.walSyncsPerRun),
        s.walSyncMs === null ? 'track_wal_io_timing off' : fmtDuration(s.walSyncMs),
        fmtInt(s.otherCommits),
      ],
    ];
  });
  if (rows.length === 0) {
    return null;
  }
  return markdownTable(
    [
      'concurrency',
      'runs in the window',
      'commits/run (bench database)',
      'WAL flushes/run (server)',
      'time per flush',
      'other databases’ commits',
    ],
    rows,
  );
}

/**
 * Per level, what the machine did beside the host: the database server's CPU per run (a local
 * PostgreSQL's processes), the disks' flushes per run and time per flush (a PostgreSQL commit waits
 * for its WAL flush; SQLite's are its checkpoints'), MiB written per run, and the neighbours' share.
 */
export function machineTable(levels: MeasuredLevel[]): string {
  return markdownTable(
    [
      'database',
      'concurrency',
      'database server CPU/run',
      'disk flushes/run',
      'time per disk flush',
      'disk written/run',
      'other processes (neighbours)',
    ],
    levels.map((l) => {
      const n = Math.max(1, l.timings.length);
      const d = l.disk;
      const flushes = d && Number.isFinite(d.flushes) ? d.flushes : null;
      return [
        DB_LABEL[l.database],
        String(l.concurrency),
        Number.isFinite(l.cpu.dbServer) ? fmtDuration(l.cpu.dbServer / n) : '—',
        flushes === null ? '—' : fmtNum(flushes / n),
        flushes ? fmtDuration(d!.flushMs / flushes) : '—',
        d ? `${fmtNum((d.writtenMiB * 1024) / n)} KiB` : '—',
        fmtShare(otherProcessesShare(l)),
      ];
    }),
  );
}

export function ratiosTable(levels: MeasuredLevel[], bidi: FloorResult, sqlite: FloorResult): string {
  const rows: string[][] = [];
  for (const c1 of levels.filter((l) => l.concurrency === 1)) {
    const db = DB_LABEL[c1.database];
    const first = summarize(c1.timings.map((t) => t.firstMs)).p50;
    const terminal = summarize(c1.timings.map((t) => t.terminalMs)).p50;
    rows.push(
      [
        `${db}: dispatch latency: POST → first result p50 (c1)`,
        fmtDuration(first),
        `${fmtNum(first / bidi.latency.p50)} ×`,
        `${fmtNum(first / sqlite.latency.p50)} ×`,
      ],
      [
        `${db}: run latency: POST → terminal result p50 (c1)`,
        fmtDuration(terminal),
        `${fmtNum(terminal / bidi.latency.p50)} ×`,
        `${fmtNum(terminal / sqlite.latency.p50)} ×`,
      ],
    );
  }
  for (const l of levels) {
    const rate = runsPerSecond(l);
    rows.push([
      `${DB_LABEL[l.database]}: throughput c${l.concurrency}: floor rate ÷ runs/s`,
      `${fmtNum(rate)} runs/s`,
      `${fmtNum(bidi.rate / rate)} ×`,
      `${fmtNum(sqlite.rate / rate)} ×`,
    ]);
  }
  for (const l of levels) {
    const host = l.cpu.host / Math.max(1, l.timings.length);
    rows.push([
      `${DB_LABEL[l.database]}: host CPU per run c${l.concurrency} ÷ floor CPU per op`,
      fmtDuration(host),
      `${fmtNum(hostCpuInBidiRoundTrips(l, bidi))} ×`,
      `${fmtNum(host / sqlite.cpuClientMs)} ×`,
    ]);
  }
  return markdownTable(['figure', 'ours', 'in bidi round trips', 'in SQLite inserts'], rows);
}

export function afterLoadLines(levels: MeasuredLevel[], after: AfterLoad): string[] {
  const completed = levels.reduce((n, l) => n + l.timings.length, 0);
  const failed = levels.reduce((n, l) => n + l.failures.length, 0);
  const rows = Object.entries(after.rowsPerRun)
    .map(([table, perRun]) => `${table} ${fmtNum(perRun)}`)
    .join(', ');
  return [
    `warm-up: ${fmtInt(after.warmup.runs)} runs in ${after.warmup.seconds.toFixed(1)} s at c16`,
    `runs: ${fmtInt(after.submitted)} submitted (warm-up and soak included, streaming runs not), ${fmtInt(completed)} measured and completed on SSE, ${fmtInt(failed)} failed; still queued/running afterwards: ${after.leftOpen.length}`,
    `host RSS: ${[`${after.rssBefore.toFixed(0)} MiB after warm-up`, ...levels.map((l) => `${l.hostRssMiB.toFixed(0)} MiB after c${l.concurrency}`)].join(', ')}`,
    `host log lines (LOG_LEVEL=warn): ${after.hostLog.lines}; runner connects: ${after.runnerLog.connects} (1 = never reconnected); runner warn/error lines: ${after.runnerLog.problems.length}`,
    `database rows per submitted run (before the streaming runs): ${rows}`,
  ];
}

export const RUNNER_LABEL: Record<RunnerKind, string> = {
  raw: 'raw grpc-js floor runner',
  sdk: 'demo runner (libs/runner-sdk)',
};

/**
 * `--runner raw,sdk`: runs/s and the runner's CPU per run of each runner at each database and
 * concurrency, and each runner's runs/s as a share of the first one's (issue 18: within 10 %).
 */
export function runnerComparisonTable(
  runs: { database: MeasuredLevel['database']; runner: RunnerKind; levels: MeasuredLevel[] }[],
  runners: RunnerKind[],
): string {
  const rows: string[][] = [];
  const keys = [...new Set(runs.flatMap((r) => r.levels.map((l) => `${r.database}|${l.concurrency}`)))];
  for (const key of keys) {
    const [database, c] = key.split('|');
    const at = runners.map((runner) =>
      runs.find((r) => r.runner === runner && r.database === database)?.levels.find((l) => String(l.concurrency) === c),
    );
    const base = at[0] ? runsPerSecond(at[0]) : NaN;
    rows.push([
      DB_LABEL[database as MeasuredLevel['database']],
      c,
      ...at.map((l) => (l ? fmtNum(runsPerSecond(l)) : '–')),
      ...at.slice(1).map((l) => (l && base > 0 ? `${Math.round((100 * runsPerSecond(l)) / base)} %` : '–')),
      ...at.map((l) => (l && l.timings.length > 0 ? fmtDuration(l.cpu.runner / l.timings.length) : '–')),
    ]);
  }
  return markdownTable(
    [
      'database',
      'concurrency',
      ...runners.map((r) => `${r} runs/s`),
      ...runners.slice(1).map((r) => `${r} / ${runners[0]}`),
      ...runners.map((r) => `${r} CPU/run`),
    ],
    rows,
  );
}
