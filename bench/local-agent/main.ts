import * as os from 'node:os';
import { performance } from 'node:perf_hooks';
import { runJsonOnlyBench } from '../common/cli';
import { machineJson, num, writeJson } from '../common/json-out';
import { machineLine } from '../common/report';
import { fmtDuration, markdownTable, summarize, type Summary } from '../common/stats';
import { LocalAgentFixture } from './fixture';
import { memoryAt, sdkFloor, toolTurns, type TurnSample } from './measure';

/*
 * Local agent benchmark: the host-side overhead of the built-in local agent per model turn and
 * per tool call (time not spent waiting on the scripted model or the tool), next to a same-run
 * floor (the openai SDK sending the same requests back to back from this process), and the host's
 * memory per concurrent run at 100 concurrent runs. Per tool call: the p50 gap of turns with 4
 * serial calls minus that of turns with 1 call, over 3; per model turn: the 1-call gap minus one
 * tool call.
 *
 *   npm run bench:local-agent -- [--json FILE]   (builds, then runs dist/bench/local-agent/main.js)
 *
 * Exits 1 if a run does not end as expected; 2 on a bad option.
 */

const RUNS = 40;
const TOOL_TURNS = 4;
const WIDE = 4; // tool calls per turn of the second shape, run one after another (serial mode)
const WARMUP_RUNS = 5;
const FLOOR_ROUNDS = 40;
const CONCURRENT = 100;

const progress = (msg: string) => process.stderr.write(`bench: ${msg}\n`);

const gaps = (samples: TurnSample[]) => summarize(samples.flatMap((s) => s.gaps_ms));
const row = (name: string, s: Summary, floor?: Summary) => [
  name,
  String(s.count),
  fmtDuration(s.p50),
  fmtDuration(s.p99),
  floor ? `${(s.p50 / floor.p50).toFixed(1)}×` : '',
];
const summaryJson = (s: Summary) => ({
  count: s.count,
  p50_ms: num(s.p50),
  p99_ms: num(s.p99),
  mean_ms: num(s.mean),
});

async function main({ json }: { json: string | null }): Promise<number> {
  const started = performance.now();
  progress('starting the host and the scripted model server');
  const f = await LocalAgentFixture.start();
  try {
    await f.agent('bench-agent');
    // Serial tool execution: the calls of a turn do not overlap, so each adds its whole host time.
    await f.agent('bench-serial', { 'tool-execution-mode': 'serial' });
    progress(`warm-up: ${WARMUP_RUNS} runs`);
    await toolTurns(f, 'bench-agent', WARMUP_RUNS, TOOL_TURNS, 1);

    // The shapes and the floor take turns, run by run, so that all of them see the same machine
    // load (the 2 cores are shared): a shape measured in another minute would not compare.
    progress(
      `${RUNS} rounds: a run with 1 call per turn, a run with ${WIDE} serial calls per turn, the SDK floor of each`,
    );
    const narrowSamples: TurnSample[] = [];
    const wideSamples: TurnSample[] = [];
    const floorNarrowGaps: number[] = [];
    const floorWideGaps: number[] = [];
    for (let round = 0; round < RUNS; round++) {
      const narrowRun = await toolTurns(f, 'bench-agent', 1, TOOL_TURNS, 1);
      const wideRun = await toolTurns(f, 'bench-serial', 1, TOOL_TURNS, WIDE);
      narrowSamples.push(...narrowRun.samples);
      wideSamples.push(...wideRun.samples);
      if (round < FLOOR_ROUNDS) {
        floorNarrowGaps.push(...(await sdkFloor(f, narrowRun.lastRequests, 1, 1)));
        floorWideGaps.push(...(await sdkFloor(f, wideRun.lastRequests, 1, WIDE)));
      }
    }
    const narrow = { samples: narrowSamples };
    const wide = { samples: wideSamples };
    const floorNarrow = summarize(floorNarrowGaps);
    const floorWide = summarize(floorWideGaps);
    progress(`memory: ${CONCURRENT} concurrent runs held in a model stream`);
    const memory = await memoryAt(f, 'bench-agent', CONCURRENT);

    const g1 = gaps(narrow.samples);
    const g4 = gaps(wide.samples);
    const perTool = (g4.p50 - g1.p50) / (WIDE - 1);
    const perTurn = g1.p50 - perTool;
    const floorTurn = floorNarrow.p50;
    const start = summarize([...narrow.samples, ...wide.samples].map((s) => s.start_ms));

    const out = (line = '') => process.stdout.write(`${line}\n`);
    out(`# bench/local-agent — ${machineLine()}`);
    out();
    out('Time between the end of a model answer and the next model request of the same run (host side):');
    out();
    out(
      markdownTable(
        ['turn shape', 'turns', 'p50', 'p99', 'vs floor'],
        [
          row('1 tool call per turn', g1, floorNarrow),
          row(`${WIDE} serial tool calls per turn`, g4, floorWide),
          row('floor: SDK, same requests, 1 call', floorNarrow),
          row(`floor: SDK, same requests, ${WIDE} calls`, floorWide),
        ],
      ),
    );
    out();
    out(
      `Host overhead per model turn ≈ ${fmtDuration(perTurn)} (floor ${fmtDuration(floorTurn)}, ${(perTurn / floorTurn).toFixed(1)}×); ` +
        `per tool call ≈ ${perTool > 0 ? fmtDuration(perTool) : 'within the noise (p50 difference ≤ 0)'} ` +
        `(from the p50s: 1 vs ${WIDE} serial calls per turn).`,
    );
    out(`POST /v1/events → first model request: p50 ${fmtDuration(start.p50)}, p99 ${fmtDuration(start.p99)}.`);
    out(
      `Memory: host RSS ${memory.idle_rss_mib.toFixed(1)} MiB idle, ${memory.active_rss_mib.toFixed(1)} MiB with ` +
        `${memory.concurrent} runs active (${memory.per_run_kib.toFixed(0)} KiB per run), ` +
        `${memory.after_rss_mib.toFixed(1)} MiB after they were cancelled.`,
    );
    const hostLines = f.hostLog();
    out(
      `Host log: ${hostLines.length} lines at LOG_LEVEL=warn. Load average (1 min) at the end: ${os.loadavg()[0].toFixed(2)}.`,
    );
    out(`Elapsed ${((performance.now() - started) / 1000).toFixed(1)} s.`);
    if (json) {
      writeJson(json, {
        bench: 'local-agent',
        machine: machineJson(),
        turn_gap: { one_call: summaryJson(g1), [`${WIDE}_calls`]: summaryJson(g4) },
        overhead: { per_model_turn_ms: num(perTurn), per_tool_call_ms: num(perTool) },
        run_start: summaryJson(start),
        floors: {
          sdk_turn_gap_one_call: summaryJson(floorNarrow),
          [`sdk_turn_gap_${WIDE}_calls`]: summaryJson(floorWide),
        },
        memory: {
          concurrent_runs: memory.concurrent,
          idle_rss_mib: num(memory.idle_rss_mib),
          active_rss_mib: num(memory.active_rss_mib),
          after_rss_mib: num(memory.after_rss_mib),
          per_run_kib: num(memory.per_run_kib),
        },
        host_log_lines: hostLines.length,
      });
    }
    return 0;
  } catch (e) {
    process.stderr.write(`bench failed: ${e instanceof Error ? e.message : String(e)}\n`);
    process.stderr.write(`--- host.log (tail) ---\n${f.hostLog().slice(-30).join('\n')}\n`);
    return 1;
  } finally {
    await f.stop();
    f.remove();
  }
}

runJsonOnlyBench('local-agent', main);
