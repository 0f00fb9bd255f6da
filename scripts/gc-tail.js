#!/usr/bin/env node
/*
 * The c1 latency tail against the host's GC pauses (docs/benchmarks.md, "The c1 latency tail:
 * scavenges"). Inputs: RUN_TIMES_FILE of bench/dispatch/run-times.ts (the bench's runs) and
 * GC_PAUSES_FILE.<pid>.json of bench/common/gc-pauses.ts (the host's pauses).
 *
 *   node scripts/gc-tail.js RUNS.json GC.json
 *
 * The last closed-loop level at c1 is taken as the runs at the end of the file that never
 * overlapped each other. Prints the terminal p50 / p99 of those runs, the scavenges in their
 * window and their mean pause, how many runs a pause overlapped (and their median), and the p99
 * of the runs no pause overlapped.
 */
'use strict';
const fs = require('node:fs');

const [runsFile, gcFile] = process.argv.slice(2);
if (!runsFile || !gcFile) {
  process.stderr.write('usage: node scripts/gc-tail.js RUNS.json GC.json\n');
  process.exit(2);
}
const runs = JSON.parse(fs.readFileSync(runsFile, 'utf8')).sort((a, b) => a[0] - b[0]);
const { gcs } = JSON.parse(fs.readFileSync(gcFile, 'utf8'));
let k = runs.length - 1;
while (k > 0 && runs[k - 1][0] + runs[k - 1][3] <= runs[k][0]) {
  k--;
}
const c1 = runs.slice(k + 1);
if (c1.length === 0) {
  process.stderr.write('no sequential runs at the end of the file\n');
  process.exit(1);
}
const quantile = (sorted, q) => sorted[Math.floor(q * (sorted.length - 1))];
const from = c1[0][0];
const to = c1[c1.length - 1][0] + c1[c1.length - 1][3];
const pauses = gcs.filter((g) => g[0] + g[1] >= from && g[0] <= to).sort((a, b) => a[0] - b[0]);
const scavenges = pauses.filter((g) => g[2] === 1);
const overlapped = (r) => pauses.some((g) => g[0] + g[1] >= r[0] && g[0] <= r[0] + r[3]);
const all = c1.map((r) => r[3]).sort((a, b) => a - b);
const hit = c1
  .filter(overlapped)
  .map((r) => r[3])
  .sort((a, b) => a - b);
const clear = c1
  .filter((r) => !overlapped(r))
  .map((r) => r[3])
  .sort((a, b) => a - b);
const ms = (v) => (v === undefined ? '—' : `${v.toFixed(2)} ms`);
const mean = (a) => (a.length ? a.reduce((s, g) => s + g[1], 0) / a.length : undefined);
const lines = [
  `runs: ${c1.length}, terminal p50 ${ms(quantile(all, 0.5))}, p99 ${ms(quantile(all, 0.99))}`,
  `GC pauses in the window: ${pauses.length} (scavenges ${scavenges.length}, mean ${ms(mean(scavenges))}, max ${ms(Math.max(...pauses.map((g) => g[1])))})`,
  `runs a pause overlapped: ${hit.length} (${((100 * hit.length) / c1.length).toFixed(2)} %), their median ${ms(quantile(hit, 0.5))}`,
  `runs no pause overlapped: p50 ${ms(quantile(clear, 0.5))}, p99 ${ms(quantile(clear, 0.99))}`,
];
process.stdout.write(lines.join('\n') + '\n');
