import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import { scripts, type RecordedRequest } from '@libs/testing';
import { readSse } from '../common/sse';
import type { LocalAgentFixture } from './fixture';

/*
 * What one bench run measures. Times come from the scripted provider's own clock (the moment a
 * request arrived, the moment its answer was fully written): the gap between the end of one
 * model answer and the arrival of the run's next model request is time the host spent — reading
 * the stream's end, emitting results, running the tool batch through the gate, assembling the
 * next request — and nothing of the provider's or a tool's waiting.
 */

export interface TurnSample {
  /** POST /v1/events → the run's first model request at the provider. */
  start_ms: number;
  /** Answer end → next model request, one per tool turn. */
  gaps_ms: number[];
}

const chats = (reqs: RecordedRequest[]) => reqs.filter((r) => r.path.endsWith('/chat/completions'));

/** Waits for the run's terminal result on its result stream (SSE). */
async function finished(f: LocalAgentFixture, runId: string): Promise<string> {
  let last = '';
  await readSse(f.http, `/v1/runs/${runId}/events`, (e) => (last = e.event), 60_000);
  return last;
}

/**
 * `runs` runs in a row, each of `toolTurns` model turns asking for `callsPerTurn` parallel calls
 * of current_time, then a final answer. Returns the samples and the model requests of the last
 * run (the baseline replays them).
 */
export async function toolTurns(
  f: LocalAgentFixture,
  agentId: string,
  runs: number,
  toolTurnsPerRun: number,
  callsPerTurn: number,
): Promise<{ samples: TurnSample[]; lastRequests: RecordedRequest[] }> {
  const samples: TurnSample[] = [];
  let lastRequests: RecordedRequest[] = [];
  for (let r = 0; r < runs; r++) {
    for (let t = 0; t < toolTurnsPerRun; t++) {
      f.model.chat(
        scripts.toolCalls(
          Array.from({ length: callsPerTurn }, (_, i) => ({
            id: `call_${r}_${t}_${i}`,
            name: 'current_time',
            arguments: '{"timezone":"UTC"}',
          })),
        ),
      );
    }
    f.model.chat(scripts.reply('All done: the times are above.'));
    const before = f.model.requests.length;
    const posted = performance.now();
    const runId = await f.start(agentId, 'What time is it, several times over?');
    const outcome = await finished(f, runId);
    if (outcome !== 'run.completed') {
      throw new Error(`run ${runId} ended with ${outcome}, not run.completed`);
    }
    const reqs = chats(f.model.requests.slice(before));
    if (reqs.length !== toolTurnsPerRun + 1) {
      throw new Error(`run ${runId} made ${reqs.length} model requests, not ${toolTurnsPerRun + 1}`);
    }
    const gaps: number[] = [];
    for (let i = 1; i < reqs.length; i++) {
      gaps.push(reqs[i].received_ms - reqs[i - 1].answered_ms!);
    }
    samples.push({ start_ms: reqs[0].received_ms - posted, gaps_ms: gaps });
    lastRequests = reqs;
  }
  f.model.requests.length = 0; // the recorded bodies grow with every turn: keep only what is needed
  return { samples, lastRequests };
}

/**
 * The same-run floor: a client that does nothing between model turns. The openai SDK in this
 * process sends the host's recorded requests of one run back to back (same bodies, same streamed
 * answers); the gap between an answer's end and the next request is the SDK's and the loopback's
 * share of a turn.
 */
export async function sdkFloor(
  f: LocalAgentFixture,
  requests: RecordedRequest[],
  rounds: number,
  callsPerTurn: number,
): Promise<number[]> {
  const client = new OpenAI({ baseURL: f.model.baseUrl, apiKey: 'floor', maxRetries: 0 });
  const gaps: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const before = f.model.requests.length;
    for (let i = 0; i < requests.length; i++) {
      f.model.chat(
        i < requests.length - 1
          ? scripts.toolCalls(
              Array.from({ length: callsPerTurn }, (_, c) => ({
                id: `floor_${i}_${c}`,
                name: 'current_time',
                arguments: '{"timezone":"UTC"}',
              })),
            )
          : scripts.reply('All done: the times are above.'),
      );
      const stream = await client.chat.completions.create({ ...requests[i].body, stream: true } as never);
      for await (const _chunk of stream as unknown as AsyncIterable<unknown>) {
        // read to the end, as the host does
      }
    }
    const reqs = chats(f.model.requests.slice(before));
    for (let i = 1; i < reqs.length; i++) {
      gaps.push(reqs[i].received_ms - reqs[i - 1].answered_ms!);
    }
    f.model.requests.length = 0;
  }
  return gaps;
}

export interface MemoryFigures {
  concurrent: number;
  idle_rss_mib: number;
  active_rss_mib: number;
  after_rss_mib: number;
  per_run_kib: number;
}

/**
 * Host RSS with `n` runs active at once, each holding an open model stream (the provider never
 * answers), next to the idle RSS of the same host after warm-up; then every run is cancelled.
 */
export async function memoryAt(f: LocalAgentFixture, agentId: string, n: number): Promise<MemoryFigures> {
  await sleep(500);
  const idle = f.rssMiB();
  const before = f.model.requests.length;
  for (let i = 0; i < n; i++) {
    f.model.chat(scripts.hang());
  }
  const runIds: string[] = [];
  for (let i = 0; i < n; i += 10) {
    runIds.push(
      ...(await Promise.all(Array.from({ length: Math.min(10, n - i) }, () => f.start(agentId, 'Hold on.')))),
    );
  }
  const until = Date.now() + 60_000;
  while (chats(f.model.requests.slice(before)).length < n) {
    if (Date.now() > until) {
      throw new Error(`only ${chats(f.model.requests.slice(before)).length} of ${n} runs reached the model`);
    }
    await sleep(50);
  }
  await sleep(500);
  const active = f.rssMiB();
  const running = (await Promise.all(runIds.map((id) => f.status(id)))).filter((s) => s === 'running').length;
  if (running !== n) {
    throw new Error(`${running} of ${n} runs were running at the memory sample`);
  }
  for (let i = 0; i < runIds.length; i += 10) {
    await Promise.all(runIds.slice(i, i + 10).map((id) => f.http.expect(200, 'POST', `/v1/runs/${id}/cancel`, {})));
  }
  const settled = Date.now() + 60_000;
  while ((await Promise.all(runIds.map((id) => f.status(id)))).some((s) => s === 'running')) {
    if (Date.now() > settled) {
      throw new Error('cancelled runs did not end within 60 s');
    }
    await sleep(200);
  }
  f.model.requests.length = 0;
  await sleep(500);
  return {
    concurrent: n,
    idle_rss_mib: idle,
    active_rss_mib: active,
    after_rss_mib: f.rssMiB(),
    per_run_kib: ((active - idle) * 1024) / n,
  };
}
