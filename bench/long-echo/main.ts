import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { UsageError, runMain } from '../common/cli';
import { machineJson, num, writeJson } from '../common/json-out';
import { cpuMs } from '../common/proc';
import { benchTimeLine, machineLine } from '../common/report';
import { fmtInt, fmtNum, markdownTable } from '../common/stats';
import { HostFixture, RUNNER_ID } from '../dispatch/host-fixture';

/*
 * One long echo answer, streamed by the demo runner (apps/demo-runner, on the SDK) one small
 * delta per word, content-only (its default) against the same run with every delta carrying
 * `all_content` (`cumulative: true`, what the echo sent before round 8: O(L²) bytes for L
 * characters) — the same-run baseline, on the same host (SQLite), alternated pair by pair.
 *
 *   npm run bench:long-echo -- [--chars 100000] [--pairs 3] [--json FILE]
 *
 * Per run: wall time from the POST to the terminal status (polled every 50 ms), host and runner
 * CPU (/proc/<pid>/stat), the bytes the runner wrote (/proc/<pid>/io `wchar`: its gRPC stream,
 * plus its few log lines), the result rows and `SUM(LENGTH(data))` stored. Exits 1 when a run does
 * not complete or its stored `message.completed` is not the input.
 */

const USAGE = `usage: node dist/bench/long-echo/main.js [--chars N] [--pairs N] [--json FILE]
  --chars N     characters of the echoed input, 3-character words (default 100000, the input.text limit)
  --pairs N     pairs of runs, cumulative and content-only, alternated (default 3)
  --json FILE   also write the figures as JSON to FILE
  -h, --help    this text`;

const MODES = {
  cumulative: { mode: 'echo', cumulative: true },
  'content-only': { mode: 'echo' },
} as const;
type Mode = keyof typeof MODES;

interface Options {
  chars: number;
  pairs: number;
  json: string | null;
}

interface RunFigures {
  mode: Mode;
  pair: number;
  wall_s: number;
  host_cpu_s: number;
  runner_cpu_s: number;
  runner_bytes_written: number;
  rows: number;
  stored_data_bytes: number;
  load: number;
}

function parseOptions(argv: string[]): Options | 'help' {
  let values: { chars?: string; pairs?: string; json?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        chars: { type: 'string' },
        pairs: { type: 'string' },
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
  const int = (name: string, raw: string | undefined, fallback: number, min: number, max: number): number => {
    const n = raw === undefined ? fallback : Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new UsageError(`--${name} must be an integer from ${min} to ${max}`);
    }
    return n;
  };
  return {
    chars: int('chars', values.chars, 100_000, 3, 100_000),
    pairs: int('pairs', values.pairs, 3, 1, 20),
    json: values.json ?? null,
  };
}

/** Bytes a process has written so far (write/send syscalls; Linux /proc/<pid>/io). */
function bytesWritten(pid: number): number {
  const m = /^wchar: (\d+)$/m.exec(fs.readFileSync(`/proc/${pid}/io`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

const progress = (msg: string): void => void process.stderr.write(`bench: ${msg}\n`);

async function runOnce(fx: HostFixture, mode: Mode, pair: number, text: string): Promise<RunFigures> {
  const load = os.loadavg()[0];
  const [host0, runner0, written0] = [cpuMs(fx.host.pid), cpuMs(fx.runner.pid), bytesWritten(fx.runner.pid)];
  const started = performance.now();
  const admitted = (await fx.http.expect(202, 'POST', '/v1/events', {
    agent_id: mode,
    event: { event_type: 'message.received', source: 'api' },
    input: { text },
  })) as { run_id: string };
  let status = 'queued';
  while (status === 'queued' || status === 'running') {
    await sleep(50);
    status = ((await fx.http.expect(200, 'GET', `/v1/runs/${admitted.run_id}`)) as { status: string }).status;
  }
  const wall = performance.now() - started;
  const figures = {
    host: cpuMs(fx.host.pid) - host0,
    runner: cpuMs(fx.runner.pid) - runner0,
    written: bytesWritten(fx.runner.pid) - written0,
  };
  if (status !== 'completed') {
    throw new Error(`${mode} run ${admitted.run_id} ended ${status}`);
  }
  const db = new Database(path.join(fx.dataDir, 'runner-host.sqlite'), { readonly: true });
  try {
    const stored = db
      .prepare('SELECT COUNT(*) AS rows, SUM(LENGTH(data)) AS bytes FROM run_results WHERE run_id = ?')
      .get(admitted.run_id) as { rows: number; bytes: number };
    const completed = db
      .prepare("SELECT data FROM run_results WHERE run_id = ? AND type = 'message.completed'")
      .get(admitted.run_id) as { data: string } | undefined;
    const content = completed
      ? (JSON.parse(completed.data) as { message?: { content?: unknown } }).message?.content
      : null;
    if (content !== text) {
      throw new Error(`${mode} run ${admitted.run_id}: the stored message.completed is not the input`);
    }
    return {
      mode,
      pair,
      wall_s: wall / 1000,
      host_cpu_s: figures.host / 1000,
      runner_cpu_s: figures.runner / 1000,
      runner_bytes_written: figures.written,
      rows: stored.rows,
      stored_data_bytes: stored.bytes,
      load,
    };
  } finally {
    db.close();
  }
}

function report(opts: Options, runs: RunFigures[], started: number, load: number): string {
  const mib = (b: number) => `${fmtNum(b / (1024 * 1024))} MiB`;
  const rows = runs.map((r) => [
    String(r.pair),
    r.mode,
    fmtNum(r.wall_s),
    fmtNum(r.host_cpu_s),
    fmtNum(r.runner_cpu_s),
    mib(r.runner_bytes_written),
    fmtInt(r.rows),
    mib(r.stored_data_bytes),
    fmtNum(r.load),
  ]);
  const median = (mode: Mode, pick: (r: RunFigures) => number) => {
    const xs = runs
      .filter((r) => r.mode === mode)
      .map(pick)
      .sort((a, b) => a - b);
    return xs[Math.floor((xs.length - 1) / 2)];
  };
  const ratio = (pick: (r: RunFigures) => number) => fmtNum(median('cumulative', pick) / median('content-only', pick));
  return [
    `# One ${fmtInt(opts.chars)}-character echo: cumulative deltas (all_content on each) vs content-only`,
    '',
    markdownTable(
      [
        'pair',
        'deltas',
        'wall (s)',
        'host CPU (s)',
        'runner CPU (s)',
        'runner wrote',
        'result rows',
        'data stored',
        'load',
      ],
      rows,
    ),
    '',
    `Medians, cumulative ÷ content-only: wall ${ratio((r) => r.wall_s)}×, host CPU ${ratio((r) => r.host_cpu_s)}×, ` +
      `runner CPU ${ratio((r) => r.runner_cpu_s)}×, bytes written ${ratio((r) => r.runner_bytes_written)}×.`,
    '',
    machineLine(),
    benchTimeLine(started, load),
    '',
  ].join('\n');
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  if (opts === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const started = performance.now();
  const load = os.loadavg()[0];
  const text = 'ab '.repeat(Math.ceil(opts.chars / 3)).slice(0, opts.chars);
  const fx = await HostFixture.start('content-only', MODES['content-only'], null, 'sdk');
  const runs: RunFigures[] = [];
  try {
    await fx.http.expect(201, 'POST', '/v1/admin/agents', {
      agent_id: 'cumulative',
      runner_id: RUNNER_ID,
      runner_config: MODES.cumulative,
    });
    // Warm-up: a short run of each (JIT, prepared statements).
    for (const mode of Object.keys(MODES) as Mode[]) {
      await runOnce(fx, mode, 0, 'ab '.repeat(1_000));
    }
    for (let pair = 1; pair <= opts.pairs; pair++) {
      const order: Mode[] = pair % 2 === 1 ? ['cumulative', 'content-only'] : ['content-only', 'cumulative'];
      for (const mode of order) {
        const r = await runOnce(fx, mode, pair, text);
        progress(`pair ${pair} ${mode}: ${fmtNum(r.wall_s)} s, host CPU ${fmtNum(r.host_cpu_s)} s`);
        runs.push(r);
      }
    }
  } finally {
    await fx.stop();
    fx.removeDataDir();
  }
  process.stdout.write(report(opts, runs, started, load));
  if (opts.json) {
    writeJson(opts.json, {
      bench: 'long-echo',
      chars: opts.chars,
      runs: runs.map((r) => ({
        ...r,
        wall_s: num(r.wall_s),
        host_cpu_s: num(r.host_cpu_s),
        runner_cpu_s: num(r.runner_cpu_s),
      })),
      machine: machineJson(),
    });
  }
  return 0;
}

runMain(main, USAGE);
