import { parseArgs } from 'node:util';
import { UsageError } from '../common/cli';
import { STREAMING_CASES, type StreamingCase } from './streaming';

/*
 * Command-line options of the dispatch bench. Defaults give the full run (both databases, c1 /
 * c16 / c64, the streaming levels; about 3–4 minutes on a 2-core machine); `--quick` shortens
 * every timed phase, not the sizes the targets are stated for.
 */

export type DatabaseKind = 'sqlite' | 'postgres';

export interface DispatchOptions {
  databases: DatabaseKind[];
  levels: number[];
  levelMs: number;
  warmupMs: number;
  /** Runs the warm-up serves at least (it lasts until both these and `warmupMs` are done). */
  warmupRuns: number;
  floorMs: number;
  floorWarmupMs: number;
  streaming: boolean;
  /** The streaming cases measured (default the four). */
  streamingCases: StreamingCase[];
  /** c64 soak length in seconds per database; 0 = no soak. */
  soakSeconds: number;
  json: string | null;
  pgAdminUrl: string;
  /** The runner process: the raw grpc-js floor runner (raw-runner/) or the demo runner on libs/runner-sdk. */
  runner: RunnerKind;
  /** `--runner raw,sdk`: every runner in turn on each database, compared side by side. */
  runners: RunnerKind[];
  /** The host's METRICS setting: the overhead of the Prometheus metrics is on minus off. */
  metrics: 'on' | 'off';
}

export type RunnerKind = 'raw' | 'sdk';

export const USAGE = `usage: node dist/bench/dispatch/main.js [options]
  --db LIST           databases, comma-separated: sqlite,postgres (default both)
  --levels LIST       closed-loop concurrencies, comma-separated (default 1,16,64; "none" skips them)
  --level-seconds N   seconds per closed-loop level (default 9; 3 with --quick)
  --no-streaming      skip the streaming levels (1 run × 2,000 deltas, 100 runs × 200 deltas)
  --streaming-cases L streaming cases RUNSxDELTASxREADERS, comma-separated (default
                      1x2000x1,1x2000x10,100x200x1,100x200x10)
  --quick             shorter warm-up, floors and levels (about 1.5 minutes for both databases)
  --warmup-seconds N  seconds the c16 warm-up before the levels lasts at least (default 3; 1.5 with --quick)
  --warmup-runs N     runs the warm-up serves at least (default 4000; 500 with --quick; 0: seconds only):
                      a fresh host's CPU per run falls over its first thousands of runs (the JIT, the
                      runner's too), so a warm-up by seconds alone leaves the slower database's c1
                      level measured on a colder host (at most 60 s)
  --soak SECONDS      after the levels, c64 for SECONDS on each database, host RSS every 10 s
  --metrics on|off    the host's Prometheus metrics (METRICS; default on): compare runs/s on vs off
  --json FILE         also write the figures and the same-run floors as JSON to FILE
  --runner LIST       raw (the floor runner on raw grpc-js, raw-runner/; default), sdk (the demo runner,
                      apps/demo-runner, on libs/runner-sdk), or both (raw,sdk: each in turn on each
                      database, runs/s side by side)
  --pg-url URL        PostgreSQL admin URL (default $BENCH_PG_URL or postgres://postgres@127.0.0.1:5432/postgres)
  -h, --help          this text`;

function positiveInt(name: string, text: string, min: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) {
    throw new UsageError(`${name}: "${text}" is not an integer ≥ ${min}`);
  }
  return n;
}

function nonNegativeInt(name: string, text: string): number {
  return positiveInt(name, text, 0);
}

function parseDatabases(text: string): DatabaseKind[] {
  const names = text.split(',').map((s) => s.trim().toLowerCase());
  const out: DatabaseKind[] = [];
  for (const name of names) {
    const kind = name === 'pg' || name === 'postgresql' ? 'postgres' : name;
    if (kind !== 'sqlite' && kind !== 'postgres') {
      throw new UsageError(`--db: "${name}" is not one of sqlite, postgres`);
    }
    if (!out.includes(kind)) {
      out.push(kind);
    }
  }
  return out;
}

function parseStreamingCases(text: string): StreamingCase[] {
  return text.split(',').map((s) => {
    const m = /^(\d+)x(\d+)x(\d+)$/.exec(s.trim());
    if (!m) {
      throw new UsageError(`--streaming-cases: "${s.trim()}" is not RUNSxDELTASxREADERS (e.g. 100x200x10)`);
    }
    const [runs, deltasPerRun, readers] = [m[1], m[2], m[3]].map((n) => positiveInt('--streaming-cases', n, 1));
    return { runs, deltasPerRun, readers };
  });
}

function parseLevels(text: string): number[] {
  if (text.trim() === 'none') {
    return [];
  }
  return text.split(',').map((s) => positiveInt('--levels', s.trim(), 1));
}

/** Parses argv (without node and the script); throws UsageError with a message naming the option. */
export function parseOptions(argv: string[]): DispatchOptions | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        db: { type: 'string' },
        levels: { type: 'string' },
        'level-seconds': { type: 'string' },
        'no-streaming': { type: 'boolean' },
        'streaming-cases': { type: 'string' },
        quick: { type: 'boolean' },
        'warmup-seconds': { type: 'string' },
        'warmup-runs': { type: 'string' },
        soak: { type: 'string' },
        json: { type: 'string' },
        metrics: { type: 'string' },
        'pg-url': { type: 'string' },
        runner: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  const v = parsed.values;
  if (v.help) {
    return 'help';
  }
  const quick = v.quick === true;
  const runners = (v.runner ?? 'raw').split(',').map((r) => r.trim());
  for (const runner of runners) {
    if (runner !== 'raw' && runner !== 'sdk') {
      throw new UsageError(`--runner: "${runner}" is not one of raw, sdk`);
    }
  }
  if (new Set(runners).size !== runners.length) {
    throw new UsageError(`--runner: "${v.runner}" names a runner twice`);
  }
  const runner = runners[0] as RunnerKind;
  const metrics = v.metrics ?? 'on';
  if (metrics !== 'on' && metrics !== 'off') {
    throw new UsageError(`--metrics: "${metrics}" is not one of on, off`);
  }
  return {
    databases: parseDatabases(v.db ?? 'sqlite,postgres'),
    levels: parseLevels(v.levels ?? '1,16,64'),
    levelMs: 1000 * (v['level-seconds'] ? positiveInt('--level-seconds', v['level-seconds'], 1) : quick ? 3 : 9),
    warmupMs: 1000 * (v['warmup-seconds'] ? positiveInt('--warmup-seconds', v['warmup-seconds'], 1) : quick ? 1.5 : 3),
    warmupRuns: v['warmup-runs'] ? nonNegativeInt('--warmup-runs', v['warmup-runs']) : quick ? 500 : 4_000,
    floorMs: quick ? 1_500 : 3_000,
    floorWarmupMs: quick ? 300 : 500,
    streaming: v['no-streaming'] !== true,
    streamingCases: v['streaming-cases'] ? parseStreamingCases(v['streaming-cases']) : STREAMING_CASES,
    soakSeconds: v.soak ? positiveInt('--soak', v.soak, 10) : 0,
    json: v.json ?? null,
    metrics,
    pgAdminUrl: v['pg-url'] ?? process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    runner,
    runners: runners as RunnerKind[],
  };
}
