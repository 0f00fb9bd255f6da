import { performance } from 'node:perf_hooks';
import type OpenAI from 'openai';
import { summarize, type Summary } from '../common/stats';
import type { BenchPlugin, StreamItem } from './plugin-client';

/*
 * The measured loops: one streamed completion per call, timed from the call to its first content
 * chunk (TTFC) and to its end, in a closed loop at a given concurrency; and repeated count calls.
 */

export interface StreamSample {
  ttfcMs: number;
  totalMs: number;
  chunks: number;
}

export interface StreamLevel {
  path: 'direct' | 'proxied';
  concurrency: number;
  ttfc: Summary;
  total: Summary;
  /** Content chunks received per second over the level's wall time (all streams together). */
  chunksPerSec: number;
  streams: number;
  failures: string[];
}

export async function streamLevel(
  path: StreamLevel['path'],
  concurrency: number,
  streams: number,
  once: () => Promise<StreamSample>,
): Promise<StreamLevel> {
  const samples: StreamSample[] = [];
  const failures: string[] = [];
  let started = 0;
  const t0 = performance.now();
  const worker = async (): Promise<void> => {
    while (started < streams) {
      started++;
      try {
        samples.push(await once());
      } catch (e) {
        failures.push(e instanceof Error ? e.message : String(e));
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const wallMs = performance.now() - t0;
  const chunks = samples.reduce((n, s) => n + s.chunks, 0);
  return {
    path,
    concurrency,
    ttfc: summarize(samples.map((s) => s.ttfcMs)),
    total: summarize(samples.map((s) => s.totalMs)),
    chunksPerSec: chunks / (wallMs / 1000),
    streams: samples.length,
    failures,
  };
}

/** The SDK straight to the provider, as the host itself calls it. */
export function directStream(client: OpenAI, model: string, expectChunks: number): () => Promise<StreamSample> {
  return async () => {
    const t0 = performance.now();
    let first = NaN;
    let chunks = 0;
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'stream please' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const c of stream) {
      if (c.choices[0]?.delta?.content) {
        if (chunks++ === 0) {
          first = performance.now();
        }
      }
    }
    if (chunks !== expectChunks) {
      throw new Error(`direct stream: ${chunks} content chunks, expected ${expectChunks}`);
    }
    return { ttfcMs: first - t0, totalMs: performance.now() - t0, chunks };
  };
}

/** StreamModel through the host, called as the run's plugin. */
export function proxiedStream(
  plugin: BenchPlugin,
  request: Record<string, unknown>,
  expectChunks: number,
): () => Promise<StreamSample> {
  return async () => {
    const t0 = performance.now();
    let first = NaN;
    let chunks = 0;
    let usage = false;
    await plugin.streamModel(request, (item: StreamItem) => {
      if (item.chunk) {
        const fields = item.chunk.fields as Record<string, { boolValue?: boolean }>;
        if (fields.is_final?.boolValue !== true && chunks++ === 0) {
          first = performance.now();
        }
      } else if (item.usage) {
        usage = true;
      }
    });
    if (chunks !== expectChunks || !usage) {
      throw new Error(`proxied stream: ${chunks} content chunks (expected ${expectChunks}), usage item: ${usage}`);
    }
    return { ttfcMs: first - t0, totalMs: performance.now() - t0, chunks };
  };
}

export interface CountResult {
  latency: Summary;
  callsPerSec: number;
  tokens: number;
}

/** `calls` sequential calls of `count` (after `warmup`); every call must give the same count. */
export async function countLoop(calls: number, warmup: number, count: () => Promise<number>): Promise<CountResult> {
  let tokens = -1;
  for (let i = 0; i < warmup; i++) {
    tokens = await count();
  }
  const samples: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) {
    const t = performance.now();
    const n = await count();
    samples.push(performance.now() - t);
    if (tokens !== -1 && n !== tokens) {
      throw new Error(`count_tokens gave ${n}, then ${tokens}`);
    }
    tokens = n;
  }
  return { latency: summarize(samples), callsPerSec: calls / ((performance.now() - t0) / 1000), tokens };
}
