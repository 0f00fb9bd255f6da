import * as os from 'node:os';
import type { BenchStats } from '../../apps/demo-runner/src/host-api-bench';
import { fmtDuration, fmtInt, fmtNum, markdownTable } from '../common/stats';
import type { CpuWindow } from './cpu';
import type { FloorResult } from './floor';

/** One level of the host API bench: what the runner reported, and CPU over its measured window. */
export interface HostApiLevel {
  stats: BenchStats;
  runId: string;
  /** Between bench.measuring and bench.stats as seen on SSE: procs `host` and `runner`, self = bench. */
  cpu: CpuWindow;
}

const us = (v: number): string => fmtDuration(v / 1000);
const API_LABEL: Record<string, string> = { state_get: 'StateGet', history_page: 'HistoryPage' };
const TINY = 'bare unary RunGet (tiny)';
const SAME_ANSWER: Record<string, string> = {
  state_get: 'bare StateGet, same answer',
  history_page: 'bare HistoryPage, same answer',
};

export const hostCpuUsPerCall = (l: HostApiLevel): number => (l.cpu.procs.host * 1000) / l.stats.calls;

/** "ours % / other %" of all cores over a window. */
function coreUse(cpu: CpuWindow, ours: number): string {
  const pct = (ms: number): string => `${((100 * ms) / cpu.elapsedMs / os.cpus().length).toFixed(0)} %`;
  return `${pct(ours)} / ${pct(cpu.other)}`;
}

const cores = `CPU use of ${os.cpus().length} cores: ours / other processes`;

export function hostApiTable(levels: HostApiLevel[]): string {
  return markdownTable(
    ['host API call', 'concurrency', 'calls', 'p50', 'p90', 'p99', 'max', 'calls/s', 'CPU/call runner / host', cores],
    levels.map((l) => [
      API_LABEL[l.stats.api] ?? l.stats.api,
      String(l.stats.concurrency),
      fmtInt(l.stats.calls),
      us(l.stats.latency.p50_us),
      us(l.stats.latency.p90_us),
      us(l.stats.latency.p99_us),
      us(l.stats.latency.max_us),
      fmtInt(l.stats.calls_per_second),
      `${us(l.stats.cpu_us_per_call)} / ${us(hostCpuUsPerCall(l))}`,
      coreUse(l.cpu, l.cpu.procs.host + l.cpu.procs.runner + l.cpu.self),
    ]),
  );
}

export function floorsTable(floors: FloorResult[]): string {
  return markdownTable(
    ['floor', 'concurrency', 'calls', 'p50', 'p90', 'p99', 'max', 'calls/s', 'CPU/call client / server', cores],
    floors.map((f) => [
      f.label,
      String(f.concurrency),
      fmtInt(f.latency.count),
      us(f.latency.p50_us),
      us(f.latency.p90_us),
      us(f.latency.p99_us),
      us(f.latency.max_us),
      fmtInt(f.calls_per_second),
      `${us(f.cpu_us_per_call)} / ${us(f.server_cpu_us_per_call)}`,
      coreUse(f.cpu, f.cpu.procs.server + f.cpu.self),
    ]),
  );
}

export function overheadTable(levels: HostApiLevel[], floors: FloorResult[]): string {
  const floorOf = (label: string, concurrency: number): FloorResult | undefined =>
    floors.find((f) => f.label === label && f.concurrency === concurrency);
  const rows = levels.map((l) => {
    const ours = l.stats.latency.p50_us;
    const tiny = floorOf(TINY, l.stats.concurrency);
    const same = floorOf(SAME_ANSWER[l.stats.api] ?? '', l.stats.concurrency);
    const ratio = (f: FloorResult | undefined): string => (f ? `${fmtNum(ours / f.latency.p50_us)} ×` : '—');
    const diff = (f: FloorResult | undefined): string => (f ? `${fmtInt(ours - f.latency.p50_us)} µs` : '—');
    return [
      `${API_LABEL[l.stats.api] ?? l.stats.api} c${l.stats.concurrency}`,
      us(ours),
      tiny ? us(tiny.latency.p50_us) : '—',
      ratio(tiny),
      diff(tiny),
      same ? us(same.latency.p50_us) : '—',
      ratio(same),
      diff(same),
      tiny ? `${fmtNum(tiny.calls_per_second / l.stats.calls_per_second)} ×` : '—',
      same
        ? `${us(hostCpuUsPerCall(l))} ÷ ${us(same.server_cpu_us_per_call)} = ${fmtNum(hostCpuUsPerCall(l) / same.server_cpu_us_per_call)} ×`
        : '—',
    ];
  });
  return markdownTable(
    [
      'call',
      'ours p50',
      'tiny floor p50',
      'ours ÷ tiny',
      'ours − tiny',
      'same-answer floor p50',
      'ours ÷ same',
      'ours − same',
      'calls/s: tiny floor ÷ ours',
      'server CPU/call: host ÷ bare (same answer)',
    ],
    rows,
  );
}
