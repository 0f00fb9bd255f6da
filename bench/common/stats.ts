/** Latency samples in milliseconds, summarised with nearest-rank percentiles. */
export interface Summary {
  count: number;
  p50: number;
  p99: number;
  mean: number;
  max: number;
}

export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0) {
    return { count: 0, p50: NaN, p99: NaN, mean: NaN, max: NaN };
  }
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p: number): number =>
    sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
  const sum = sorted.reduce((a, b) => a + b, 0);
  return {
    count: sorted.length,
    p50: rank(0.5),
    p99: rank(0.99),
    mean: sum / sorted.length,
    max: sorted[sorted.length - 1],
  };
}

/** A duration given in milliseconds, as µs below 1 ms and as ms above. */
export function fmtDuration(ms: number): string {
  if (!Number.isFinite(ms)) {
    return '—';
  }
  if (ms < 1) {
    return `${(ms * 1000).toFixed(0)} µs`;
  }
  return ms < 10 ? `${ms.toFixed(2)} ms` : `${ms.toFixed(1)} ms`;
}

/** An integer with thousands separators. */
export function fmtInt(n: number): string {
  return Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '—';
}

/** A rate or a ratio with sensible precision. */
export function fmtNum(n: number): string {
  if (!Number.isFinite(n)) {
    return '—';
  }
  if (Math.abs(n) >= 100) {
    return fmtInt(n);
  }
  return Math.abs(n) >= 10 ? n.toFixed(1) : n.toFixed(2);
}

/** A Markdown table with the columns padded, so it reads well in a terminal and pastes into a README. */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (i === 0 ? '-'.repeat(w) : `${'-'.repeat(Math.max(1, w - 1))}:`)).join(' | ')} |`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}
