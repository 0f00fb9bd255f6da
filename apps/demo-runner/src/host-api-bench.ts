import { performance } from 'node:perf_hooks';
import type { Json, JsonObject, RunHostApi } from '@runner-host/runner-sdk';

/*
 * Mode `host_api_bench`: the run calls the host API many times and reports the latency it saw,
 * measured here, in the runner process, as a real runner would experience it.
 *
 *   runner_config: {mode: 'host_api_bench', api: 'state_get' | 'history_page', calls: 2000, concurrency: 16,
 *                   warmup: 200, page_limit: 20}
 *
 * 1. StateSet(scope 'conversation', key BENCH_STATE_KEY), so StateGet reads a real row; the run
 *    needs a conversation (and the agent's state policy must enable that scope).
 * 2. One call, checked (StateGet returns the value just set; HistoryPage returns items).
 * 3. `warmup` calls, then result `bench.measuring`, then `calls` calls, `concurrency` at a time.
 * 4. Result `bench.stats` (see BenchStats), then run.completed.
 *
 * Any failed call fails the run: the SDK reports the typed HostApiError (its code, e.g. `unauthorized`).
 */

export const BENCH_APIS = ['state_get', 'history_page'] as const;
export type BenchApi = (typeof BENCH_APIS)[number];

export const BENCH_STATE_KEY = 'bench.greeting';
export const BENCH_STATE_VALUE: JsonObject = { text: 'hello bench', n: 42, tags: ['a', 'b'] };

export interface HostApiBenchConfig {
  api: BenchApi;
  calls: number;
  concurrency: number;
  warmup: number;
  page_limit: number;
}

/** An integer config field within [min, max] (its fallback when absent), or what it must be. */
export const configInt = (value: Json | undefined, fallback: number, min: number, max: number): number | string =>
  value === undefined || value === null
    ? fallback
    : typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max
      ? value
      : `an integer from ${min} to ${max}`;

/** The mode's config, or a description of what is wrong with it. */
export function parseBenchConfig(config: JsonObject): HostApiBenchConfig | string {
  const api = config.api;
  if (typeof api !== 'string' || !(BENCH_APIS as readonly string[]).includes(api)) {
    return `api: must be one of ${BENCH_APIS.join(', ')}`;
  }
  const fields = {
    calls: configInt(config.calls, 1000, 1, 1_000_000),
    concurrency: configInt(config.concurrency, 1, 1, 256),
    warmup: configInt(config.warmup, 100, 0, 1_000_000),
    page_limit: configInt(config.page_limit, 20, 1, 100),
  };
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value === 'string') {
      return `${name}: must be ${value}`;
    }
  }
  return { api: api as BenchApi, ...(fields as Omit<HostApiBenchConfig, 'api'>) };
}

/** Latencies in µs, nearest-rank percentiles. */
/** Type aliases (not interfaces) so the stats are JSON objects as they are (`bench.stats`). */
export type LatencySummary = {
  count: number;
  p50_us: number;
  p90_us: number;
  p99_us: number;
  mean_us: number;
  max_us: number;
};

export type MeasuredCalls = {
  latency: LatencySummary;
  /** From the first call sent to the last answer received. */
  elapsed_ms: number;
  calls_per_second: number;
  /** CPU time (user + system) of this process during the calls, per call. */
  cpu_us_per_call: number;
};

export function summarizeUs(samplesMs: ArrayLike<number>): LatencySummary {
  const sorted = Float64Array.from(samplesMs).sort();
  const n = sorted.length;
  if (n === 0) {
    return { count: 0, p50_us: NaN, p90_us: NaN, p99_us: NaN, mean_us: NaN, max_us: NaN };
  }
  const rank = (p: number): number => sorted[Math.min(n - 1, Math.max(0, Math.ceil(p * n) - 1))] * 1000;
  const us = (ms: number): number => Math.round(ms * 10) / 10;
  return {
    count: n,
    p50_us: us(rank(0.5)),
    p90_us: us(rank(0.9)),
    p99_us: us(rank(0.99)),
    mean_us: us((sorted.reduce((a, b) => a + b, 0) / n) * 1000),
    max_us: us(sorted[n - 1] * 1000),
  };
}

/**
 * Closed loop: `concurrency` callers, each sends its next call when the previous one is answered,
 * until `calls` calls are done. Each call's latency is taken around the awaited promise. Rejects
 * with the first error (the callers stop), or when `signal` aborts.
 */
export async function measureCalls(
  call: () => Promise<unknown>,
  calls: number,
  concurrency: number,
  signal?: AbortSignal,
): Promise<MeasuredCalls> {
  const samples = new Float64Array(calls);
  let next = 0;
  let failure: unknown = null;
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const caller = async (): Promise<void> => {
    while (next < calls && failure === null) {
      signal?.throwIfAborted();
      const i = next++;
      const t0 = performance.now();
      try {
        await call();
      } catch (e) {
        failure ??= e;
        throw e;
      }
      samples[i] = performance.now() - t0;
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, calls) }, caller));
  const elapsed = performance.now() - start;
  const cpu = process.cpuUsage(cpu0);
  return {
    latency: summarizeUs(samples),
    elapsed_ms: Math.round(elapsed * 1000) / 1000,
    calls_per_second: Math.round((calls * 1000 * 10) / elapsed) / 10,
    cpu_us_per_call: Math.round(((cpu.user + cpu.system) * 10) / calls) / 10,
  };
}

/** `bench.stats` result data. `response` is the checked first answer as plain JSON (Struct fields decoded). */
export type BenchStats = MeasuredCalls & {
  api: BenchApi;
  calls: number;
  concurrency: number;
  warmup: number;
  response: JsonObject;
};

type Send = (type: string, data: JsonObject) => Promise<void>;

/** What the mode calls: the run's host API (io.host), state and history. */
export type BenchHost = Pick<RunHostApi, 'state' | 'history'>;

/** One call of the configured API, and a check of its first answer (returned as plain JSON). */
function apiCall(host: BenchHost, config: HostApiBenchConfig) {
  if (config.api === 'state_get') {
    const call = () => host.state.get('conversation', BENCH_STATE_KEY);
    const check = async (): Promise<JsonObject> => {
      const value = await call();
      if (JSON.stringify(value) !== JSON.stringify(BENCH_STATE_VALUE)) {
        throw new Error(`StateGet returned ${JSON.stringify(value)}, not the value just set`);
      }
      return { value };
    };
    return { call, check };
  }
  const call = () => host.history.page({ limit: config.page_limit });
  const check = async (): Promise<JsonObject> => {
    const page = await call();
    if (page.items.length === 0) {
      throw new Error('HistoryPage returned no items: seed the conversation first');
    }
    return {
      items: page.items,
      has_more: page.has_more,
      next_cursor: page.next_cursor ?? null,
      prev_cursor: page.prev_cursor ?? null,
    };
  };
  return { call, check };
}

/** The mode's script up to (not including) its terminal result; returns what it sent as `bench.stats`. */
export async function hostApiBench(
  host: BenchHost,
  config: HostApiBenchConfig,
  send: Send,
  signal: AbortSignal,
): Promise<BenchStats> {
  await host.state.set('conversation', BENCH_STATE_KEY, BENCH_STATE_VALUE);
  const { call, check } = apiCall(host, config);
  const response = await check();
  if (config.warmup > 0) {
    await measureCalls(call, config.warmup, config.concurrency, signal);
  }
  await send('bench.measuring', { api: config.api, calls: config.calls, concurrency: config.concurrency });
  const measured = await measureCalls(call, config.calls, config.concurrency, signal);
  const stats: BenchStats = {
    api: config.api,
    calls: config.calls,
    concurrency: config.concurrency,
    warmup: config.warmup,
    ...measured,
    response,
  };
  await send('bench.stats', stats);
  return stats;
}
