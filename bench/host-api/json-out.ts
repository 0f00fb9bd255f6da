import { machineJson, num } from '../common/json-out';
import type { FloorResult } from './floor';
import { hostCpuUsPerCall, type HostApiLevel } from './report';

/*
 * The --json output of the host API bench: every call level with the floors of the same
 * run, and the ratio issue 7 states its target in (StateGet p50 ≤ 1.5 × the bare unary floor at c1).
 */

const RPC: Record<string, string> = { state_get: 'StateGet', history_page: 'HistoryPage' };
export const UNARY_FLOOR = 'bare unary RunGet (tiny)';
export const STATE_GET_TARGET = 1.5;

/** StateGet p50 ÷ bare unary p50 at c1, or NaN when either is missing. */
export function stateGetRatio(levels: HostApiLevel[], floors: FloorResult[]): number {
  const ours = levels.find((l) => l.stats.api === 'state_get' && l.stats.concurrency === 1);
  const floor = floors.find((f) => f.label === UNARY_FLOOR && f.concurrency === 1);
  return ours && floor ? ours.stats.latency.p50_us / floor.latency.p50_us : NaN;
}

export function hostApiJson(
  levels: HostApiLevel[],
  floors: FloorResult[],
  meta: Record<string, unknown>,
): Record<string, unknown> {
  const unary = floors.find((f) => f.label === UNARY_FLOOR && f.concurrency === 1);
  const ratio = stateGetRatio(levels, floors);
  return {
    bench: 'host-api',
    ...meta,
    machine: machineJson(),
    calls: levels.map((l) => ({
      rpc: RPC[l.stats.api] ?? l.stats.api,
      concurrency: l.stats.concurrency,
      calls: l.stats.calls,
      p50_us: num(l.stats.latency.p50_us),
      p90_us: num(l.stats.latency.p90_us),
      p99_us: num(l.stats.latency.p99_us),
      max_us: num(l.stats.latency.max_us),
      calls_per_s: num(l.stats.calls_per_second),
      runner_cpu_us_per_call: num(l.stats.cpu_us_per_call),
      host_cpu_us_per_call: num(hostCpuUsPerCall(l)),
      other_processes_cpu_ms: num(l.cpu.other),
    })),
    floors: {
      unary_p50_us: unary ? num(unary.latency.p50_us) : null,
      unary_p99_us: unary ? num(unary.latency.p99_us) : null,
      unary_calls_per_s: unary ? num(unary.calls_per_second) : null,
      cases: floors.map((f) => ({
        label: f.label,
        concurrency: f.concurrency,
        p50_us: num(f.latency.p50_us),
        p99_us: num(f.latency.p99_us),
        calls_per_s: num(f.calls_per_second),
        server_cpu_us_per_call: num(f.server_cpu_us_per_call),
      })),
    },
    targets: [
      {
        target: 'StateGet p50 at c1 vs the bare unary floor p50',
        database: 'SQLite',
        ratio: num(ratio),
        goal: `≤ ${STATE_GET_TARGET} ×`,
        met: Number.isFinite(ratio) ? ratio <= STATE_GET_TARGET : null,
      },
    ],
  };
}
