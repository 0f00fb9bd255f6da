import * as os from 'node:os';
import { performance } from 'node:perf_hooks';
import { freePort } from '../common/host-process';
import { HostFixture } from '../dispatch/host-fixture';
import { num, writeJson } from '../common/json-out';
import { BenchDatabase } from '../dispatch/postgres';
import { machineLine } from '../common/report';
import { fmtDuration, fmtInt, summarize } from '../common/stats';
import { scenario, type ScenarioResult } from './measure';
import { DEAD_ENDPOINT_NOTE, deadEndpointLevel, type DeadEndpointRow } from './dead-endpoint';
import { longMessageRun, type LongCase, type LongResult } from './long-message';
import { longAnswerText, type LongAnswerConfig } from '../../apps/demo-runner/src/long-answer';

/*
 * Delivery benchmark (issue 10): deltas/s through normaliser → outbox → delivery SSE for one run
 * and for 100 concurrent runs, and the delay the delivery path adds per delta (p50/p99), measured
 * against the raw result SSE of the same runs (the same-run baseline). Two deliveries: an edit surface
 * with an agent policy that edits on every delta (edit_interval_ms 0, min_edit_chars 0: one outbox op
 * per delta, the heaviest load a run can cause), and a final-only surface (one op per run) whose
 * result throughput is the run path nearly without delivery work.
 *
 * The dead-endpoint level (dead-endpoint.ts): a healthy webhook's delivery latency alone, beside a
 * webhook that never answers, and beside it with the per-endpoint fairness switched off.
 *
 * The long-message level (issue 23, long-message.ts): one run streaming a 1 MiB and a 16 MiB answer
 * in small and in 8 KiB deltas, with and without paragraph breaks, through every delivery mode;
 * host CPU per delta at the start and at the end of the message, and the lag a concurrent run sees.
 *
 *   npm run bench:delivery -- [--db sqlite,postgres] [--levels throughput,dead-endpoint,long] [--json FILE]
 *                             [--pg-url URL] [--long-sizes 1,16] [--long-deltas 256,8192]
 *
 * Exits 1 if what the ops show (their messages joined) differs from a run's completed message; 2 on a bad option.
 */

const AGENT = 'bench-delivery';
const CASES = [
  { runs: 1, deltas: 2000 },
  { runs: 100, deltas: 200 },
];
const WARMUP = { runs: 4, deltas: 200 };
/** The heaviest delivery load (one op per delta), and the lightest (one op per run) as a second baseline. */
const POLICIES = [
  { name: 'edit every delta', delivery: { surface: 'bench', supports_streaming: true, supports_edit: true } },
  { name: 'telegram preset', delivery: { surface: 'telegram' } },
  { name: 'final only', delivery: { surface: 'webhook' } },
];

const progress = (msg: string): void => void process.stderr.write(`bench: ${msg}\n`);

const LEVELS = ['throughput', 'dead-endpoint', 'long'] as const;
type Level = (typeof LEVELS)[number];

interface Options {
  databases: ('sqlite' | 'postgres')[];
  levels: Level[];
  json: string | null;
  pgUrl: string;
  /** Long-message level: answer sizes in MiB, delta sizes in characters. */
  longSizes: number[];
  longDeltas: number[];
  /** Long-message level: which deliveries (LONG_DELIVERIES keys) and which of without / with breaks. */
  longModes: string[];
  longBreaks: boolean[];
}

/** Long-message level: every delivery mode, with and without a size limit where the mode has one. */
const LONG_DELIVERIES = [
  { key: 'edit', name: 'edit, no limit', context: { surface: 'bench', supports_streaming: true, supports_edit: true } },
  { key: 'telegram', name: 'edit, telegram 4096', context: { surface: 'telegram' } },
  { key: 'parts', name: 'parts, no limit', context: { surface: 'api' } },
  {
    key: 'parts4096',
    name: 'parts, 4096',
    context: { surface: 'bench', supports_streaming: true, max_message_size: 4096 },
  },
  { key: 'qq', name: 'final, qq 2000', context: { surface: 'qq' } },
];
const PROBE_AGENT = 'bench-probe';

const positiveList = (flag: string, value: string): number[] =>
  value.split(',').map((v) => {
    const n = Number(v);
    if (!(n > 0)) {
      throw new Error(`${flag}: ${v} is not a positive number`);
    }
    return n;
  });

function parseOptions(argv: string[]): Options {
  const opts: Options = {
    databases: ['sqlite'],
    levels: [...LEVELS],
    json: null,
    pgUrl: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    longSizes: [1, 16],
    longDeltas: [256, 8192],
    longModes: LONG_DELIVERIES.map((d) => d.key),
    longBreaks: [false, true],
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (flag === '--db' && value) {
      opts.databases = value.split(',').map((d) => {
        if (d !== 'sqlite' && d !== 'postgres') {
          throw new Error(`--db: unknown database ${d}`);
        }
        return d;
      });
      i++;
    } else if (flag === '--levels' && value) {
      opts.levels = value.split(',').map((l) => {
        if (!(LEVELS as readonly string[]).includes(l)) {
          throw new Error(`--levels: unknown level ${l} (${LEVELS.join(', ')})`);
        }
        return l as Level;
      });
      i++;
    } else if (flag === '--json' && value) {
      opts.json = value;
      i++;
    } else if (flag === '--pg-url' && value) {
      opts.pgUrl = value;
      i++;
    } else if (flag === '--long-sizes' && value) {
      opts.longSizes = positiveList(flag, value);
      i++;
    } else if (flag === '--long-deltas' && value) {
      opts.longDeltas = positiveList(flag, value).map(Math.round);
      i++;
    } else if (flag === '--long-modes' && value) {
      opts.longModes = value.split(',').map((k) => {
        if (!LONG_DELIVERIES.some((d) => d.key === k)) {
          throw new Error(`--long-modes: unknown delivery ${k} (${LONG_DELIVERIES.map((d) => d.key).join(', ')})`);
        }
        return k;
      });
      i++;
    } else if (flag === '--long-breaks' && value) {
      opts.longBreaks = value.split(',').map((b) => {
        if (b !== 'no' && b !== 'yes') {
          throw new Error(`--long-breaks: ${b} is neither no nor yes`);
        }
        return b === 'yes';
      });
      i++;
    } else {
      throw new Error(
        `unknown option ${flag}; usage: [--db sqlite,postgres] [--levels throughput,dead-endpoint,long] [--json FILE] [--pg-url URL] [--long-sizes MiB,..] [--long-deltas chars,..] [--long-modes edit,telegram,parts,parts4096,qq] [--long-breaks no,yes]`,
      );
    }
  }
  return opts;
}

function figures(r: ScenarioResult) {
  const deltas = r.runs * r.deltasPerRun;
  const added = summarize(r.times.flatMap((t) => t.addedMs));
  return {
    runs: r.runs,
    deltas_per_run: r.deltasPerRun,
    ops: r.times.reduce((n, t) => n + t.ops, 0),
    results_deltas_per_s: num((deltas * 1000) / r.resultsWallMs),
    deliveries_deltas_per_s: num((deltas * 1000) / r.deliveriesWallMs),
    added_delay_p50_ms: num(added.p50),
    added_delay_p99_ms: num(added.p99),
    added_delay_samples: added.count,
    added_delay_note: added.count === 0 ? 'no op per delta (final only)' : null,
    shown_equals_completed: r.times.every((t) => t.completedText !== null && t.shownText === t.completedText),
  };
}

type LongRow = LongResult & { database: string; mib: number; delta_chars: number; breaks: boolean; delivery: string };

/** The long-message level on one host: every size × delta size × breaks × delivery. */
async function longLevel(
  fixture: HostFixture,
  database: string,
  opts: Options,
  metricsUrl: string,
): Promise<LongRow[]> {
  const out: LongRow[] = [];
  await fixture.http.expect(201, 'POST', '/v1/admin/agents', {
    agent_id: PROBE_AGENT,
    runner_id: 'plugin:demo/echo/default',
    runner_config: { mode: 'echo' },
  });
  for (const mib of opts.longSizes) {
    for (const deltaChars of opts.longDeltas) {
      for (const breaks of opts.longBreaks) {
        const config: LongAnswerConfig = {
          deltas: Math.max(1, Math.round((mib * 1024 * 1024) / deltaChars)),
          delta_chars: deltaChars,
          paragraph_every: breaks ? Math.max(1, Math.round(4096 / deltaChars)) : 0,
        };
        const agentId = `bench-long-${mib}-${deltaChars}-${breaks ? 'p' : 'n'}`;
        await fixture.http.expect(201, 'POST', '/v1/admin/agents', {
          agent_id: agentId,
          runner_id: 'plugin:demo/echo/default',
          runner_config: { mode: 'long_answer', ...config },
        });
        const expected = longAnswerText(config);
        for (const delivery of LONG_DELIVERIES.filter((d) => opts.longModes.includes(d.key))) {
          progress(
            `${database}: long message ${mib} MiB, ${config.deltas} × ${deltaChars}, breaks ${breaks}, ${delivery.name}`,
          );
          const c: LongCase = {
            bytes: mib * 1024 * 1024,
            deltaChars,
            paragraphEvery: config.paragraph_every,
            delivery,
          };
          const r = await longMessageRun(fixture.http, fixture.host.pid, agentId, PROBE_AGENT, c, expected, metricsUrl);
          out.push({ database, mib, delta_chars: deltaChars, breaks, delivery: delivery.name, ...r });
          progress(
            `  ${(r.wall_ms / 1000).toFixed(1)} s, longest task ${r.loop_max_ms.toFixed(0)} ms, CPU/delta ${r.cpu_us_per_delta_start.toFixed(0)} → ${r.cpu_us_per_delta_end.toFixed(0)} µs, concurrent run max ${r.probe_run_max_ms.toFixed(0)} ms, health max ${r.health_max_ms.toFixed(0)} ms, failed probes ${r.probe_failures}, delivery reader cut ${r.delivery_reader_cuts}×`,
          );
        }
      }
    }
  }
  return out;
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const started = performance.now();
  const load0 = os.loadavg()[0];
  const rows: (ReturnType<typeof figures> & { database: string; policy: string })[] = [];
  const dead: DeadEndpointRow[] = [];
  const longRows: LongRow[] = [];
  for (const database of opts.databases) {
    if (opts.levels.includes('dead-endpoint')) {
      const makePg = () => (database === 'postgres' ? BenchDatabase.create(opts.pgUrl) : Promise.resolve(null));
      dead.push(...(await deadEndpointLevel(database, makePg, progress)));
    }
    if (!opts.levels.includes('throughput') && !opts.levels.includes('long')) {
      continue;
    }
    const pg = database === 'postgres' ? await BenchDatabase.create(opts.pgUrl) : null;
    progress(`${database}: starting host and demo runner`);
    // A known metrics port: the long level reads the host's longest event-loop task from it.
    const metricsPort = await freePort();
    // The long level needs the demo runner's `long_answer` mode (the raw runner only echoes).
    const runnerKind = opts.levels.includes('long') ? 'sdk' : 'raw';
    const fixture = await HostFixture.start('bench-raw', { mode: 'echo' }, pg, runnerKind, {
      METRICS_PORT: String(metricsPort),
    });
    try {
      await fixture.http.expect(201, 'POST', '/v1/admin/agents', {
        agent_id: AGENT,
        runner_id: 'plugin:demo/echo/default',
        runner_config: { mode: 'echo' },
        delivery_policy: { edit_interval_ms: 0, min_edit_chars: 0 },
      });
      progress(`${database}: warm-up ${WARMUP.runs} × ${WARMUP.deltas}`);
      await scenario(fixture.http, AGENT, WARMUP.runs, WARMUP.deltas, POLICIES[0].delivery);
      if (opts.levels.includes('throughput')) {
        for (const c of CASES) {
          for (const p of POLICIES) {
            progress(`${database}: ${c.runs} run(s) × ${c.deltas} deltas, ${p.name}`);
            const r = await scenario(fixture.http, AGENT, c.runs, c.deltas, p.delivery);
            rows.push({ database, policy: p.name, ...figures(r) });
          }
        }
      }
      if (opts.levels.includes('long')) {
        longRows.push(...(await longLevel(fixture, database, opts, `http://127.0.0.1:${metricsPort}/metrics`)));
      }
    } finally {
      await fixture.stop();
      fixture.removeDataDir();
      await pg?.drop();
    }
  }
  const table = [
    '| database | runs × deltas | delivery | ops | raw result SSE deltas/s (baseline) | delivery SSE deltas/s | added delay per delta p50 / p99 |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (r) =>
        `| ${r.database} | ${r.runs} × ${fmtInt(r.deltas_per_run)} | ${r.policy} | ${fmtInt(r.ops)} | ${fmtInt(r.results_deltas_per_s ?? NaN)} | ${fmtInt(r.deliveries_deltas_per_s ?? NaN)} | ${fmtDuration(r.added_delay_p50_ms ?? NaN)} / ${fmtDuration(r.added_delay_p99_ms ?? NaN)} |`,
    ),
  ];
  const deadTable = [
    '| database | healthy endpoint | samples | first delivery | delivery latency p50 | max |',
    '| --- | --- | ---: | ---: | ---: | ---: |',
    ...dead.map(
      (r) =>
        `| ${r.database} | ${r.setting} | ${r.samples} | ${fmtDuration(r.first_ms)} | ${fmtDuration(r.p50_ms)} | ${fmtDuration(r.max_ms)} |`,
    ),
  ];
  const longTable = [
    '| database | answer | deltas × chars | breaks | delivery | ops | wall | longest task | host CPU/delta start → end | concurrent run p50 / max | /health/live p50 / max | probes unanswered | delivery reader cut |',
    '| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...longRows.map(
      (r) =>
        `| ${r.database} | ${r.mib} MiB | ${fmtInt(r.deltas)} × ${fmtInt(r.delta_chars)} | ${r.breaks ? 'yes' : 'no'} | ${r.delivery} | ${fmtInt(r.ops)} | ${fmtDuration(r.wall_ms)} | ${fmtDuration(r.loop_max_ms)} | ${fmtInt(r.cpu_us_per_delta_start)} → ${fmtInt(r.cpu_us_per_delta_end)} µs | ${fmtDuration(r.probe_run_p50_ms)} / ${fmtDuration(r.probe_run_max_ms)} | ${fmtDuration(r.health_p50_ms)} / ${fmtDuration(r.health_max_ms)} | ${r.probe_failures} | ${r.delivery_reader_cuts} |`,
    ),
  ];
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(
    [
      '## Runner Host delivery benchmark',
      '',
      `machine: ${machineLine()}; bench client, host and runner share these cores; load ${load0.toFixed(2)} → ${os.loadavg()[0].toFixed(2)}`,
      'agent policy edit_interval_ms 0, min_edit_chars 0; "edit every delta": an edit surface (one message.edit op per delta,',
      'the heaviest case); "telegram preset": edits at most once per 1 s, 4096-character messages (the realistic case);',
      '"final only": surface webhook (one op per run, the lightest: the run path nearly without delivery);',
      'echo runner, chunk_delay_ms 0; both SSE streams of a run read side by side from its admission',
      '',
      ...(rows.length > 0 ? table : []),
      '',
      ...(dead.length > 0 ? [`dead endpoint: ${DEAD_ENDPOINT_NOTE}`, '', ...deadTable, ''] : []),
      ...(longRows.length > 0
        ? [
            '### One long message (issue 23)',
            '',
            'demo runner `long_answer`: content-only deltas, "breaks": a blank line about every 4 KiB; host CPU: the',
            "host's main thread (/proc/<pid>/schedstat) per delta over deltas 5–25 % (start) and 75–95 % (end);",
            'concurrent run: short echo runs one after another during the long one, POST → run.completed;',
            "longest task: the host's event-loop delay max during the run (its metrics' nodejs_eventloop_lag_max_seconds)",
            '',
            ...longTable,
            '',
          ]
        : []),
      `${seconds.toFixed(0)} s`,
      '',
    ].join('\n'),
  );
  if (opts.json) {
    writeJson(opts.json, {
      bench: 'delivery',
      machine: machineLine(),
      seconds: num(seconds),
      cases: rows,
      dead_endpoint: dead,
      long_message: longRows,
    });
  }
  const bad = [...rows.filter((r) => !r.shown_equals_completed), ...longRows.filter((r) => !r.shown_equals_streamed)];
  if (bad.length > 0) {
    process.stderr.write(`bench: the delivered messages differ from the completed message (${bad.length} case(s))\n`);
    return 1;
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`bench: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(2);
  },
);
