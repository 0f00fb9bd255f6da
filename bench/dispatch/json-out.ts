import { machineJson, num } from '../common/json-out';
import type { DiskCounters } from '../common/machine';
import type { FloorResult } from './floors';
import type { DatabaseRun } from './phase';
import type { TargetCheck } from './targets';
import { hostCpuInBidiRoundTrips, otherProcessesShare, runsPerSecond } from './report';
import { summarize } from '../common/stats';

/** The disks in a level per run (flushes are NaN → null on kernels without flush counters). */
function diskJson(d: DiskCounters | null, runs: number) {
  if (!d) {
    return null;
  }
  const flushes = Number.isFinite(d.flushes) ? d.flushes : null;
  return {
    flushes_per_run: flushes === null ? null : num(flushes / runs),
    ms_per_flush: flushes ? num(d.flushMs / flushes) : null,
    written_kib_per_run: num((d.writtenMiB * 1024) / runs),
  };
}

/*
 * The --json output of the dispatch bench: figures and the floors of the same run, machine-readable,
 * so the docs/benchmarks.md figures and the targets (issues 7 and 16) can be checked without parsing the tables.
 */

const floorJson = (f: FloorResult) => ({
  ops: f.latency.count,
  p50_us: num(f.latency.p50 * 1000),
  p99_us: num(f.latency.p99 * 1000),
  ops_per_s: num(f.rate),
  cpu_client_us_per_op: num(f.cpuClientMs * 1000),
  cpu_server_us_per_op: num(f.cpuServerMs * 1000),
});

export function dispatchJson(
  runs: DatabaseRun[],
  floors: { bidi: FloorResult; sqlite: FloorResult; pg: FloorResult | null },
  meta: Record<string, unknown>,
  targets: TargetCheck[],
): Record<string, unknown> {
  const levels = runs.flatMap((r) =>
    r.levels.map((l) => {
      const n = Math.max(1, l.timings.length);
      const terminal = summarize(l.timings.map((t) => t.terminalMs));
      const first = summarize(l.timings.map((t) => t.firstMs));
      const admitted = summarize(l.timings.map((t) => t.admittedMs));
      return {
        database: r.database,
        concurrency: l.concurrency,
        runs: l.timings.length,
        failed: l.failures.length,
        runs_per_s: num(runsPerSecond(l)),
        terminal_p50_ms: num(terminal.p50),
        terminal_p99_ms: num(terminal.p99),
        first_result_p50_ms: num(first.p50),
        first_result_p99_ms: num(first.p99),
        admitted_p50_ms: num(admitted.p50),
        host_cpu_ms_per_run: num(l.cpu.host / n),
        // host_cpu_ms_per_run ÷ the same run's bidi floor's server CPU per round trip (report.ts).
        host_cpu_per_run_in_bidi_round_trips: num(hostCpuInBidiRoundTrips(l, floors.bidi)),
        runner_cpu_ms_per_run: num(l.cpu.runner / n),
        client_cpu_ms_per_run: num(l.cpu.client / n),
        // A local PostgreSQL server's processes (bench/common/machine.ts); null on SQLite or a remote server.
        db_server_cpu_ms_per_run: Number.isFinite(l.cpu.dbServer) ? num(l.cpu.dbServer / n) : null,
        disk: diskJson(l.disk, n),
        other_processes_cpu_ms: num(l.cpu.other),
        other_processes_cores_share: num(otherProcessesShare(l)),
        elapsed_ms: num(l.elapsedMs),
        host_rss_mib: num(l.hostRssMiB),
        // PostgreSQL only (pg-server.ts): null on SQLite or when the server could not be read.
        pg_server: l.pgServer
          ? {
              window_runs: l.pgServer.runs,
              window_ms: num(l.pgServer.windowMs),
              commits_per_run: num(l.pgServer.commitsPerRun),
              wal_syncs_per_run: num(l.pgServer.walSyncsPerRun),
              wal_sync_ms: l.pgServer.walSyncMs === null ? null : num(l.pgServer.walSyncMs),
              other_databases_commits: l.pgServer.otherCommits,
            }
          : null,
      };
    }),
  );
  const streaming = runs.flatMap((r) =>
    r.streaming.map((s) => ({
      database: r.database,
      runs: s.runs,
      deltas_per_run: s.deltasPerRun,
      readers: s.readers,
      failed: s.failures.length,
      deltas_per_s: num(s.deltasPerS),
      sse_delta_events_per_s: num(s.deliveriesPerS),
      deltas_received: s.deltasReceived,
      elapsed_ms: num(s.elapsedMs),
      terminal_p50_ms: num(s.terminal.p50),
      terminal_max_ms: num(s.terminal.max),
      host_cpu_us_per_delta: num((1000 * s.cpu.host) / (s.runs * s.deltasPerRun)),
      runner_cpu_us_per_delta: num((1000 * s.cpu.runner) / (s.runs * s.deltasPerRun)),
      client_cpu_us_per_delta: num((1000 * s.cpu.client) / (s.runs * s.deltasPerRun)),
    })),
  );
  const soak = runs.flatMap((r) =>
    r.soak
      ? [
          {
            database: r.database,
            seconds: r.soak.seconds,
            concurrency: r.soak.concurrency,
            runs: r.soak.runs,
            runs_per_s: num(r.soak.runsPerS),
            terminal_p50_ms: num(r.soak.terminalP50Ms),
            terminal_p99_ms: num(r.soak.terminalP99Ms),
            failed: r.soak.failures.length,
            rss_start_mib: r.soak.samples[0]?.rss_mib ?? null,
            rss_end_mib: r.soak.samples[r.soak.samples.length - 1]?.rss_mib ?? null,
            samples: r.soak.samples,
          },
        ]
      : [],
  );
  const { bidi, sqlite, pg } = floors;
  return {
    bench: 'dispatch',
    ...meta,
    machine: machineJson(),
    levels,
    streaming,
    soak,
    floors: {
      bidi_rtt_p50_us: num(bidi.latency.p50 * 1000),
      bidi_rtt_p99_us: num(bidi.latency.p99 * 1000),
      bidi_round_trips_per_s: num(bidi.rate),
      sqlite_insert_p50_us: num(sqlite.latency.p50 * 1000),
      sqlite_insert_p99_us: num(sqlite.latency.p99 * 1000),
      sqlite_inserts_per_s: num(sqlite.rate),
      pg_insert_p50_us: pg ? num(pg.latency.p50 * 1000) : null,
      pg_inserts_per_s: pg ? num(pg.rate) : null,
      detail: { bidi: floorJson(bidi), sqlite: floorJson(sqlite), pg: pg ? floorJson(pg) : null },
    },
    targets: targets.map((t) => ({
      target: t.target,
      database: t.database,
      measured: t.measured,
      ratio: num(t.ratio),
      ratio_text: t.ratioText,
      goal: t.goal,
      met: t.met,
      other_processes_cores_share:
        t.otherProcesses.length === 0
          ? null
          : t.otherProcesses.map((o) => ({ database: o.database, concurrency: o.concurrency, share: num(o.share) })),
    })),
    after: runs.map((r) => ({
      database: r.database,
      submitted: r.after.submitted,
      left_open: r.after.leftOpen.length,
      host_rss_after_warmup_mib: num(r.after.rssBefore),
      warmup_runs: r.after.warmup.runs,
      warmup_s: num(r.after.warmup.seconds),
      host_log_lines: r.after.hostLog.lines,
      runner_connects: r.after.runnerLog.connects,
      rows_per_run: Object.fromEntries(Object.entries(r.after.rowsPerRun).map(([k, v]) => [k, num(v)])),
      problems: r.problems.length,
    })),
  };
}
