import { performance } from 'node:perf_hooks';
import { closedLoop, type RunDriver } from './load';
import { rssMiB } from '../common/proc';
import { summarize } from '../common/stats';

/*
 * Soak: the closed loop at concurrency 64 for a long time, host RSS sampled every 10 s (and at
 * the start and the end), to check that memory stays flat under sustained load.
 */

export const SOAK_CONCURRENCY = 64;
const SAMPLE_MS = 10_000;

export interface SoakSample {
  /** Seconds since the soak started. */
  t_s: number;
  rss_mib: number;
  /** Runs completed since the previous sample. */
  runs: number;
}

export interface SoakResult {
  seconds: number;
  concurrency: number;
  samples: SoakSample[];
  runs: number;
  runsPerS: number;
  terminalP50Ms: number;
  terminalP99Ms: number;
  failures: string[];
}

export async function soak(
  driver: RunDriver,
  hostPid: number,
  seconds: number,
  onSample: (s: SoakSample) => void,
): Promise<SoakResult> {
  const start = performance.now();
  const samples: SoakSample[] = [];
  let counted = 0;
  let completed = 0;
  const sample = (): void => {
    const s: SoakSample = {
      t_s: Math.round((performance.now() - start) / 1000),
      rss_mib: Math.round(rssMiB(hostPid) * 10) / 10,
      runs: completed - counted,
    };
    counted = completed;
    samples.push(s);
    onSample(s);
  };
  sample();
  const timer = setInterval(sample, SAMPLE_MS);
  let level;
  try {
    // Count completions as they happen so each sample reports its own window.
    level = await closedLoop(driver, SOAK_CONCURRENCY, seconds * 1000, 100, () => completed++);
  } finally {
    clearInterval(timer);
  }
  sample();
  const terminal = summarize(level.timings.map((t) => t.terminalMs));
  return {
    seconds,
    concurrency: SOAK_CONCURRENCY,
    samples,
    runs: level.timings.length,
    runsPerS: (level.timings.length * 1000) / level.elapsedMs,
    terminalP50Ms: terminal.p50,
    terminalP99Ms: terminal.p99,
    failures: level.failures,
  };
}
