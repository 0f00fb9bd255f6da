import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { UsageError, runMain } from '../common/cli';
import { BuiltHost, DIST, requireBuilt, waitFor } from '../common/host-process';
import type { HostHttp } from '../common/http';
import { machineJson, num, writeJson } from '../common/json-out';
import { Child, cpuMs } from '../common/proc';
import { readSse } from '../common/sse';
import { fmtDuration, fmtNum, markdownTable, summarize, type Summary } from '../common/stats';
import { bidiFloor, type FloorResult } from '../dispatch/floors';
import { BenchDatabase, postgresFloor } from '../dispatch/postgres';

/*
 * npm run bench:cluster — several host processes on one PostgreSQL database (issue 17 item 8,
 * docs/scale-out.md). For 1, 2 and 3 processes on a fresh database each: runs/s and deltas/s of a
 * closed loop of `POST /v1/events` → terminal result on SSE, the clients spread round-robin over
 * the processes and one demo runner (SDK) connected to each process (today a run is dispatched by
 * the process it was admitted at, which must hold a stream of its runner); the hosts' CPU per run;
 * their idle CPU (heartbeat, sweep, signal bus) before the load. Beside them, measured in the same
 * run: the PostgreSQL write floor and the grpc-js bidi floor (bench/dispatch/floors).
 *
 * Cross-process dispatch (a run admitted at process 1 whose runner is connected only to process 2)
 * is measured when it works: until the routing step of issue 17 is merged the host answers 503
 * `runner.unavailable`, and the JSON says so (`cross_process_dispatch.available: false`).
 */

const USAGE = `usage: node dist/bench/cluster/main.js [options]
  --processes LIST     process counts to measure (default 1,2,3)
  --duration-ms N      measured time per level (default 10000, after a 2000 ms warm-up)
  --concurrency N      clients in the closed loop, spread over the processes (default 16)
  --deltas N           message.delta results per run (default 20)
  --samples N          cross-process dispatch samples (default 50)
  --pg-url URL         PostgreSQL admin URL; a fresh database per level (default postgres://postgres@127.0.0.1:5432/test)
  --bus NAME           SIGNAL_BUS of the hosts (default auto = postgres)
  --json FILE          also write the figures and the floors as JSON to FILE
  -h, --help           this text`;

interface Options {
  processes: number[];
  durationMs: number;
  warmupMs: number;
  concurrency: number;
  deltas: number;
  samples: number;
  pgUrl: string;
  bus: string;
  json: string | null;
}

function parseOptions(argv: string[]): Options | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        processes: { type: 'string', default: '1,2,3' },
        'duration-ms': { type: 'string', default: '10000' },
        concurrency: { type: 'string', default: '16' },
        deltas: { type: 'string', default: '20' },
        samples: { type: 'string', default: '50' },
        'pg-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/test' },
        bus: { type: 'string', default: 'auto' },
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
  const int = (name: string, v: string, min: number, max: number): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new UsageError(`--${name} must be an integer from ${min} to ${max}, not ${v}`);
    }
    return n;
  };
  const processes = values.processes.split(',').map((p) => int('processes', p.trim(), 1, 8));
  if (!['auto', 'postgres', 'nats'].includes(values.bus)) {
    throw new UsageError(`--bus must be auto, postgres or nats, not ${values.bus}`);
  }
  return {
    processes,
    durationMs: int('duration-ms', values['duration-ms'], 1000, 3_600_000),
    warmupMs: 2000,
    concurrency: int('concurrency', values.concurrency, 1, 1024),
    deltas: int('deltas', values.deltas, 1, 10_000),
    samples: int('samples', values.samples, 1, 10_000),
    pgUrl: values['pg-url'],
    bus: values.bus,
    json: values.json ?? null,
  };
}

const RUNNER_MAIN = path.join(DIST, 'apps', 'demo-runner', 'src', 'main.js');
const AGENT = 'cluster-bench';
const FAR_AGENT = 'cluster-bench-far';

/** N hosts on one database, a demo runner at each for plugin demo/echo; demo/far's runner only at the second. */
class Cluster {
  readonly runners: Child[] = [];

  private constructor(
    readonly db: BenchDatabase,
    readonly hosts: BuiltHost[],
  ) {}

  static async start(n: number, o: Options): Promise<Cluster> {
    requireBuilt(RUNNER_MAIN);
    const db = await BenchDatabase.create(o.pgUrl);
    const hosts: BuiltHost[] = [];
    const cluster = new Cluster(db, hosts);
    const adminKey = `bench-admin-cluster-${randomBytes(18).toString('hex')}`;
    try {
      for (let i = 0; i < n; i++) {
        hosts.push(
          await BuiltHost.start({
            tmpPrefix: `runner-host-bench-cluster-${i}-`,
            adminKey,
            databaseUrl: db.url,
            env: { HOST_INSTANCE_ID: `bench-${i}`, SIGNAL_BUS: o.bus, SSE_MAX_STREAMS_PER_KEY: '2048' },
          }),
        );
      }
      const echo = await cluster.plugin('echo');
      for (const h of hosts) {
        await cluster.runner(h, echo, 'echo');
      }
      await hosts[0].http.expect(201, 'POST', '/v1/admin/agents', {
        agent_id: AGENT,
        runner_id: 'plugin:demo/echo/default',
        runner_config: { mode: 'echo' },
      });
      if (n > 1) {
        await cluster.runner(hosts[1], await cluster.plugin('far'), 'far');
        await hosts[0].http.expect(201, 'POST', '/v1/admin/agents', {
          agent_id: FAR_AGENT,
          runner_id: 'plugin:demo/far/default',
          runner_config: { mode: 'echo' },
        });
      }
      return cluster;
    } catch (e) {
      await cluster.stop();
      throw e;
    }
  }

  private async plugin(name: string): Promise<string> {
    const r = (await this.hosts[0].http.expect(201, 'POST', '/v1/admin/plugins', { author: 'demo', name })) as {
      token: string;
    };
    return r.token;
  }

  private async runner(h: BuiltHost, token: string, name: string): Promise<void> {
    const log = fs.openSync(path.join(h.dataDir, `runner-${name}.log`), 'a');
    const runner = new Child(
      `demo-runner-${name}`,
      RUNNER_MAIN,
      {
        ...process.env,
        RUNNERHOST_GRPC_URL: h.grpcAddress,
        RUNNERHOST_PLUGIN_TOKEN: token,
        RUNNERHOST_PLUGIN_NAME: name,
        RUNNERHOST_PROTO_DIR: path.join(DIST, 'proto'),
      },
      ['ignore', log, log],
    );
    fs.closeSync(log);
    this.runners.push(runner);
    const runnerId = `plugin:demo/${name}/default`;
    await waitFor(
      `${runnerId} connected to ${h.url}`,
      30_000,
      async () => {
        const list = (await h.http.expect(200, 'GET', '/v1/admin/runners')) as { runner_id: string; state: string }[];
        return list.some((r) => r.runner_id === runnerId && r.state === 'connected');
      },
      [h.child, runner],
    );
  }

  hostCpuMs(): number {
    return this.hosts.reduce((sum, h) => sum + cpuMs(h.child.pid), 0);
  }

  async stop(): Promise<void> {
    await Promise.all(this.runners.map((r) => r.stop()));
    await Promise.all(this.hosts.map((h) => h.stop()));
    for (const h of this.hosts) {
      h.removeDataDir();
    }
    await this.db.drop();
  }
}

interface RunOutcome {
  terminalMs: number;
  firstMs: number;
  deltas: number;
}

let conversation = 0;

/** One run: POST at `http`, follow its SSE (at the same process) to the terminal result; throws on anything but run.completed. */
async function oneRun(http: HostHttp, agentId: string, text: string): Promise<RunOutcome> {
  const t0 = performance.now();
  const res = await http.json('POST', '/v1/events', {
    agent_id: agentId,
    event: { event_type: 'message.received', source: 'api' },
    conversation: { conversation_id: `c-${process.pid}-${conversation++}` },
    input: { text },
  });
  const body = res.body as { run_id?: string; disposition?: string; error?: { code?: string } } | null;
  if (res.status !== 202 || !body?.run_id) {
    throw new Error(`POST /v1/events: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
  }
  let firstMs = NaN;
  let terminal = '';
  let deltas = 0;
  await readSse(
    http,
    `/v1/runs/${body.run_id}/events`,
    (e) => {
      if (Number.isNaN(firstMs)) {
        firstMs = performance.now() - t0;
      }
      if (e.event === 'message.delta') {
        deltas++;
      }
      if (e.event === 'run.completed' || e.event === 'run.failed') {
        terminal = e.event;
      }
    },
    60_000,
  );
  if (terminal !== 'run.completed') {
    throw new Error(`run ${body.run_id} ended ${terminal || 'without a terminal result'}`);
  }
  return { terminalMs: performance.now() - t0, firstMs, deltas };
}

interface Level {
  processes: number;
  runs: number;
  deltas: number;
  failures: string[];
  elapsedMs: number;
  terminal: Summary;
  hostCpuMsPerRun: number;
  idleHostCpuMsPerS: number;
  crossProcess: CrossProcess | null;
}

interface CrossProcess {
  available: boolean;
  /** POST at process 1 → first result, runner at process 2. */
  remote: Summary | null;
  /** The same at process 2 (runner and admission in one process), measured alongside. */
  local: Summary;
  note: string;
}

async function closedLoop(c: Cluster, o: Options, text: string, durationMs: number) {
  const outcomes: RunOutcome[] = [];
  const failures: string[] = [];
  const start = performance.now();
  const deadline = start + durationMs;
  await Promise.all(
    Array.from({ length: o.concurrency }, async (_, w) => {
      const http = c.hosts[w % c.hosts.length].http;
      while (performance.now() < deadline && failures.length < 20) {
        try {
          outcomes.push(await oneRun(http, AGENT, text));
        } catch (e) {
          failures.push(e instanceof Error ? e.message : String(e));
        }
      }
    }),
  );
  return { outcomes, failures, elapsedMs: performance.now() - start };
}

async function crossProcess(c: Cluster, o: Options, text: string): Promise<CrossProcess | null> {
  if (c.hosts.length < 2) {
    return null;
  }
  const local: number[] = [];
  const remote: number[] = [];
  let refusal = '';
  for (let i = 0; i < o.samples; i++) {
    local.push((await oneRun(c.hosts[1].http, FAR_AGENT, text)).firstMs);
    try {
      remote.push((await oneRun(c.hosts[0].http, FAR_AGENT, text)).firstMs);
    } catch (e) {
      refusal = e instanceof Error ? e.message : String(e);
      break;
    }
  }
  const available = refusal === '';
  return {
    available,
    remote: available ? summarize(remote) : null,
    local: summarize(local),
    note: available
      ? 'POST at process 1 → first result on SSE at process 1, the runner connected to process 2 only'
      : `not measurable on this build (routing to the process holding the runner is not merged): ${refusal}`,
  };
}

async function level(n: number, o: Options): Promise<Level> {
  const text = Array.from({ length: o.deltas }, (_, i) => `w${i}`).join(' ');
  const c = await Cluster.start(n, o);
  try {
    // Idle: what heartbeats, sweeps and the bus cost with nothing to do.
    const idle0 = c.hostCpuMs();
    const idleT0 = performance.now();
    await sleep(3000);
    const idleHostCpuMsPerS = ((c.hostCpuMs() - idle0) / (performance.now() - idleT0)) * 1000;
    await closedLoop(c, o, text, o.warmupMs);
    const cpu0 = c.hostCpuMs();
    const { outcomes, failures, elapsedMs } = await closedLoop(c, o, text, o.durationMs);
    const cpu = c.hostCpuMs() - cpu0;
    const cross = await crossProcess(c, o, text);
    return {
      processes: n,
      runs: outcomes.length,
      deltas: outcomes.reduce((s, r) => s + r.deltas, 0),
      failures,
      elapsedMs,
      terminal: summarize(outcomes.map((r) => r.terminalMs)),
      hostCpuMsPerRun: cpu / Math.max(1, outcomes.length),
      idleHostCpuMsPerS,
      crossProcess: cross,
    };
  } finally {
    await c.stop();
  }
}

function floorJson(f: FloorResult) {
  return { rate_per_s: num(f.rate), p50_ms: num(f.latency.p50), p99_ms: num(f.latency.p99) };
}

async function main(): Promise<number> {
  const parsed = parseOptions(process.argv.slice(2));
  if (parsed === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const o = parsed;
  const levels: Level[] = [];
  for (const n of o.processes) {
    process.stderr.write(`bench: ${n} process(es)…\n`);
    levels.push(await level(n, o));
  }
  process.stderr.write('bench: floors…\n');
  const pgFloor = await postgresFloor(o.pgUrl, 1000, 3000);
  const bidi = await bidiFloor(1000, 3000);

  const rows = levels.map((l) => [
    String(l.processes),
    fmtNum(l.runs / (l.elapsedMs / 1000)),
    fmtNum(l.deltas / (l.elapsedMs / 1000)),
    fmtDuration(l.terminal.p50),
    fmtDuration(l.terminal.p99),
    fmtNum(l.hostCpuMsPerRun),
    fmtNum(l.idleHostCpuMsPerS),
    String(l.failures.length),
  ]);
  process.stdout.write(
    `Cluster on PostgreSQL: c${o.concurrency} closed loop, ${o.deltas} deltas per run, ${o.durationMs} ms per level, bus ${o.bus}\n\n` +
      markdownTable(
        [
          'processes',
          'runs/s',
          'deltas/s',
          'terminal p50',
          'terminal p99',
          'host CPU ms/run',
          'idle host CPU ms/s',
          'failures',
        ],
        rows,
      ) +
      `\n\nFloors (same run): PostgreSQL one-row commit ${fmtNum(pgFloor.rate)}/s (p50 ${fmtDuration(pgFloor.latency.p50)}); ` +
      `grpc-js bidi round trip ${fmtNum(bidi.rate)}/s (p50 ${fmtDuration(bidi.latency.p50)})\n`,
  );
  for (const l of levels.filter((x) => x.crossProcess)) {
    const x = l.crossProcess!;
    process.stdout.write(
      `${l.processes} processes, dispatch (POST → first result): runner on the admitting process p50 ${fmtDuration(x.local.p50)}; ` +
        (x.available ? `runner on another process p50 ${fmtDuration(x.remote!.p50)}\n` : `${x.note}\n`),
    );
  }
  for (const l of levels.filter((x) => x.failures.length > 0)) {
    process.stdout.write(`${l.processes} processes: failures, first: ${l.failures[0]}\n`);
  }
  if (o.json) {
    writeJson(o.json, {
      bench: 'cluster',
      machine: machineJson(),
      options: {
        concurrency: o.concurrency,
        deltas: o.deltas,
        duration_ms: o.durationMs,
        bus: o.bus,
        samples: o.samples,
      },
      floors: { postgres_write: floorJson(pgFloor), grpc_bidi: floorJson(bidi) },
      levels: levels.map((l) => ({
        processes: l.processes,
        runs: l.runs,
        runs_per_s: num(l.runs / (l.elapsedMs / 1000)),
        deltas_per_s: num(l.deltas / (l.elapsedMs / 1000)),
        terminal_p50_ms: num(l.terminal.p50),
        terminal_p99_ms: num(l.terminal.p99),
        host_cpu_ms_per_run: num(l.hostCpuMsPerRun),
        idle_host_cpu_ms_per_s: num(l.idleHostCpuMsPerS),
        failures: l.failures.length,
        first_failure: l.failures[0] ?? null,
        cross_process_dispatch: l.crossProcess && {
          available: l.crossProcess.available,
          remote_first_result_p50_ms: l.crossProcess.remote ? num(l.crossProcess.remote.p50) : null,
          remote_first_result_p99_ms: l.crossProcess.remote ? num(l.crossProcess.remote.p99) : null,
          local_first_result_p50_ms: num(l.crossProcess.local.p50),
          local_first_result_p99_ms: num(l.crossProcess.local.p99),
          note: l.crossProcess.note,
        },
      })),
    });
  }
  return levels.some((l) => l.failures.length > 0) ? 1 : 0;
}

runMain(main, USAGE);
