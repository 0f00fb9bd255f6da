import { EchoRunner, type OutgoingResult, type ResultSink } from './echo-runner';
import { HostApiError, type HostApi } from './host-api';
import {
  BENCH_STATE_KEY,
  BENCH_STATE_VALUE,
  measureCalls,
  parseBenchConfig,
  summarizeUs,
  type BenchStats,
} from './host-api-bench';
import { silentLogger } from './log';
import { fromValue, toStruct, toValue, type Value } from './struct';

class FakeSink implements ResultSink {
  readonly results: OutgoingResult[] = [];
  send(result: OutgoingResult): Promise<void> {
    this.results.push(result);
    return Promise.resolve();
  }
  flush(): Promise<void> {
    return Promise.resolve();
  }
}

/** A host API in memory: StateSet/StateGet on one map, HistoryPage of two items. */
function fakeHost(fail?: string) {
  const state = new Map<string, Value>();
  const calls: { method: string; request: Record<string, unknown> }[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const call = async (method: string, request: Record<string, unknown>): Promise<unknown> => {
    calls.push({ method, request });
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    await new Promise((resolve) => setImmediate(resolve));
    inFlight--;
    if (method === fail) {
      throw new HostApiError(method, 7, 'no', 'unauthorized');
    }
    switch (method) {
      case 'StateSet':
        state.set(String(request.key), request.value as Value);
        return { success: true };
      case 'StateGet':
        return { value: state.get(String(request.key)) ?? null };
      case 'HistoryPage':
        return { items: [toStruct({ role: 'user', content: 'hi' }), toStruct({ role: 'assistant' })], has_more: false };
      default:
        throw new Error(`unexpected ${method}`);
    }
  };
  return { host: { call } as unknown as HostApi, calls, maxInFlight: () => maxInFlight, state };
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

describe('EchoRunner mode host_api_bench', () => {
  const config = { mode: 'host_api_bench', calls: 20, concurrency: 3, warmup: 5 };

  it('sets the state key, measures StateGet and reports bench.stats before run.completed', async () => {
    const fake = fakeHost();
    const sink = new FakeSink();
    await new EchoRunner(sink, { log: silentLogger, hostApi: fake.host }).start({
      runId: 'r1',
      text: '',
      config: { ...config, api: 'state_get' },
    });
    expect(sink.results.map((r) => r.type)).toEqual(['bench.measuring', 'bench.stats', 'run.completed']);
    const stats = sink.results[1].data as unknown as BenchStats;
    expect(stats).toMatchObject({ api: 'state_get', calls: 20, concurrency: 3, warmup: 5 });
    expect(stats.latency.count).toBe(20);
    expect(stats.response).toEqual({ value: BENCH_STATE_VALUE });
    expect(fake.calls[0]).toEqual({
      method: 'StateSet',
      request: { run_id: 'r1', scope: 'conversation', key: BENCH_STATE_KEY, value: toValue(BENCH_STATE_VALUE) },
    });
    // StateSet + checked call + warm-up + measured, every one with the run's id
    expect(fake.calls).toHaveLength(1 + 1 + 5 + 20);
    expect(fake.calls.every((c) => c.request.run_id === 'r1')).toBe(true);
    expect(fake.maxInFlight()).toBe(3);
    expect(fromValue(fake.state.get(BENCH_STATE_KEY))).toEqual(BENCH_STATE_VALUE);
  });

  it('HistoryPage: reports the page as plain JSON', async () => {
    const fake = fakeHost();
    const sink = new FakeSink();
    await new EchoRunner(sink, { log: silentLogger, hostApi: fake.host }).start({
      runId: 'r2',
      text: '',
      config: { ...config, api: 'history_page', page_limit: 7 },
    });
    const stats = sink.results[1].data as unknown as BenchStats;
    expect(stats.response.items).toEqual([{ role: 'user', content: 'hi' }, { role: 'assistant' }]);
    expect(fake.calls[1]).toEqual({ method: 'HistoryPage', request: { run_id: 'r2', limit: 7 } });
  });

  it('a failed call fails the run with the host error code', async () => {
    const sink = new FakeSink();
    await new EchoRunner(sink, { log: silentLogger, hostApi: fakeHost('StateGet').host }).start({
      runId: 'r3',
      text: '',
      config: { ...config, api: 'state_get' },
    });
    expect(sink.results.map((r) => r.type)).toEqual(['run.failed']);
    expect(sink.results[0].data.error).toMatch(/StateGet: PERMISSION_DENIED \(unauthorized\): no/);
  });

  it('bad config, or no host API client: run.failed runner.invalid_config', async () => {
    const sink = new FakeSink();
    const runner = new EchoRunner(sink, { log: silentLogger });
    await runner.start({ runId: 'r4', text: '', config: { ...config, api: 'state_get' } });
    await new EchoRunner(sink, { log: silentLogger, hostApi: fakeHost().host }).start({
      runId: 'r5',
      text: '',
      config: { mode: 'host_api_bench', api: 'x' },
    });
    expect(sink.results.map((r) => [r.run_id, r.type, r.data.code])).toEqual([
      ['r4', 'run.failed', 'runner.invalid_config'],
      ['r5', 'run.failed', 'runner.invalid_config'],
    ]);
  });
});
