import { performance } from 'node:perf_hooks';
import type { HostHttp } from '../common/http';
import { readSse } from '../common/sse';
import { ResultOrder } from './result-order';

/** Milliseconds from the moment POST /v1/events is sent. */
export interface RunTiming {
  /** 202 received. */
  admittedMs: number;
  /** First result on the run's SSE stream. */
  firstMs: number;
  /** Terminal result (run.completed) on the SSE stream. */
  terminalMs: number;
  /** Results seen on the stream. */
  results: number;
}

export class RunFailure extends Error {
  constructor(
    readonly runId: string | null,
    message: string,
  ) {
    super(runId ? `run ${runId}: ${message}` : message);
  }
}

/** Submits events for one agent and follows each run to its terminal result on SSE. */
export class RunDriver {
  private next = 0;

  constructor(
    private readonly http: HostHttp,
    private readonly agentId: string,
    private readonly text: string,
    private readonly timeoutMs: number,
  ) {}

  get submitted(): number {
    return this.next;
  }

  async run(): Promise<RunTiming> {
    const i = this.next++;
    const t0 = performance.now();
    const res = await this.http
      .json('POST', '/v1/events', {
        agent_id: this.agentId,
        event: { event_type: 'message.received', source: 'api' },
        conversation: { conversation_id: `c-${i}` },
        input: { text: this.text },
      })
      .catch((err: unknown) => {
        const ms = (performance.now() - t0).toFixed(0);
        throw new RunFailure(null, `c-${i}: ${err instanceof Error ? err.message : String(err)} after ${ms} ms`);
      });
    const admittedMs = performance.now() - t0;
    const body = res.body as { run_id?: string; disposition?: string } | null;
    if (res.status !== 202 || body?.disposition !== 'started' || !body.run_id) {
      throw new RunFailure(null, `POST /v1/events (c-${i}): ${res.status} ${JSON.stringify(res.body)}`);
    }
    const runId = body.run_id;
    let firstMs = NaN;
    let terminalMs = NaN;
    let results = 0;
    const order = new ResultOrder();
    await readSse(
      this.http,
      `/v1/runs/${runId}/events`,
      (e) => {
        const now = performance.now() - t0;
        results++;
        if (Number.isNaN(firstMs)) {
          firstMs = now;
        }
        if (order.see(e)) {
          terminalMs = now;
        }
      },
      this.timeoutMs,
    ).catch((err: unknown) => {
      const ms = (performance.now() - t0).toFixed(0);
      throw new RunFailure(
        runId,
        `${err instanceof Error ? err.message : String(err)} after ${ms} ms, ${results} results seen`,
      );
    });
    const end = order.terminal;
    if (!end) {
      throw new RunFailure(runId, `SSE ended after ${results} results without a terminal result`);
    }
    if (end.event !== 'run.completed') {
      throw new RunFailure(runId, `${end.event} ${end.data.slice(0, 300)}`);
    }
    if (order.problems.length > 0) {
      throw new RunFailure(runId, order.problems.join('; '));
    }
    return { admittedMs, firstMs, terminalMs, results };
  }
}

export interface LevelResult {
  concurrency: number;
  timings: RunTiming[];
  failures: string[];
  /** From the first POST to the last terminal result (or failure). */
  elapsedMs: number;
}

/**
 * Closed loop: `concurrency` workers each start a run, wait for its terminal result, start the
 * next, until `durationMs` has passed (runs in flight then finish and count). Stops early after
 * `maxFailures` failures. `onRun` is called as each run completes.
 */
export function closedLoop(
  driver: RunDriver,
  concurrency: number,
  durationMs: number,
  maxFailures = 20,
  onRun: () => void = () => undefined,
): Promise<LevelResult> {
  const deadline = performance.now() + durationMs;
  return loop(driver, concurrency, () => performance.now() < deadline, maxFailures, onRun);
}

/**
 * The warm-up: a closed loop until at least `minRuns` runs have ended and `minMs` has passed — by
 * runs, not only seconds, so that a slower database's host has served as many runs (and its JIT
 * seen as much of the run path) as a faster one's before the levels (docs/benchmarks.md) — but
 * never past `capMs`.
 */
export function warmUp(
  driver: RunDriver,
  concurrency: number,
  minMs: number,
  minRuns: number,
  capMs: number,
): Promise<LevelResult> {
  const start = performance.now();
  let ended = 0;
  const more = (): boolean => {
    const t = performance.now() - start;
    return t < capMs && (t < minMs || ended < minRuns);
  };
  return loop(driver, concurrency, more, 20, () => ended++);
}

async function loop(
  driver: RunDriver,
  concurrency: number,
  more: () => boolean,
  maxFailures: number,
  onRun: () => void,
): Promise<LevelResult> {
  const timings: RunTiming[] = [];
  const failures: string[] = [];
  const start = performance.now();
  const worker = async (): Promise<void> => {
    while (more() && failures.length < maxFailures) {
      try {
        timings.push(await driver.run());
        onRun();
      } catch (e) {
        failures.push(e instanceof Error ? e.message : String(e));
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { concurrency, timings, failures, elapsedMs: performance.now() - start };
}
