import type { DatabaseRun } from './phase';
import { DB_LABEL } from './report';
import { fmtDuration, fmtInt, fmtNum, markdownTable } from '../common/stats';

/** The streaming levels of every database, one row per case. */
export function streamingTable(runs: DatabaseRun[]): string {
  const rows = runs.flatMap((r) =>
    r.streaming.map((s) => {
      const deltas = s.runs * s.deltasPerRun;
      return [
        DB_LABEL[r.database],
        fmtInt(s.runs),
        fmtInt(s.deltasPerRun),
        String(s.readers),
        fmtInt(s.failures.length),
        fmtDuration(s.elapsedMs),
        fmtInt(s.deltasPerS),
        fmtInt(s.deliveriesPerS),
        `${fmtDuration(s.terminal.p50)} / ${fmtDuration(s.terminal.max)}`,
        `${fmtNum((1000 * s.cpu.host) / deltas)} / ${fmtNum((1000 * s.cpu.runner) / deltas)} / ${fmtNum((1000 * s.cpu.client) / deltas)} µs`,
      ];
    }),
  );
  return markdownTable(
    [
      'database',
      'runs',
      'deltas/run',
      'SSE readers/run',
      'failed',
      'wall (first POST → last terminal)',
      'deltas/s (ingested, to every reader)',
      'SSE delta events/s (all readers)',
      'run terminal p50 / max',
      'CPU/delta host / runner / bench client',
    ],
    rows,
  );
}

/** Host RSS samples of each soak, one line per database. */
export function soakLines(runs: DatabaseRun[]): string[] {
  const lines: string[] = [];
  for (const r of runs) {
    const s = r.soak;
    if (!s) {
      continue;
    }
    const samples = s.samples.map((x) => `${x.t_s} s ${x.rss_mib.toFixed(0)}`).join(', ');
    const first = s.samples[0]?.rss_mib ?? NaN;
    const last = s.samples[s.samples.length - 1]?.rss_mib ?? NaN;
    lines.push(
      `${DB_LABEL[r.database]}: c${s.concurrency} for ${s.seconds} s, ${fmtInt(s.runs)} runs (${fmtNum(s.runsPerS)} runs/s), ` +
        `terminal p50 / p99 ${fmtDuration(s.terminalP50Ms)} / ${fmtDuration(s.terminalP99Ms)}, ${s.failures.length} failed; ` +
        `host RSS start ${first.toFixed(0)} MiB → end ${last.toFixed(0)} MiB; samples (MiB): ${samples}`,
    );
  }
  return lines;
}
