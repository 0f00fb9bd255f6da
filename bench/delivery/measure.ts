import { performance } from 'node:perf_hooks';
import type { HostHttp } from '../common/http';
import { readSse } from '../common/sse';

/*
 * One delivery scenario: `runs` runs of the echo runner streaming `deltas` deltas each, started at
 * once; for each run the bench reads two SSE streams side by side from right after its admission —
 * the raw results (GET /v1/runs/{id}/events, the baseline) and the delivery ops
 * (GET /v1/runs/{id}/deliveries) — stamping every frame on arrival. A delta's added delay is the
 * arrival of the op derived from it (`result_sequence`) minus the arrival of the delta itself.
 */

export interface RunTimes {
  runId: string;
  deltas: number;
  ops: number;
  /** ms from the POST to the last result frame (run.completed) / to the last delivery op. */
  resultsDoneMs: number;
  deliveriesDoneMs: number;
  /** Per delta that produced an op: op arrival − delta arrival, ms. */
  addedMs: number[];
  /** What a platform applying the ops shows at the end: its messages' texts joined. */
  shownText: string;
  completedText: string | null;
}

export interface ScenarioResult {
  runs: number;
  deltasPerRun: number;
  /** Wall time from the first POST to the last frame of every run, per stream. */
  resultsWallMs: number;
  deliveriesWallMs: number;
  times: RunTimes[];
}

const STREAM_TIMEOUT_MS = 300_000;

async function oneRun(
  http: HostHttp,
  agentId: string,
  text: string,
  delivery: Record<string, unknown>,
): Promise<RunTimes> {
  const t0 = performance.now();
  const admitted = (await http.expect(202, 'POST', '/v1/events', {
    agent_id: agentId,
    event: { event_type: 'message.received', source: 'api' },
    actor: { actor_type: 'user', actor_id: 'bench' },
    input: { text },
    delivery,
  })) as { run_id: string };
  const runId = admitted.run_id;
  const resultAt = new Map<number, number>();
  const opAt = new Map<number, number>();
  let resultsDone = 0;
  let deliveriesDone = 0;
  let deltas = 0;
  let ops = 0;
  const messages = new Map<string, string>();
  let completedText: string | null = null;
  await Promise.all([
    readSse(
      http,
      `/v1/runs/${runId}/events`,
      (e) => {
        const now = performance.now();
        resultsDone = now - t0;
        if (e.event === 'message.delta') {
          deltas++;
          resultAt.set(Number(e.id), now);
        } else if (e.event === 'message.completed') {
          completedText = (JSON.parse(e.data) as { data: { message: { content: string } } }).data.message.content;
        }
      },
      STREAM_TIMEOUT_MS,
    ),
    readSse(
      http,
      `/v1/runs/${runId}/deliveries`,
      (e) => {
        const now = performance.now();
        deliveriesDone = now - t0;
        ops++;
        const op = JSON.parse(e.data) as {
          delivery_id: string;
          target_delivery_id: string | null;
          result_sequence: number | null;
          op: string;
          payload: { text?: string };
        };
        if (op.result_sequence !== null && !opAt.has(op.result_sequence)) {
          opAt.set(op.result_sequence, now);
        }
        if (op.op.startsWith('message.')) {
          messages.set(op.target_delivery_id ?? op.delivery_id, op.payload.text ?? '');
        }
      },
      STREAM_TIMEOUT_MS,
    ),
  ]);
  const addedMs: number[] = [];
  for (const [seq, at] of resultAt) {
    const op = opAt.get(seq);
    if (op !== undefined) {
      addedMs.push(op - at);
    }
  }
  return {
    runId,
    deltas,
    ops,
    resultsDoneMs: resultsDone,
    deliveriesDoneMs: deliveriesDone,
    addedMs,
    shownText: [...messages.values()].join(''),
    completedText,
  };
}

export async function scenario(
  http: HostHttp,
  agentId: string,
  runs: number,
  deltasPerRun: number,
  delivery: Record<string, unknown>,
): Promise<ScenarioResult> {
  const text = Array.from({ length: deltasPerRun }, (_, i) => `tok${i}`).join(' ');
  const start = performance.now();
  const offsets: number[] = [];
  const times = await Promise.all(
    Array.from({ length: runs }, async () => {
      offsets.push(performance.now() - start);
      return oneRun(http, agentId, text, delivery);
    }),
  );
  const wall = (pick: (t: RunTimes) => number) => Math.max(...times.map((t, i) => offsets[i] + pick(t)));
  return {
    runs,
    deltasPerRun,
    resultsWallMs: wall((t) => t.resultsDoneMs),
    deliveriesWallMs: wall((t) => t.deliveriesDoneMs),
    times,
  };
}
