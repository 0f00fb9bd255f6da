import type { FloorResult } from './floors';
import type { StreamingResult } from './streaming';
import type { DatabaseRun } from './phase';
import type { MeasuredLevel } from './report';
import { targetChecks } from './targets';

/*
 * The run path's targets as same-run ratios (issue 16): each check reads the right levels and
 * compares against the goal the issue states, at and beside the boundary.
 */

const bidi: FloorResult = {
  latency: { count: 1000, p50: 0.1, p99: 0.2, mean: 0.1, max: 1 },
  rate: 10_000,
  cpuClientMs: 0.05,
  cpuServerMs: 0.05,
};

/** A level whose runs all took `terminalMs`, `runs` of them in one second, `hostCpuMs` of host CPU in all. */
function level(
  database: 'sqlite' | 'postgres',
  concurrency: number,
  terminalMs: number,
  runs: number,
  hostCpuMs = 0,
): MeasuredLevel {
  return {
    database,
    concurrency,
    timings: Array.from({ length: runs }, () => ({ admittedMs: 0, firstMs: 0, terminalMs, results: 3 })),
    failures: [],
    elapsedMs: 1000,
    cpu: { host: hostCpuMs, runner: 0, client: 0, dbServer: NaN, other: 0 },
    disk: null,
    hostRssMiB: 100,
    pgServer: null,
  };
}

function streaming(readers: number, deltasPerS: number): StreamingResult {
  return {
    runs: 100,
    deltasPerRun: 200,
    readers,
    elapsedMs: 1000,
    deltasReceived: deltasPerS * readers,
    deltasPerS,
    deliveriesPerS: deltasPerS * readers,
    terminal: { count: 100, p50: 1, p99: 1, mean: 1, max: 1 },
    cpu: { host: 0, runner: 0, client: 0 },
    failures: [],
  };
}

function run(database: 'sqlite' | 'postgres', levels: MeasuredLevel[], stream: StreamingResult[] = []): DatabaseRun {
  return {
    database,
    runner: 'sdk',
    levels,
    streaming: stream,
    soak: null,
    after: {
      submitted: 0,
      leftOpen: [],
      rssBefore: 0,
      warmup: { runs: 0, seconds: 0 },
      hostLog: { lines: 0, problems: [] },
      runnerLog: { problems: [], connects: 1 },
      rowsPerRun: {},
    },
    problems: [],
    hostLines: [],
    dataDir: '',
    removeDataDir: () => undefined,
  };
}

const find = (runs: DatabaseRun[], target: string, database = 'SQLite') => {
  const t = targetChecks(runs, bidi).find((x) => x.target === target && x.database === database);
  if (!t) {
    throw new Error(`no target "${target}" for ${database}`);
  }
  return t;
};

describe('targetChecks (issue 16)', () => {
  it('c1 p50 in bidi round trips: ≤ 36 met, above not', () => {
    expect(
      find([run('sqlite', [level('sqlite', 1, 3.6, 10)])], 'POST → terminal p50 at c1, in bidi round trips'),
    ).toMatchObject({ ratio: 36, met: true });
    expect(
      find([run('sqlite', [level('sqlite', 1, 3.7, 10)])], 'POST → terminal p50 at c1, in bidi round trips').met,
    ).toBe(false);
  });

  it('c1 p99 in bidi round trips: ≤ 180', () => {
    expect(
      find([run('sqlite', [level('sqlite', 1, 18, 10)])], 'POST → terminal p99 at c1, in bidi round trips').met,
    ).toBe(true);
    expect(
      find([run('sqlite', [level('sqlite', 1, 18.1, 10)])], 'POST → terminal p99 at c1, in bidi round trips').met,
    ).toBe(false);
  });

  it("PostgreSQL c1 p50 ≤ 2 × SQLite c1 p50 of the same run, with both levels' neighbours", () => {
    const runs = (pgMs: number) => [
      run('sqlite', [level('sqlite', 1, 3, 10)]),
      run('postgres', [level('postgres', 1, pgMs, 10)]),
    ];
    const met = find(runs(6), 'PostgreSQL terminal p50 at c1 vs SQLite', 'both');
    expect(met).toMatchObject({ ratio: 2, met: true });
    expect(met.otherProcesses.map((o) => `${o.database} c${o.concurrency}`)).toEqual(['SQLite c1', 'PostgreSQL c1']);
    expect(find(runs(6.1), 'PostgreSQL terminal p50 at c1 vs SQLite', 'both').met).toBe(false);
  });

  it('host CPU per run at c64 ≤ 1 ms, on SQLite only', () => {
    const runs = (cpuMs: number) => [
      run('sqlite', [level('sqlite', 64, 50, 1000, cpuMs)]),
      run('postgres', [level('postgres', 64, 50, 1000, 5000)]),
    ];
    expect(find(runs(1000), 'host CPU per run at c64')).toMatchObject({ ratio: 1, met: true });
    expect(find(runs(1001), 'host CPU per run at c64').met).toBe(false);
    expect(targetChecks(runs(1000), bidi).filter((t) => t.target === 'host CPU per run at c64')).toHaveLength(1);
  });

  it('deltas/s: 1.4 × the bidi rate with one reader per run, 1 × with ten', () => {
    const runs = [run('sqlite', [], [streaming(1, 14_000), streaming(10, 10_000)])];
    const checks = targetChecks(runs, bidi).filter((t) => t.target.startsWith('deltas/s'));
    expect(checks.map((t) => [t.goal, t.met])).toEqual([
      ['≥ 1.4 ×', true],
      ['≥ 1 ×', true],
    ]);
    const short = [run('sqlite', [], [streaming(1, 13_900), streaming(10, 9_900)])];
    expect(
      targetChecks(short, bidi)
        .filter((t) => t.target.startsWith('deltas/s'))
        .map((t) => t.met),
    ).toEqual([false, false]);
  });

  it('c64 ≥ 1/14 of the bidi rate and not below c16', () => {
    const runs = [run('sqlite', [level('sqlite', 16, 10, 700), level('sqlite', 64, 50, 715)])];
    expect(find(runs, 'runs/s at c64 vs bidi round trips/s').met).toBe(true);
    expect(find(runs, 'runs/s at c64 not below c16').met).toBe(true);
    const slow = [run('sqlite', [level('sqlite', 16, 10, 700), level('sqlite', 64, 50, 699)])];
    expect(find(slow, 'runs/s at c64 vs bidi round trips/s').met).toBe(false);
    expect(find(slow, 'runs/s at c64 not below c16').met).toBe(false);
  });
});
