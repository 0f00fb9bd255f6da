/*
 * The targets of several bench runs, side by side: one run of bench/dispatch or bench/host-api is
 * one sample of a VM whose speed swings by ±50 % from one minute to the next (docs/benchmarks.md),
 * so a target that one run meets and the next misses is not met steadily. This reads the `targets`
 * of each run's --json output and gives, per target, every run's ratio, their median, and in how
 * many runs it was met. A target counts as met when most runs meet it (for an odd number of runs,
 * exactly when the median run meets it).
 */

/** A target row as bench/dispatch and bench/host-api write it in their --json output. */
export interface TargetJson {
  target: string;
  database?: string;
  ratio: number | null;
  ratio_text?: string;
  goal: string;
  met: boolean | null;
}

/** One target over all runs that measured it. */
export interface TargetSeries {
  target: string;
  database: string;
  goal: string;
  /** Each run's ratio, in run order (null where the run did not measure it). */
  ratios: (number | null)[];
  /** Each run's ratio as the bench wrote it, in run order. */
  texts: (string | null)[];
  /** Median of the measured ratios (NaN when none). */
  median: number;
  /** The median run's ratio as the bench wrote it. */
  medianText: string;
  /** Runs that measured it and met it, of `measured`. */
  metRuns: number;
  measured: number;
  /** Met in most runs that measured it; null when no run judged it (e.g. soak RSS). */
  met: boolean | null;
}

/** A run's targets: the `targets` array of one --json document (an empty array when absent). */
export function targetsOf(doc: unknown): TargetJson[] {
  if (typeof doc !== 'object' || doc === null || !Array.isArray((doc as { targets?: unknown }).targets)) {
    return [];
  }
  return (doc as { targets: TargetJson[] }).targets;
}

const key = (t: TargetJson): string => `${t.target}\u0000${t.database ?? '—'}`;

const textOf = (t: TargetJson): string | null => t.ratio_text ?? (t.ratio === null ? null : `${t.ratio.toFixed(2)} ×`);

/** The series of every target named by any run, in the order they first appear. */
export function aggregateTargets(runs: TargetJson[][]): TargetSeries[] {
  const order: string[] = [];
  const byKey = new Map<string, { first: TargetJson; rows: (TargetJson | null)[] }>();
  runs.forEach((targets, i) => {
    for (const t of targets) {
      const k = key(t);
      let entry = byKey.get(k);
      if (!entry) {
        entry = { first: t, rows: Array.from({ length: runs.length }, () => null) };
        byKey.set(k, entry);
        order.push(k);
      }
      entry.rows[i] = t;
    }
  });
  return order.map((k) => {
    const { first, rows } = byKey.get(k)!;
    const measuredRows = rows.filter((r): r is TargetJson => r !== null && r.ratio !== null);
    const sorted = [...measuredRows].sort((a, b) => (a.ratio as number) - (b.ratio as number));
    const mid = sorted.length === 0 ? null : sorted[Math.floor((sorted.length - 1) / 2)];
    const judged = measuredRows.filter((r) => r.met !== null);
    const metRuns = judged.filter((r) => r.met === true).length;
    return {
      target: first.target,
      database: first.database ?? '—',
      goal: first.goal,
      ratios: rows.map((r) => r?.ratio ?? null),
      texts: rows.map((r) => (r ? textOf(r) : null)),
      median: median(measuredRows.map((r) => r.ratio as number)),
      medianText: mid ? (textOf(mid) ?? '—') : '—',
      metRuns,
      measured: judged.length,
      met: judged.length === 0 ? null : metRuns * 2 > judged.length,
    };
  });
}

export function median(values: number[]): number {
  if (values.length === 0) {
    return NaN;
  }
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}
