import * as os from 'node:os';
import { performance } from 'node:perf_hooks';
import { bidiFloor, sqliteFloor, type FloorResult } from './floors';
import { runMain } from '../common/cli';
import { writeJson } from '../common/json-out';
import { dispatchJson } from './json-out';
import { parseOptions, USAGE, type DispatchOptions } from './options';
import { INPUT_TEXT, runDatabase, WARMUP_CONCURRENCY, type DatabaseRun } from './phase';
import { postgresFloor } from './postgres';
import { benchTimeLine, groupLines, machineLine } from '../common/report';
import {
  afterLoadLines,
  DB_LABEL,
  floorsTable,
  levelsTable,
  machineTable,
  pgServerTable,
  ratiosTable,
  RUNNER_LABEL,
  runnerComparisonTable,
} from './report';
import { soakLines, streamingTable } from './report-streaming';
import { fmtInt } from '../common/stats';
import { sideBySideTable, targetChecks, targetsTable } from './targets';

/*
 * Dispatch benchmark of the Runner Host: POST /v1/events → run on the demo runner over gRPC →
 * results on the run's SSE stream, closed loop at concurrency 1, 16 and 64, and the streaming
 * levels (deltas/s ingested and fanned out to 1 and 10 SSE readers), on SQLite and on PostgreSQL,
 * next to the floors measured in the same run (bare grpc-js bidi round trip, bare SQLite and
 * PostgreSQL inserts). Options: see options.ts or --help.
 *
 *   npm run bench:dispatch -- [--quick] [--db sqlite,postgres] [--json FILE] [--soak SECONDS]
 *
 * Exits 1 if any run fails, gets stuck, or the stream misbehaves; 2 on a bad option.
 */

const progress = (msg: string): void => {
  process.stderr.write(`bench: ${msg}\n`);
};

interface Floors {
  bidi: FloorResult;
  sqlite: FloorResult;
  pg: FloorResult | null;
}

async function measureFloors(opts: DispatchOptions): Promise<Floors> {
  progress('floors: grpc-js bidi ping-pong');
  const bidi = await bidiFloor(opts.floorWarmupMs, opts.floorMs);
  progress('floors: better-sqlite3 insert');
  const sqlite = sqliteFloor(opts.floorWarmupMs, opts.floorMs);
  let pg: FloorResult | null = null;
  if (opts.databases.includes('postgres')) {
    progress('floors: PostgreSQL insert');
    pg = await postgresFloor(opts.pgAdminUrl, opts.floorWarmupMs, opts.floorMs);
  }
  return { bidi, sqlite, pg };
}

function report(opts: DispatchOptions, floors: Floors, runs: DatabaseRun[], started: number, load0: number): string {
  const levels = runs.flatMap((r) => r.levels);
  const sizes = [...new Set(opts.streamingCases.map((c) => `${c.runs} × ${fmtInt(c.deltasPerRun)}`))].join(' and ');
  const readers = [...new Set(opts.streamingCases.map((c) => c.readers))].join(' and ');
  const streaming = `${sizes} deltas with ${readers} SSE readers per run`;
  const out = [
    '## Runner Host dispatch benchmark',
    '',
    `machine: ${machineLine()}; bench client, host and runner share these cores`,
    `setup: host (${runs.map((r) => DB_LABEL[r.database]).join(' and ')}${opts.databases.includes('sqlite') ? '; SQLite WAL + synchronous=NORMAL' : ''}${opts.databases.includes('postgres') ? `; PostgreSQL a fresh database on ${new URL(opts.pgAdminUrl).host}` : ''}; LOG_LEVEL=warn; METRICS=${opts.metrics})`,
    `       and ${opts.runners.map((r) => RUNNER_LABEL[r]).join(', then ')} (mode echo, input "${INPUT_TEXT}") as child processes; closed loop, warm-up at c${WARMUP_CONCURRENCY} for ${opts.warmupMs / 1000} s and ${opts.warmupRuns} runs at least,`,
    `       then ${opts.levelMs / 1000} s per level; times from POST /v1/events sent${opts.streaming ? `; streaming: ${streaming} (echo, chunk_delay_ms 0)` : ''}`,
    '',
    '### Floors (measured in this run)',
    '',
    floorsTable(floors.bidi, floors.sqlite, floors.pg),
  ];
  if (levels.length > 0 && opts.runners.length > 1) {
    for (const runner of opts.runners) {
      const own = runs.filter((r) => r.runner === runner).flatMap((r) => r.levels);
      out.push('', `### Runner Host with the ${RUNNER_LABEL[runner]}: POST /v1/events → SSE`, '', levelsTable(own));
    }
    out.push('', '### Runner beside runner (this run)', '', runnerComparisonTable(runs, opts.runners));
  } else if (levels.length > 0) {
    out.push('', '### Runner Host: POST /v1/events → results on the run’s SSE stream', '', levelsTable(levels));
    if (runs.length > 1) {
      out.push('', '### PostgreSQL mode beside SQLite mode', '', sideBySideTable(runs));
    }
    out.push('', '### Ratios to the floors', '', ratiosTable(levels, floors.bidi, floors.sqlite));
  }
  if (levels.length > 0 && opts.runners.length > 1) {
    out.push('', '### Ratios to the floors', '', ratiosTable(levels, floors.bidi, floors.sqlite));
  }
  if (levels.length > 0) {
    out.push(
      '',
      '### The machine per run: the database server’s CPU, the disks, the neighbours',
      '',
      machineTable(levels),
    );
  }
  const server = pgServerTable(levels);
  if (server) {
    out.push(
      '',
      '### PostgreSQL server per run: commits and WAL flushes (SQLite, WAL + synchronous=NORMAL, flushes none per commit)',
      '',
      server,
    );
  }
  if (runs.some((r) => r.streaming.length > 0)) {
    out.push(
      '',
      '### Streaming: message.delta results ingested and fanned out to SSE readers',
      '',
      streamingTable(runs),
    );
  }
  const soak = soakLines(runs);
  if (soak.length > 0) {
    out.push('', '### Soak (host RSS every 10 s)', '', ...soak.map((l) => `- ${l}`));
  }
  out.push('', '### Targets (issues 7 and 16), as same-run ratios', '', targetsTable(runs, floors.bidi));
  out.push('', '### After the load', '');
  for (const r of runs) {
    out.push(...afterLoadLines(r.levels, r.after).map((l) => `- ${DB_LABEL[r.database]}: ${l}`));
  }
  out.push('', benchTimeLine(started, load0));
  return out.join('\n') + '\n';
}

async function main(): Promise<number> {
  const parsed = parseOptions(process.argv.slice(2));
  if (parsed === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const opts = parsed;
  const started = performance.now();
  const load0 = os.loadavg()[0];
  const floors = await measureFloors(opts);
  const runs: DatabaseRun[] = [];
  for (const kind of opts.databases) {
    for (const runner of opts.runners) {
      runs.push(await runDatabase(kind, { ...opts, runner }));
    }
  }
  process.stdout.write(report(opts, floors, runs, started, load0));

  if (opts.json) {
    const meta = {
      options: { ...opts, pgAdminUrl: undefined },
      total_s: Math.round(performance.now() - started) / 1000,
    };
    writeJson(opts.json, dispatchJson(runs, floors, meta, targetChecks(runs, floors.bidi)));
  }

  const problems = runs.flatMap((r) => r.problems);
  for (const r of runs) {
    if (r.problems.length > 0 || r.hostLines.length > 0) {
      const lines = groupLines([...r.problems, ...r.hostLines]);
      process.stdout.write(`\n### Problems (${DB_LABEL[r.database]})\n\n${lines.slice(0, 40).join('\n')}\n`);
      process.stdout.write(`\nhost and runner logs kept in ${r.dataDir}\n`);
    } else {
      r.removeDataDir();
    }
  }
  return problems.length > 0 ? 1 : 0;
}

runMain(main, USAGE);
