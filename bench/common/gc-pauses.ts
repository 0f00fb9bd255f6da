/*
 * A `-r` preload for the host child that records each garbage-collection pause of its main thread
 * with its wall-clock start, so a bench's slow runs can be matched to the pauses that overlap them
 * (docs/benchmarks.md, "The c1 latency tail: scavenges"):
 *
 *   BENCH_HOST_NODE_ARGS="-r $PWD/dist/bench/common/gc-pauses.js" GC_PAUSES_FILE=/tmp/gc \
 *   node -r ./dist/bench/dispatch/run-times.js dist/bench/dispatch/main.js --db sqlite --levels 1 …
 *   node scripts/gc-tail.js /tmp/runs.json /tmp/gc.<pid>.json
 *
 * Written at exit (or SIGTERM) to `<GC_PAUSES_FILE>.<pid>.json` as `{ "gcs": [[startMs, durationMs,
 * kind], …] }`, startMs in milliseconds since the epoch, kind V8's (1 scavenge, 4 incremental
 * marking, 8 weak callbacks, 2 mark-compact). Worker threads (the checkpointer, the read workers)
 * have heaps of their own and are not recorded. A PerformanceObserver on `gc` entries costs
 * about nothing per pause.
 */
import * as fs from 'node:fs';
import { PerformanceObserver, performance, type PerformanceEntry } from 'node:perf_hooks';
import { isMainThread } from 'node:worker_threads';

function install(): void {
  const file = process.env.GC_PAUSES_FILE;
  if (!isMainThread || !file) {
    return;
  }
  const origin = performance.timeOrigin;
  const gcs: [number, number, number][] = [];
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const detail = (e as PerformanceEntry & { detail?: { kind?: number } }).detail;
      gcs.push([origin + e.startTime, e.duration, detail?.kind ?? 0]);
    }
  }).observe({ entryTypes: ['gc'] });
  let written = false;
  const write = (): void => {
    if (!written) {
      written = true;
      fs.writeFileSync(`${file}.${process.pid}.json`, JSON.stringify({ gcs }));
    }
  };
  process.on('exit', write);
  // The benches stop the host with SIGTERM; the host has SIGTERM handlers of its own (apps/host/src/main.ts).
  process.on('SIGTERM', write);
}

install();
