import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import { parseArgs } from 'node:util';
import { runMain, UsageError } from '../common/cli';
import { machineJson, writeJson } from '../common/json-out';
import { cpuMs, machineBusyMs } from '../common/proc';
import { HostFixture } from './host-fixture';
import { closedLoop, RunDriver } from './load';

/*
 * Observability overhead, paired (docs/benchmarks.md#observability-overhead): four hosts (SQLite,
 * demo runner, echo agent) started side by side — metrics off, metrics on, metrics on + traces at
 * 100 % sampling, metrics on + traces at 1 % — then c64 closed-loop slices of each, alternated
 * (the order rotates every round), so the machine's drifting load falls on all four alike. Traces
 * go through the host's real exporter (OTLP/HTTP, JSON) to a sink in this process that reads,
 * parses and counts every span and answers 200. Prints each round and the medians with the
 * ratios to the same round's baseline; `--json FILE` writes them.
 *
 *   node dist/bench/dispatch/overhead.js [--rounds 5] [--seconds 6] [--concurrency 64] [--json FILE]
 */

const USAGE = `usage: node dist/bench/dispatch/overhead.js [--rounds N] [--seconds N] [--concurrency N] [--json FILE]
  --rounds N        alternated rounds (default 5)
  --seconds N       seconds of each configuration per round (default 6)
  --concurrency N   closed-loop concurrency (default 64)
  --json FILE       also write the figures as JSON`;

const AGENT_ID = 'bench';

interface Config {
  name: string;
  metrics: 'on' | 'off';
  /** Trace sampling ratio; null = traces off. */
  sampling: number | null;
}

const CONFIGS: Config[] = [
  { name: 'off', metrics: 'off', sampling: null },
  { name: 'metrics', metrics: 'on', sampling: null },
  { name: 'traces 100 %', metrics: 'on', sampling: 1 },
  { name: 'traces 1 %', metrics: 'on', sampling: 0.01 },
];

interface Slice {
  round: number;
  config: string;
  runs: number;
  failed: number;
  runs_per_s: number;
  host_cpu_ms_per_run: number;
  other_cpu_share: number;
}

/** OTLP/HTTP trace sink: reads and parses each export, counts the spans, answers 200. */
class OtlpSink {
  spans = 0;
  requests = 0;
  bytes = 0;
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      this.requests += 1;
      this.bytes += body.length;
      try {
        const doc = JSON.parse(body.toString('utf8')) as {
          resourceSpans?: { scopeSpans?: { spans?: unknown[] }[] }[];
        };
        for (const rs of doc.resourceSpans ?? []) {
          for (const ss of rs.scopeSpans ?? []) {
            this.spans += ss.spans?.length ?? 0;
          }
        }
      } catch {
        // counted as a request; the bench only needs the host to have sent it
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1/traces`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

function envOf(c: Config, endpoint: string): Record<string, string> {
  const env: Record<string, string> = { METRICS: c.metrics, METRICS_PORT: '0', OTEL_TRACES_EXPORTER: '' };
  if (c.sampling !== null) {
    Object.assign(env, {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: endpoint,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: String(c.sampling),
    });
  }
  return env;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const pct = (x: number): string => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(1)} %`;

async function main(): Promise<number> {
  let v;
  try {
    v = parseArgs({
      args: process.argv.slice(2),
      strict: true,
      options: {
        rounds: { type: 'string' },
        seconds: { type: 'string' },
        concurrency: { type: 'string' },
        json: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values;
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  if (v.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const int = (name: string, text: string | undefined, dflt: number): number => {
    const n = Number(text ?? dflt);
    if (!Number.isInteger(n) || n < 1) {
      throw new UsageError(`--${name}: "${text}" is not an integer ≥ 1`);
    }
    return n;
  };
  const rounds = int('rounds', v.rounds, 5);
  const seconds = int('seconds', v.seconds, 6);
  const concurrency = int('concurrency', v.concurrency, 64);

  const sink = new OtlpSink();
  const endpoint = await sink.start();
  const hosts: { config: Config; fixture: HostFixture; driver: RunDriver }[] = [];
  const slices: Slice[] = [];
  const log = (m: string) => process.stderr.write(`overhead: ${m}\n`);
  try {
    for (const config of CONFIGS) {
      log(`starting host (${config.name})`);
      const fixture = await HostFixture.start(AGENT_ID, { mode: 'echo' }, null, 'raw', envOf(config, endpoint));
      hosts.push({ config, fixture, driver: new RunDriver(fixture.http, AGENT_ID, 'hello bench world', 15_000) });
    }
    for (const h of hosts) {
      log(`warm-up ${h.config.name}`);
      await closedLoop(h.driver, 16, 2_000);
    }
    for (let round = 1; round <= rounds; round++) {
      // Rotate the order each round: no configuration always follows the same one.
      const order = hosts.map((_, i) => hosts[(i + round - 1) % hosts.length]);
      for (const h of order) {
        const pids = [h.fixture.host.pid, h.fixture.runner.pid];
        const host0 = cpuMs(pids[0]);
        const ours0 = pids.reduce((a, p) => a + cpuMs(p), 0);
        const machine0 = machineBusyMs();
        const level = await closedLoop(h.driver, concurrency, seconds * 1000);
        const host = cpuMs(pids[0]) - host0;
        const ours = pids.reduce((a, p) => a + cpuMs(p), 0) - ours0;
        const machine = machineBusyMs() - machine0;
        const runs = level.timings.length;
        slices.push({
          round,
          config: h.config.name,
          runs,
          failed: level.failures.length,
          runs_per_s: runs / (level.elapsedMs / 1000),
          host_cpu_ms_per_run: host / Math.max(1, runs),
          other_cpu_share: machine > 0 ? Math.max(0, machine - ours) / machine : NaN,
        });
        const s = slices.at(-1)!;
        log(
          `round ${round} ${h.config.name}: ${s.runs_per_s.toFixed(1)} runs/s, host ${s.host_cpu_ms_per_run.toFixed(2)} ms/run, load ${os.loadavg()[0].toFixed(1)}`,
        );
      }
    }
  } finally {
    for (const h of hosts) {
      await h.fixture.stop().catch(() => undefined);
    }
    await sink.close();
  }

  const base = CONFIGS[0].name;
  const of = (round: number, config: string) => slices.find((s) => s.round === round && s.config === config)!;
  const summary = CONFIGS.map((c) => {
    const mine = slices.filter((s) => s.config === c.name);
    const ratios = mine.map((s) => s.runs_per_s / of(s.round, base).runs_per_s - 1);
    const cpuRatios = mine.map((s) => s.host_cpu_ms_per_run / of(s.round, base).host_cpu_ms_per_run - 1);
    const vsMetrics = mine.map((s) => s.runs_per_s / of(s.round, 'metrics').runs_per_s - 1);
    return {
      config: c.name,
      metrics: c.metrics,
      trace_sampling: c.sampling,
      runs_per_s_median: median(mine.map((s) => s.runs_per_s)),
      host_cpu_ms_per_run_median: median(mine.map((s) => s.host_cpu_ms_per_run)),
      runs_per_s_vs_off_median: median(ratios),
      runs_per_s_vs_off_min: Math.min(...ratios),
      runs_per_s_vs_off_max: Math.max(...ratios),
      host_cpu_per_run_vs_off_median: median(cpuRatios),
      runs_per_s_vs_metrics_median: median(vsMetrics),
      failed: mine.reduce((a, s) => a + s.failed, 0),
    };
  });
  const out = [
    `## Observability overhead (SQLite, demo runner, echo, c${concurrency}, ${rounds} rounds × ${seconds} s per configuration, alternated)`,
    '',
    `traces: OTLP/HTTP JSON to a sink in the bench process (${sink.spans} spans in ${sink.requests} exports, ${(sink.bytes / 1e6).toFixed(1)} MB); load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' / ')}`,
    '',
    '| round | ' + CONFIGS.map((c) => `${c.name} runs/s (host ms/run)`).join(' | ') + ' |',
    '| ---: | ' + CONFIGS.map(() => '---:').join(' | ') + ' |',
  ];
  for (let r = 1; r <= rounds; r++) {
    out.push(
      `| ${r} | ` +
        CONFIGS.map((c) => {
          const s = of(r, c.name);
          return `${s.runs_per_s.toFixed(1)} (${s.host_cpu_ms_per_run.toFixed(2)})`;
        }).join(' | ') +
        ' |',
    );
  }
  out.push(
    '',
    '| configuration | runs/s (median) | vs off, same round: median [min, max] | host CPU per run vs off (median) | vs metrics on (median) |',
    '| --- | ---: | ---: | ---: | ---: |',
  );
  for (const s of summary) {
    out.push(
      `| ${s.config} | ${s.runs_per_s_median.toFixed(1)} | ${pct(s.runs_per_s_vs_off_median)} [${pct(s.runs_per_s_vs_off_min)}, ${pct(s.runs_per_s_vs_off_max)}] | ${pct(s.host_cpu_per_run_vs_off_median)} | ${pct(s.runs_per_s_vs_metrics_median)} |`,
    );
  }
  const failed = summary.reduce((a, s) => a + s.failed, 0);
  out.push('', `failed runs: ${failed}`);
  process.stdout.write(out.join('\n') + '\n');
  if (v.json) {
    writeJson(v.json, {
      bench: 'dispatch-overhead',
      machine: machineJson(),
      options: { rounds, seconds, concurrency, database: 'sqlite', runner: 'raw' },
      sink: { spans: sink.spans, requests: sink.requests, bytes: sink.bytes },
      slices,
      summary,
    });
  }
  return failed > 0 ? 1 : 0;
}

runMain(main, USAGE);
