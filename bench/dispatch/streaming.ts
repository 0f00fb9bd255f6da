import { performance } from 'node:perf_hooks';
import type { HostHttp } from '../common/http';
import { cpuMs, selfCpuMs } from '../common/proc';
import { readSse } from '../common/sse';
import { ResultOrder } from './result-order';
import { summarize, type Summary } from '../common/stats';

/*
 * Streaming level: `runs` runs started at once, each streaming `deltasPerRun` message.delta
 * results (demo runner, mode echo, chunk_delay_ms 0: one content-only delta per word), each
 * run followed by `readers` SSE readers attached right after its 202. Every
 * reader must see every delta in sequence order and then run.completed. Wall time runs from the
 * first POST sent to the last terminal result seen by any reader.
 */

export interface StreamingCase {
  runs: number;
  deltasPerRun: number;
  readers: number;
}

/** The sizes issue 7 states the streaming target for (`--streaming-cases` picks others). */
export const STREAMING_CASES: StreamingCase[] = [
  { runs: 1, deltasPerRun: 2_000, readers: 1 },
  { runs: 1, deltasPerRun: 2_000, readers: 10 },
  { runs: 100, deltasPerRun: 200, readers: 1 },
  { runs: 100, deltasPerRun: 200, readers: 10 },
];

export interface StreamingResult extends StreamingCase {
  elapsedMs: number;
  /** message.delta events received, summed over all readers of all runs. */
  deltasReceived: number;
  /** Deltas ingested and delivered to every reader, per second: deltasReceived ÷ readers ÷ wall. */
  deltasPerS: number;
  /** SSE delta events written to readers per second: deltasReceived ÷ wall. */
  deliveriesPerS: number;
  /** POST sent → run.completed at the last of the run's readers. */
  terminal: Summary;
  cpu: { host: number; runner: number; client: number };
  failures: string[];
}

/** n one-letter words: the echo runner sends exactly n deltas. */
export function streamingText(n: number): string {
  return Array.from({ length: n }, () => 'a').join(' ');
}

interface ReaderOutcome {
  deltas: number;
  terminalMs: number;
}

async function readRun(http: HostHttp, runId: string, t0: number, timeoutMs: number): Promise<ReaderOutcome> {
  let deltas = 0;
  let terminalMs = NaN;
  const order = new ResultOrder();
  await readSse(
    http,
    `/v1/runs/${runId}/events`,
    (e) => {
      if (order.see(e)) {
        terminalMs = performance.now() - t0;
      } else if (!order.terminal && e.event === 'message.delta') {
        deltas++;
      }
    },
    timeoutMs,
  );
  const problems = order.problems;
  const terminal = order.terminal?.event;
  if (terminal !== 'run.completed') {
    problems.push(terminal ? `ended with ${terminal}` : 'SSE ended without a terminal result');
  }
  if (problems.length > 0) {
    throw new Error(`run ${runId}: ${problems.slice(0, 3).join('; ')}`);
  }
  return { deltas, terminalMs };
}

export async function streamingLevel(
  http: HostHttp,
  agentId: string,
  c: StreamingCase,
  pids: { host: number; runner: number },
  timeoutMs: number,
): Promise<StreamingResult> {
  const text = streamingText(c.deltasPerRun);
  const failures: string[] = [];
  const terminals: number[] = [];
  let deltasReceived = 0;
  const cpu0 = { host: cpuMs(pids.host), runner: cpuMs(pids.runner), client: selfCpuMs() };
  const t0 = performance.now();
  const one = async (i: number): Promise<void> => {
    const res = await http.json(
      'POST',
      '/v1/events',
      {
        agent_id: agentId,
        event: { event_type: 'message.received', source: 'api' },
        conversation: { conversation_id: `stream-${Math.round(t0)}-${i}` },
        input: { text },
      },
      timeoutMs,
    );
    const body = res.body as { run_id?: string } | null;
    if (res.status !== 202 || !body?.run_id) {
      throw new Error(`POST /v1/events: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
    }
    const runId = body.run_id;
    const outcomes = await Promise.all(Array.from({ length: c.readers }, () => readRun(http, runId, t0, timeoutMs)));
    for (const o of outcomes) {
      deltasReceived += o.deltas;
      if (o.deltas !== c.deltasPerRun) {
        failures.push(`run ${runId}: a reader saw ${o.deltas} deltas, expected ${c.deltasPerRun}`);
      }
    }
    terminals.push(Math.max(...outcomes.map((o) => o.terminalMs)));
  };
  const settled = await Promise.allSettled(Array.from({ length: c.runs }, (_, i) => one(i)));
  const elapsedMs = performance.now() - t0;
  for (const s of settled) {
    if (s.status === 'rejected') {
      failures.push(s.reason instanceof Error ? s.reason.message : String(s.reason));
    }
  }
  return {
    ...c,
    elapsedMs,
    deltasReceived,
    deltasPerS: (deltasReceived * 1000) / c.readers / elapsedMs,
    deliveriesPerS: (deltasReceived * 1000) / elapsedMs,
    terminal: summarize(terminals),
    cpu: {
      host: cpuMs(pids.host) - cpu0.host,
      runner: cpuMs(pids.runner) - cpu0.runner,
      client: selfCpuMs() - cpu0.client,
    },
    failures,
  };
}
