import * as os from 'node:os';
import { performance } from 'node:perf_hooks';
import OpenAI from 'openai';
import { TokenCounter } from '../../libs/resources/src/models/tokenizer';
import { toStruct } from '../dispatch/raw-runner/struct';
import { benchTimeLine, groupLines, machineLine } from '../common/report';
import { cpuMs, selfCpuMs } from '../common/proc';
import { conversation, countLocally } from './conversation';
import { MODEL_ID, ModelsFixture } from './fixture';
import { countLoop, directStream, proxiedStream, streamLevel, type StreamSample } from './measure';
import { runJsonOnlyBench } from '../common/cli';
import { writeJson } from '../common/json-out';
import { modelsJson } from './json-out';
import { countTable, ratioTable, streamTable, type MeasuredStreamLevel } from './report';

/*
 * Models benchmark: the overhead of a StreamModel proxied by the host (plugin → gRPC → host →
 * openai SDK → provider) over the openai SDK calling the same provider directly, in the same
 * run: time to first content chunk, stream time and chunks/s, at concurrency 1 and 8; and
 * count_tokens of a 100k-token conversation through the host, next to counting it in process.
 * The provider is the scripted OpenAI-compatible server (libs/testing) in its own process.
 *
 *   npm run bench:models -- [--json FILE]   (builds, then runs dist/bench/models/main.js; about a minute)
 *
 * Exits 1 if a call fails, metering is missing, or the host logs anything (LOG_LEVEL=warn); 2 on a
 * bad option.
 */

const CHUNKS = 200;
const LEVELS: { concurrency: number; streams: number }[] = [
  { concurrency: 1, streams: 300 },
  { concurrency: 8, streams: 600 },
];
const WARMUP_STREAMS = 50;
const COUNT_TOKENS = 100_000;
const COUNT_CALLS = 20;
const COUNT_WARMUP = 2;

const progress = (msg: string): void => {
  process.stderr.write(`bench: ${msg}\n`);
};

async function main(opts: { json: string | null }): Promise<number> {
  const started = performance.now();
  const loadBefore = os.loadavg()[0];
  progress('starting the scripted provider and the host');
  const fx = await ModelsFixture.start(CHUNKS);
  const failures: string[] = [];
  const levels: MeasuredStreamLevel[] = [];
  let proxiedCalls = 0;
  let hostCount: Awaited<ReturnType<typeof countLoop>> | null = null;
  let localCount: Awaited<ReturnType<typeof countLoop>> | null = null;
  const convo = conversation(COUNT_TOKENS);
  try {
    const sdk = new OpenAI({ apiKey: fx.key, baseURL: fx.providerBaseUrl, maxRetries: 0, logLevel: 'off' });
    const request = {
      run_id: fx.runId,
      model_id: MODEL_ID,
      messages: [toStruct({ role: 'user', content: 'stream please' })],
    };
    const paths: { path: 'direct' | 'proxied'; once: () => Promise<StreamSample> }[] = [
      { path: 'direct', once: directStream(sdk, 'scripted-bench', CHUNKS) },
      { path: 'proxied', once: proxiedStream(fx.plugin, request, CHUNKS) },
    ];
    for (const { path, once } of paths) {
      progress(`warm-up: ${WARMUP_STREAMS} ${path} streams`);
      const warm = await streamLevel(path, 4, WARMUP_STREAMS, once);
      failures.push(...warm.failures);
      proxiedCalls += path === 'proxied' ? WARMUP_STREAMS : 0;
    }
    for (const { concurrency, streams } of LEVELS) {
      for (const { path, once } of paths) {
        progress(`${path}: ${streams} streams of ${CHUNKS} chunks at concurrency ${concurrency}`);
        const cpu0 = { host: cpuMs(fx.host.pid), provider: cpuMs(fx.scripted.pid), client: selfCpuMs() };
        const level = await streamLevel(path, concurrency, streams, once);
        const per = (ms: number) => ms / Math.max(1, level.streams);
        levels.push({
          ...level,
          cpu: {
            host: per(cpuMs(fx.host.pid) - cpu0.host),
            provider: per(cpuMs(fx.scripted.pid) - cpu0.provider),
            client: per(selfCpuMs() - cpu0.client),
          },
        });
        failures.push(...level.failures);
        proxiedCalls += path === 'proxied' ? streams : 0;
      }
    }
    progress(`count_tokens: ${convo.messages.length} messages, ${convo.tokens} tokens, ${COUNT_CALLS} calls`);
    const structs = convo.messages.map((m) => toStruct(m));
    hostCount = await countLoop(COUNT_CALLS, COUNT_WARMUP, async () => {
      const res = await fx.plugin.unary<{ tokens: number }>('CountTokens', {
        run_id: fx.runId,
        model_id: MODEL_ID,
        messages: structs,
      });
      return res.tokens;
    });
    const counter = new TokenCounter('o200k_base');
    localCount = await countLoop(COUNT_CALLS, COUNT_WARMUP, () =>
      Promise.resolve(countLocally(counter, convo.messages)),
    );
    if (hostCount.tokens !== convo.tokens || localCount.tokens !== convo.tokens) {
      failures.push(
        `count_tokens: host ${hostCount.tokens}, in process ${localCount.tokens}, expected ${convo.tokens}`,
      );
    }
  } catch (e) {
    failures.push(e instanceof Error ? e.message : String(e));
  } finally {
    progress('stopping');
    await fx.stop();
  }

  const usage = fx.usageRows();
  const streamRows = usage.filter((r) => r.operation === 'stream');
  const hostLines = fx.hostLogLines();
  const keyLeaks = hostLines.filter((l) => l.includes(fx.key)).length;
  const out = [
    '## Runner Host models benchmark (StreamModel proxy overhead, count_tokens)',
    '',
    `machine: ${machineLine()}; bench client, host and provider share these cores`,
    `setup: scripted OpenAI-compatible provider (libs/testing, node:http) and the built host (SQLite, LOG_LEVEL=warn) as child processes;`,
    `       each stream: ${CHUNKS} content chunks + finish + usage chunk + [DONE] (SSE); the bench process calls it with the openai SDK (direct)`,
    `       and as a hand-driven runner plugin over gRPC StreamModel during a run (proxied: guard + audit + SDK + chunk mapping + model_usage row);`,
    `       closed loops, ${WARMUP_STREAMS} warm-up streams per path; TTFC = call start → first content chunk`,
    '',
    '### StreamModel proxied by the host vs the SDK calling the provider directly',
    '',
    streamTable(levels),
    '',
    '### Overhead of the host (proxied / direct)',
    '',
    ratioTable(levels),
    '',
    `### count_tokens, ${fmtK(convo.tokens)}-token conversation (${convo.messages.length} messages, ${fmtK(convo.jsonBytes / 1024)} KiB JSON, o200k_base)`,
    '',
    hostCount && localCount
      ? countTable([
          { label: 'CountTokens over gRPC, host (mapping + js-tiktoken)', result: hostCount },
          { label: 'in the bench process (same mapping + TokenCounter)', result: localCount },
        ])
      : '(not measured)',
    '',
    '### Checks',
    '',
    `- model_usage rows for the run: ${streamRows.length} stream (expected ${proxiedCalls}), of which complete: ${streamRows.filter((r) => Number(r.complete) === 1).length}`,
    `- host log lines (LOG_LEVEL=warn): ${hostLines.length}; lines containing the API key: ${keyLeaks}`,
    '- CPU per stream: /proc/<pid>/stat utime+stime deltas over each level (10 ms ticks) ÷ streams',
    '',
    benchTimeLine(started, loadBefore),
  ];
  process.stdout.write(out.join('\n') + '\n');
  if (opts.json) {
    const meta = {
      chunks_per_stream: CHUNKS,
      count_tokens_conversation_tokens: convo.tokens,
      model_usage_stream_rows: streamRows.length,
      model_usage_stream_rows_expected: proxiedCalls,
      total_s: Math.round(performance.now() - started) / 1000,
    };
    writeJson(opts.json, modelsJson(levels, { host: hostCount, local: localCount }, meta));
  }

  const problems = [
    ...failures.map((f) => `failed: ${f}`),
    ...(streamRows.length !== proxiedCalls
      ? [`model_usage has ${streamRows.length} stream rows, expected ${proxiedCalls}`]
      : []),
    ...hostLines.map((l) => `host log: ${l}`),
  ];
  if (problems.length > 0) {
    process.stdout.write(
      `\n### Problems\n\n${groupLines(problems).slice(0, 40).join('\n')}\n\nlogs kept in ${fx.dataDir}\n`,
    );
    return 1;
  }
  fx.removeDataDir();
  return 0;
}

function fmtK(n: number): string {
  return n >= 1000 ? `${(n / 1000).toFixed(1)}k` : n.toFixed(0);
}

runJsonOnlyBench('models', main);
