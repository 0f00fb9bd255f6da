import { fmtDuration, fmtInt, fmtNum, markdownTable } from '../common/stats';
import type { CountResult, StreamLevel } from './measure';

export interface MeasuredStreamLevel extends StreamLevel {
  /** CPU ms per stream: host, scripted provider, bench process (client). */
  cpu: { host: number; provider: number; client: number };
}

const label = (l: StreamLevel): string =>
  l.path === 'direct' ? 'direct: openai SDK → provider' : 'proxied: gRPC StreamModel → host → openai SDK → provider';

export function streamTable(levels: MeasuredStreamLevel[]): string {
  return markdownTable(
    [
      'path',
      'conc.',
      'streams',
      'TTFC p50',
      'TTFC p99',
      'stream p50',
      'stream p99',
      'chunks/s',
      'CPU/stream host · provider · client',
    ],
    levels.map((l) => [
      label(l),
      String(l.concurrency),
      fmtInt(l.streams),
      fmtDuration(l.ttfc.p50),
      fmtDuration(l.ttfc.p99),
      fmtDuration(l.total.p50),
      fmtDuration(l.total.p99),
      fmtInt(l.chunksPerSec),
      `${l.path === 'direct' ? '—' : fmtDuration(l.cpu.host)} · ${fmtDuration(l.cpu.provider)} · ${fmtDuration(l.cpu.client)}`,
    ]),
  );
}

export function ratioTable(levels: MeasuredStreamLevel[]): string {
  const concurrencies = [...new Set(levels.map((l) => l.concurrency))];
  return markdownTable(
    [
      'conc.',
      'TTFC p50 ratio',
      'TTFC p50 added',
      'stream p50 ratio',
      'stream p50 added',
      'chunks/s ratio (proxied / direct)',
    ],
    concurrencies.flatMap((c) => {
      const d = levels.find((l) => l.concurrency === c && l.path === 'direct');
      const p = levels.find((l) => l.concurrency === c && l.path === 'proxied');
      if (!d || !p) {
        return [];
      }
      return [
        [
          String(c),
          `${fmtNum(p.ttfc.p50 / d.ttfc.p50)}×`,
          fmtDuration(p.ttfc.p50 - d.ttfc.p50),
          `${fmtNum(p.total.p50 / d.total.p50)}×`,
          fmtDuration(p.total.p50 - d.total.p50),
          `${fmtNum(p.chunksPerSec / d.chunksPerSec)}×`,
        ],
      ];
    }),
  );
}

export function countTable(rows: { label: string; result: CountResult }[]): string {
  return markdownTable(
    ['count_tokens of the conversation', 'calls', 'p50', 'p99', 'calls/s', 'tokens/s'],
    rows.map(({ label: name, result: r }) => [
      name,
      fmtInt(r.latency.count),
      fmtDuration(r.latency.p50),
      fmtDuration(r.latency.p99),
      fmtNum(r.callsPerSec),
      fmtInt(r.callsPerSec * r.tokens),
    ]),
  );
}
