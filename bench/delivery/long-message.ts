import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { HostHttp } from '../common/http';
import { readSse } from '../common/sse';
import { summarize } from '../common/stats';

/*
 * The long-message level (issue 23): one run of the demo runner's `long_answer` mode streams one
 * answer of `bytes` in deltas of `deltaChars` (content only, optionally a blank line every few
 * deltas) through one delivery. While it streams, the bench reads the run's result SSE and samples
 * the host's main-thread CPU (/proc/<pid>/schedstat: the event loop's own run time, ns) at every
 * delta, so that the CPU per delta at the start (deltas 5–25 %) and at the end (75–95 %: the end
 * of the run left out) of the message can be compared: equal within noise when the cost per delta does not
 * grow with the message. Meanwhile a concurrent run keeps going: a probe loop posts a short
 * echo event and waits for that run's end, one after another, and `/health/live` is polled; their
 * latencies are the event-loop lag another run sees.
 */

export interface LongCase {
  bytes: number;
  deltaChars: number;
  /** A blank line after every n-th delta (0: none). */
  paragraphEvery: number;
  delivery: { name: string; context: Record<string, unknown> };
}

export interface LongResult {
  deltas: number;
  wall_ms: number;
  /** Host main-thread CPU per delta, µs, over deltas 5–25 % / 75–95 % of the message. */
  cpu_us_per_delta_start: number;
  cpu_us_per_delta_end: number;
  ops: number;
  shown_equals_streamed: boolean;
  /** Concurrent short runs: POST → run.completed, ms. */
  probe_runs: number;
  probe_run_p50_ms: number;
  probe_run_max_ms: number;
  health_p50_ms: number;
  health_max_ms: number;
  /** Probe runs and health checks without an answer (15 s client timeout). */
  probe_failures: number;
  /** Times the host cut the bench's delivery SSE reader (it then resumed after its last op). */
  delivery_reader_cuts: number;
  /**
   * The host's longest event-loop task during the run, ms: its event-loop delay max
   * (`nodejs_eventloop_lag_max_seconds`, reset by each scrape: one scrape before the run, one after).
   */
  loop_max_ms: number;
}

/** The host's event-loop delay max since the last scrape, ms (prom-client resets it on each scrape). */
async function loopMaxMs(metricsUrl: string): Promise<number> {
  const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(60_000) })).text();
  // `nodejs_eventloop_lag_max_seconds{host_instance="…"} 0.123`
  const line = text.split('\n').find((l) => /^nodejs_eventloop_lag_max_seconds[{ ]/.test(l));
  return line === undefined ? NaN : Number(line.slice(line.lastIndexOf(' ') + 1)) * 1000;
}

/** Event-loop thread CPU of a process in ns (Linux); null where /proc is not available. */
function mainThreadCpuNs(pid: number): number | null {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return null;
  }
}

const TIMEOUT_MS = 600_000;

async function post(
  http: HostHttp,
  agentId: string,
  text: string,
  delivery: Record<string, unknown>,
  conversationId?: string,
) {
  const r = (await http.expect(202, 'POST', '/v1/events', {
    agent_id: agentId,
    event: { event_type: 'message.received', source: 'api' },
    actor: { actor_type: 'user', actor_id: 'bench' },
    input: { text },
    delivery,
    ...(conversationId ? { conversation: { conversation_id: conversationId } } : {}),
  })) as { run_id: string };
  return r.run_id;
}

/** Until `stop()`: short echo runs one after another, and /health/live every 20 ms; latencies in ms. */
function concurrentLoad(http: HostHttp, probeAgent: string) {
  let running = true;
  const runs: number[] = [];
  const health: number[] = [];
  let failures = 0;
  const probes = (async () => {
    while (running) {
      const t0 = performance.now();
      try {
        const runId = await post(http, probeAgent, 'ping pong', { surface: 'webhook' });
        await readSse(http, `/v1/runs/${runId}/events`, () => undefined, TIMEOUT_MS);
        runs.push(performance.now() - t0);
      } catch {
        failures++; // e.g. no answer within the client's timeout: the host's loop is stuck
      }
    }
  })();
  const healthLoop = (async () => {
    while (running) {
      const t0 = performance.now();
      try {
        const res = await fetch(http.url('/health/live'), { signal: AbortSignal.timeout(15_000) });
        await res.arrayBuffer();
        health.push(performance.now() - t0);
      } catch {
        failures++;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    async stop() {
      running = false;
      await Promise.all([probes, healthLoop]);
      return { runs, health, failures };
    },
  };
}

export async function longMessageRun(
  http: HostHttp,
  hostPid: number,
  agentId: string,
  probeAgent: string,
  c: LongCase,
  expected: string,
  metricsUrl: string,
): Promise<LongResult> {
  await loopMaxMs(metricsUrl); // resets the max: what the next scrape reads is this run's
  const load = concurrentLoad(http, probeAgent);
  const t0 = performance.now();
  // In a conversation of its own: its end writes the answer's transcript row too, as a chat's run does.
  const runId = await post(http, agentId, 'long', c.delivery.context, `bench-long-${randomUUID()}`);
  const cpu: number[] = [];
  const messages = new Map<string, string>();
  let ops = 0;
  let lastOp = 0;
  let cuts = 0;
  await Promise.all([
    readSse(
      http,
      `/v1/runs/${runId}/events`,
      (e) => {
        if (e.event === 'message.delta') {
          cpu.push(mainThreadCpuNs(hostPid) ?? NaN);
        }
      },
      TIMEOUT_MS,
    ),
    (async () => {
      // A reader the host cuts (behind by more than SSE_MAX_BACKLOG_BYTES: one op of a huge answer
      // can be) resumes after the last op it got, as a client does; the cuts are counted.
      for (;;) {
        try {
          await readSse(
            http,
            `/v1/runs/${runId}/deliveries${lastOp > 0 ? `?after=${lastOp}` : ''}`,
            (e) => {
              ops++;
              lastOp = Number(e.id);
              const op = JSON.parse(e.data) as {
                delivery_id: string;
                op: string;
                target_delivery_id: string | null;
                payload: { text?: string };
              };
              if (op.op === 'message.send' || (op.op === 'message.final' && op.target_delivery_id === null)) {
                messages.set(op.delivery_id, op.payload.text ?? '');
              } else if (op.op === 'message.edit' || op.op === 'message.final') {
                messages.set(op.target_delivery_id ?? '', op.payload.text ?? '');
              }
            },
            TIMEOUT_MS,
          );
          return;
        } catch (e) {
          if (!(e instanceof Error && e.message.includes('aborted while streaming')) || cuts >= 20) {
            throw e;
          }
          cuts++;
        }
      }
    })(),
  ]);
  const wall = performance.now() - t0;
  const { runs, health, failures } = await load.stop();
  const loopMax = await loopMaxMs(metricsUrl);
  // Windows of 20 % of the deltas, leaving out the first and the last 5 % (start-up; the end of the run).
  const at = (share: number) => Math.min(cpu.length - 1, Math.floor(cpu.length * share));
  const perDelta = (from: number, to: number) => (to > from ? (cpu[to] - cpu[from]) / (to - from) / 1000 : NaN);
  const runStats = summarize(runs);
  const healthStats = summarize(health);
  return {
    deltas: cpu.length,
    wall_ms: wall,
    cpu_us_per_delta_start: perDelta(at(0.05), at(0.25)),
    cpu_us_per_delta_end: perDelta(at(0.75), at(0.95)),
    ops,
    shown_equals_streamed: [...messages.values()].join('') === expected,
    probe_runs: runStats.count,
    probe_run_p50_ms: runStats.p50,
    probe_run_max_ms: runStats.max,
    health_p50_ms: healthStats.p50,
    health_max_ms: healthStats.max,
    probe_failures: failures,
    delivery_reader_cuts: cuts,
    loop_max_ms: loopMax,
  };
}
