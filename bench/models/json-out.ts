import { machineJson, num } from '../common/json-out';
import type { CountResult } from './measure';
import type { MeasuredStreamLevel } from './report';

/*
 * The --json output of the models bench. Its floors are the same-run direct paths: the
 * openai SDK calling the scripted provider from the bench process, and counting tokens in process.
 */

const streamJson = (l: MeasuredStreamLevel) => ({
  concurrency: l.concurrency,
  streams: l.streams,
  failed: l.failures.length,
  ttfc_p50_ms: num(l.ttfc.p50),
  ttfc_p99_ms: num(l.ttfc.p99),
  stream_p50_ms: num(l.total.p50),
  stream_p99_ms: num(l.total.p99),
  chunks_per_s: num(l.chunksPerSec),
  host_cpu_ms_per_stream: num(l.cpu.host),
  provider_cpu_ms_per_stream: num(l.cpu.provider),
  client_cpu_ms_per_stream: num(l.cpu.client),
});

const countJson = (c: CountResult | null) =>
  c
    ? {
        calls: c.latency.count,
        p50_ms: num(c.latency.p50),
        p99_ms: num(c.latency.p99),
        calls_per_s: num(c.callsPerSec),
        tokens: c.tokens,
      }
    : null;

export function modelsJson(
  levels: MeasuredStreamLevel[],
  count: { host: CountResult | null; local: CountResult | null },
  meta: Record<string, unknown>,
): Record<string, unknown> {
  return {
    bench: 'models',
    ...meta,
    machine: machineJson(),
    streams: levels.filter((l) => l.path === 'proxied').map(streamJson),
    count_tokens: countJson(count.host),
    floors: {
      direct_streams: levels.filter((l) => l.path === 'direct').map(streamJson),
      count_tokens_in_process: countJson(count.local),
    },
  };
}
