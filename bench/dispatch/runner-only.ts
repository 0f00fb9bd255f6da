import * as os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { runMain, UsageError } from '../common/cli';
import { writeJson } from '../common/json-out';
import { cpuMs } from '../common/proc';
import { machineLine } from '../common/report';
import { fmtNum, markdownTable } from '../common/stats';
import { loadGateway } from './gateway-proto';
import { RUNNER_ID, startRunner } from './host-fixture';
import type { RunnerKind } from './options';
import { INPUT_TEXT } from './phase';
import { toStruct } from './raw-runner/struct';

/*
 * The runner alone (bench/dispatch/README.md#the-runner-alone): each runner (`raw`, `sdk`) against
 * a gateway-only fake host in this process — no database, no HTTP, no run core — that keeps
 * `--concurrency` echo runs in flight (the run request of a bench run: the same context fields,
 * input text and config) and starts the next run when one ends. Rounds alternate between the
 * runners so that a busy machine weighs on both alike; the figures are the runner's own: runs/s
 * (bounded by the runner and this process), runner CPU per run, frames and results per run.
 *
 *   node dist/bench/dispatch/runner-only.js [--runner raw,sdk] [--concurrency 16] [--seconds 5] [--rounds 3] [--json FILE]
 */

export const RUNNER_ONLY_USAGE = `usage: node dist/bench/dispatch/runner-only.js [options]
  --runner LIST      raw,sdk (default), or one of them
  --concurrency N    runs in flight (default 16)
  --seconds N        measured seconds per round (default 5)
  --rounds N         rounds per runner, alternating (default 3)
  --json FILE        also write the figures as JSON
  -h, --help         this text`;

interface Options {
  runners: RunnerKind[];
  concurrency: number;
  seconds: number;
  rounds: number;
  json: string | null;
}

const WARMUP_MS = 1_500;

interface Round {
  runner: RunnerKind;
  round: number;
  runs: number;
  runs_per_s: number;
  runner_cpu_us_per_run: number;
  frames_per_run: number;
  results_per_run: number;
  failed: number;
}

function positiveInt(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) {
    return fallback;
  }
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) {
    throw new UsageError(`${name}: "${text}" is not an integer ≥ 1`);
  }
  return n;
}

function parseOptions(argv: string[]): Options | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        runner: { type: 'string' },
        concurrency: { type: 'string' },
        seconds: { type: 'string' },
        rounds: { type: 'string' },
        json: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  if (values.help) {
    return 'help';
  }
  const runners = (values.runner ?? 'raw,sdk').split(',').map((s) => s.trim());
  for (const r of runners) {
    if (r !== 'raw' && r !== 'sdk') {
      throw new UsageError(`--runner: "${r}" is not one of raw, sdk`);
    }
  }
  return {
    runners: [...new Set(runners)] as RunnerKind[],
    concurrency: positiveInt('--concurrency', values.concurrency, 16),
    seconds: positiveInt('--seconds', values.seconds, 5),
    rounds: positiveInt('--rounds', values.rounds, 3),
    json: values.json ?? null,
  };
}

/** The run request of a bench run (what the host sends for POST /v1/events with the echo agent). */
function runRequest(runId: string): object {
  const now = Date.now() / 1000;
  return {
    runner_id: RUNNER_ID,
    runner_name: 'default',
    traceparent: '',
    context: {
      run_id: runId,
      trigger: { type: 'message.received', source: 'api', timestamp: Math.floor(now) },
      event: { event_id: `e-${runId}`, event_type: 'message.received', source: 'api', data: toStruct({}) },
      conversation: { conversation_id: 'c-0', workspace_id: 'default' },
      input: { text: INPUT_TEXT, contents: [], attachments: [] },
      delivery: { surface: 'api', supports_streaming: true, platform_capabilities: toStruct({}) },
      resources: {
        models: [],
        tools: [],
        knowledge_bases: [],
        storage: {},
        platform_capabilities: toStruct({}),
      },
      context: {
        inline_policy: { mode: 'current_event', reason: 'current_event_only' },
        available_apis: { state: true, run_get: true },
        conversation_id: 'c-0',
        event_seq: 1,
      },
      state: {
        conversation: toStruct({ 'external.conversation_id': 'c-0' }),
        actor: toStruct({}),
        subject: toStruct({}),
        runner: toStruct({}),
      },
      runtime: {
        host: 'runner-host',
        protocol_version: '1',
        trace_id: runId,
        metadata: toStruct({ agent_id: 'bench', model_context_window_tokens: null }),
        deadline_at: now + 300,
      },
      config: toStruct({ mode: 'echo' }),
      metadata: toStruct({ agent_id: 'bench' }),
    },
  };
}

interface WireResult {
  run_id: string;
  type: string;
}

/** One round: a fresh fake gateway and runner process, warm-up, then `seconds` measured. */
async function runRound(kind: RunnerKind, round: number, o: Options): Promise<Round> {
  const counters = { runs: 0, frames: 0, results: 0, failed: 0 };
  let next = 0;
  let connected!: () => void;
  const helloSeen = new Promise<void>((resolve) => (connected = resolve));
  const server = new grpc.Server();
  server.addService(loadGateway().service, {
    Connect: (call: grpc.ServerDuplexStream<Record<string, unknown>, object>) => {
      const startRun = () => call.write({ run: runRequest(`r-${++next}`) });
      call.on('data', (m: { hello?: object; result?: WireResult; results?: { results: WireResult[] } }) => {
        if (m.hello) {
          call.write({
            welcome: {
              session_id: 'runner-only',
              host_version: 'bench',
              protocol_version: '1',
              runners: [{ runner_id: RUNNER_ID, name: 'default' }],
              rejected: [],
              heartbeat_interval_ms: 5_000,
            },
          });
          for (let i = 0; i < o.concurrency; i++) {
            startRun();
          }
          connected();
          return;
        }
        const results = m.results?.results ?? (m.result ? [m.result] : []);
        if (results.length === 0) {
          return; // heartbeat or pong
        }
        counters.frames += 1;
        counters.results += results.length;
        for (const r of results) {
          if (r.type === 'run.completed' || r.type === 'run.failed') {
            counters.runs += 1;
            counters.failed += r.type === 'run.failed' ? 1 : 0;
            startRun();
          }
        }
      });
      call.on('error', () => undefined);
      call.on('end', () => call.end());
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  const runner = startRunner(kind, `127.0.0.1:${port}`, 'runner-only-token', 'ignore');
  try {
    await Promise.race([
      helloSeen,
      sleep(15_000).then(() => {
        throw new Error(`${kind} runner: no hello within 15 s`);
      }),
    ]);
    await sleep(WARMUP_MS);
    const before = { ...counters, cpu: cpuMs(runner.pid), t: performance.now() };
    await sleep(o.seconds * 1000);
    const after = { ...counters, cpu: cpuMs(runner.pid), t: performance.now() };
    const runs = after.runs - before.runs;
    const per = (n: number) => (runs > 0 ? n / runs : NaN);
    return {
      runner: kind,
      round,
      runs,
      runs_per_s: Math.round((runs * 1000) / (after.t - before.t)),
      runner_cpu_us_per_run: Math.round(per((after.cpu - before.cpu) * 1000)),
      frames_per_run: Math.round(per(after.frames - before.frames) * 100) / 100,
      results_per_run: Math.round(per(after.results - before.results) * 100) / 100,
      failed: after.failed - before.failed,
    };
  } finally {
    await runner.stop();
    server.forceShutdown();
  }
}

const pct = (a: number, b: number): string => `${Math.round((100 * a) / b)} %`;

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

async function main(): Promise<number> {
  const o = parseOptions(process.argv.slice(2));
  if (o === 'help') {
    process.stdout.write(`${RUNNER_ONLY_USAGE}\n`);
    return 0;
  }
  const load = os.loadavg()[0];
  const rounds: Round[] = [];
  for (let round = 1; round <= o.rounds; round++) {
    for (const kind of o.runners) {
      process.stderr.write(
        `bench: runner-only: ${kind}, round ${round}/${o.rounds}, c${o.concurrency}, ${o.seconds} s\n`,
      );
      rounds.push(await runRound(kind, round, o));
    }
  }
  const medians = o.runners.map((runner) => {
    const mine = rounds.filter((r) => r.runner === runner);
    return {
      runner,
      runs_per_s: median(mine.map((r) => r.runs_per_s)),
      runner_cpu_us_per_run: median(mine.map((r) => r.runner_cpu_us_per_run)),
      /** The least disturbed round: on a busy machine the best estimate of the runner's own cost. */
      runner_cpu_us_per_run_min: Math.min(...mine.map((r) => r.runner_cpu_us_per_run)),
      frames_per_run: median(mine.map((r) => r.frames_per_run)),
      results_per_run: median(mine.map((r) => r.results_per_run)),
    };
  });
  const lines = [
    `## The runner alone (gateway-only fake host, c${o.concurrency}, ${o.seconds} s × ${o.rounds} rounds)`,
    '',
    `${machineLine()}; 1-min load average ${load.toFixed(2)} at start, ${os.loadavg()[0].toFixed(2)} at end`,
    '',
    markdownTable(
      ['runner', 'round', 'runs/s', 'runner CPU/run', 'frames/run', 'results/run', 'failed'],
      rounds.map((r) => [
        r.runner,
        String(r.round),
        fmtNum(r.runs_per_s),
        `${r.runner_cpu_us_per_run} µs`,
        r.frames_per_run.toFixed(2),
        r.results_per_run.toFixed(2),
        String(r.failed),
      ]),
    ),
    '',
    markdownTable(
      ['runner (median)', 'runs/s', 'runner CPU/run', 'runner CPU/run (min)', 'frames/run', 'results/run'],
      medians.map((m) => [
        m.runner,
        fmtNum(m.runs_per_s),
        `${m.runner_cpu_us_per_run} µs`,
        `${m.runner_cpu_us_per_run_min} µs`,
        m.frames_per_run.toFixed(2),
        m.results_per_run.toFixed(2),
      ]),
    ),
  ];
  const raw = medians.find((m) => m.runner === 'raw');
  const sdk = medians.find((m) => m.runner === 'sdk');
  if (raw && sdk) {
    lines.push(
      '',
      `sdk / raw (medians): runs/s ${pct(sdk.runs_per_s, raw.runs_per_s)}, runner CPU per run ${pct(sdk.runner_cpu_us_per_run, raw.runner_cpu_us_per_run)} (min ${pct(sdk.runner_cpu_us_per_run_min, raw.runner_cpu_us_per_run_min)})`,
    );
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  if (o.json) {
    writeJson(o.json, { bench: 'dispatch-runner-only', loadavg_1m: load, options: o, rounds, medians });
  }
  return rounds.some((r) => r.failed > 0 || r.runs === 0) ? 1 : 0;
}

if (require.main === module) {
  runMain(main, RUNNER_ONLY_USAGE);
}
