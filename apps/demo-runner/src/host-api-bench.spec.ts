import { hostApiError, type JsonObject } from '@runner-host/runner-sdk';
import { FakeHost, type FakeHostOptions } from '@runner-host/runner-sdk/testing';
import { demoRunner } from './demo-runner';
import {
  BENCH_STATE_KEY,
  BENCH_STATE_VALUE,
  measureCalls,
  parseBenchConfig,
  summarizeUs,
  type BenchStats,
} from './host-api-bench';
import { silentLogger } from './log';

/** The fake host, counting the host API calls (and how many are in flight at once). */
function fakeHost(options: Partial<FakeHostOptions> = {}) {
  const calls: { method: string; request: JsonObject }[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const host = new FakeHost({
    runners: [demoRunner({ log: silentLogger })],
    history: [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
    ],
    ...options,
  });
  const unary = host.unary.bind(host);
  host.unary = async (method, request, callOptions) => {
    calls.push({ method, request: request as unknown as JsonObject });
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      await new Promise((resolve) => setImmediate(resolve));
      return await unary(method, request, callOptions);
    } finally {
      inFlight--;
    }
  };
  return { host, calls, maxInFlight: () => maxInFlight };
}

describe('parseBenchConfig', () => {
  it('defaults and validates', () => {
    expect(parseBenchConfig({ api: 'state_get' })).toEqual({
      api: 'state_get',
      calls: 1000,
      concurrency: 1,
      warmup: 100,
      page_limit: 20,
    });
    expect(parseBenchConfig({ api: 'nope' })).toMatch(/^api: must be one of/);
    expect(parseBenchConfig({ api: 'history_page', calls: 0 })).toBe('calls: must be an integer from 1 to 1000000');
    expect(parseBenchConfig({ api: 'history_page', concurrency: 1.5 })).toMatch(/^concurrency:/);
  });
});

describe('measureCalls', () => {
  it('makes exactly `calls` calls, at most `concurrency` at a time', async () => {
    let inFlight = 0;
    let max = 0;
    let n = 0;
    const measured = await measureCalls(
      async () => {
        n++;
        inFlight++;
        max = Math.max(max, inFlight);
        await new Promise((resolve) => setImmediate(resolve));
        inFlight--;
      },
      50,
      4,
    );
    expect(n).toBe(50);
    expect(max).toBe(4);
    expect(measured.latency.count).toBe(50);
    expect(measured.calls_per_second).toBeGreaterThan(0);
  });

  it('rejects with the first error and stops', async () => {
    let n = 0;
    const failing = () => (++n === 3 ? Promise.reject(new Error('boom')) : Promise.resolve());
    await expect(measureCalls(failing, 100, 1)).rejects.toThrow('boom');
    expect(n).toBe(3);
  });

  it('summarizeUs: nearest-rank percentiles in µs', () => {
    const samples = Array.from({ length: 100 }, (_, i) => (i + 1) / 1000); // 1..100 µs
    expect(summarizeUs(samples)).toMatchObject({ count: 100, p50_us: 50, p90_us: 90, p99_us: 99, max_us: 100 });
  });
});

describe('demo runner mode host_api_bench', () => {
  const config = { mode: 'host_api_bench', calls: 20, concurrency: 3, warmup: 5 };

  it('sets the state key, measures StateGet and reports bench.stats before run.completed', async () => {
    const fake = fakeHost();
    const run = fake.host.start({ config: { ...config, api: 'state_get' } });
    const outcome = await run.done;
    expect(outcome.results.map((r) => r.type)).toEqual(['bench.measuring', 'bench.stats', 'run.completed']);
    const stats = outcome.results[1].data as unknown as BenchStats;
    expect(stats).toMatchObject({ api: 'state_get', calls: 20, concurrency: 3, warmup: 5 });
    expect(stats.latency.count).toBe(20);
    expect(stats.response).toEqual({ value: BENCH_STATE_VALUE });
    expect(fake.calls[0]).toEqual({
      method: 'StateSet',
      request: { run_id: run.runId, scope: 'conversation', key: BENCH_STATE_KEY, value: BENCH_STATE_VALUE },
    });
    // StateSet + checked call + warm-up + measured, every one with the run's id
    expect(fake.calls).toHaveLength(1 + 1 + 5 + 20);
    expect(fake.calls.every((c) => c.request.run_id === run.runId)).toBe(true);
    expect(fake.maxInFlight()).toBe(3);
  });

  it('HistoryPage: reports the page as plain JSON', async () => {
    const fake = fakeHost();
    const run = fake.host.start({ config: { ...config, api: 'history_page', page_limit: 7 } });
    const outcome = await run.done;
    const stats = outcome.results[1].data as unknown as BenchStats;
    // Newest first (HistoryPage's default direction).
    expect(stats.response.items).toEqual([
      { role: 'assistant', content: 'hello' },
      { role: 'user', content: 'hi' },
    ]);
    expect(fake.calls[1]).toEqual({ method: 'HistoryPage', request: { run_id: run.runId, limit: 7 } });
  });

  it('a failed call fails the run with the host error code', async () => {
    const fake = fakeHost({
      handlers: {
        StateGet: () => {
          throw hostApiError('unauthorized', 'no');
        },
      },
    });
    const outcome = await fake.host.run({ config: { ...config, api: 'state_get' } });
    expect(outcome.results.map((r) => r.type)).toEqual(['run.failed']);
    expect(outcome.code).toBe('runner.exception');
    expect(outcome.error).toMatch(/unauthorized.*no/);
  });

  it('bad config: run.failed runner.invalid_config naming the field', async () => {
    const outcome = await fakeHost().host.run({ config: { mode: 'host_api_bench', api: 'x' } });
    expect(outcome).toMatchObject({ status: 'failed', code: 'runner.invalid_config' });
    expect(outcome.error).toBe('host_api_bench: api: must be one of state_get, history_page');
  });
});
