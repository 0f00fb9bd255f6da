/*
 * A `-r` preload for the dispatch bench itself that records every run it drives: its wall-clock
 * start (milliseconds since the epoch) and its 202 / first result / terminal result times from
 * the POST (RunTiming), written at exit to RUN_TIMES_FILE as `[[startMs, admittedMs, firstMs,
 * terminalMs], …]`. With bench/common/gc-pauses.ts on the host, scripts/gc-tail.js names the runs
 * that a host GC pause overlapped (docs/benchmarks.md, "The c1 latency tail: scavenges").
 */
import * as fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { RunDriver } from './load';

function install(): void {
  const file = process.env.RUN_TIMES_FILE;
  if (!file) {
    return;
  }
  const runs: [number, number, number, number][] = [];
  // eslint-disable-next-line @typescript-eslint/unbound-method -- called with its driver below
  const run = RunDriver.prototype.run;
  RunDriver.prototype.run = async function (this: RunDriver) {
    const started = performance.timeOrigin + performance.now();
    const t = await run.call(this);
    runs.push([started, t.admittedMs, t.firstMs, t.terminalMs]);
    return t;
  };
  process.on('exit', () => fs.writeFileSync(file, JSON.stringify(runs)));
}

install();
