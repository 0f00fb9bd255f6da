import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { requireBuilt } from '../common/host-process';
import { machineJson, writeJson } from '../common/json-out';
import { benchTimeLine, machineLine } from '../common/report';
import { markdownTable } from '../common/stats';
import { UsageError, runMain } from '../common/cli';
import { aggregateTargets, targetsOf, type TargetSeries } from './aggregate';

/*
 * The run path's targets over several alternated runs of bench/dispatch and bench/host-api (or over
 * --json files already written): per target, each run's same-run ratio, the median and in how many
 * runs it was met. See README.md beside this file.
 */

const DEFAULT_DISPATCH_ARGS =
  '--db sqlite,postgres --levels 1,16,64 --streaming-cases 100x200x1,100x200x10 --level-seconds 6';

const USAGE = `usage: node dist/bench/targets/main.js [options] [FILE.json ...]
  --runs N             rounds of bench/dispatch then bench/host-api, one after the other (default 3,
                       1–20); an odd number gives a median run
  --dispatch-args=STR  the dispatch bench's options, space-separated, after an = (default
                       "${DEFAULT_DISPATCH_ARGS}")
  --no-host-api        run only bench/dispatch
  --dir DIR            where each run's --json file and output go (default a new temp directory, kept)
  --json FILE          also write the aggregate as JSON to FILE
  -h, --help           this text
  FILE.json ...        aggregate these --json files of earlier runs instead of running the benches`;

interface Options {
  runs: number;
  dispatchArgs: string[];
  hostApi: boolean;
  dir: string | null;
  json: string | null;
  files: string[];
}

function parseOptions(argv: string[]): Options | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: true,
      options: {
        runs: { type: 'string' },
        'dispatch-args': { type: 'string' },
        'no-host-api': { type: 'boolean' },
        dir: { type: 'string' },
        json: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  const { values, positionals } = parsed;
  if (values.help) {
    return 'help';
  }
  const runs = values.runs === undefined ? 3 : Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1 || runs > 20) {
    throw new UsageError(`--runs must be an integer from 1 to 20, got ${values.runs}`);
  }
  if (positionals.length > 0 && (values.runs !== undefined || values['dispatch-args'] !== undefined)) {
    throw new UsageError('give either FILE.json arguments or --runs / --dispatch-args, not both');
  }
  const dispatchArgs = (values['dispatch-args'] ?? DEFAULT_DISPATCH_ARGS).split(/\s+/).filter((a) => a !== '');
  if (dispatchArgs.includes('--json')) {
    throw new UsageError('--dispatch-args must not hold --json: each run writes its own into --dir');
  }
  return {
    runs,
    dispatchArgs,
    hostApi: !values['no-host-api'],
    dir: values.dir ?? null,
    json: values.json ?? null,
    files: positionals,
  };
}

/** Runs one bench to completion, its output into `outFile`; resolves with its exit code. */
function runBench(script: string, args: string[], outFile: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const out = fs.openSync(outFile, 'w');
    const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', out, out] });
    child.once('error', (e) => {
      fs.closeSync(out);
      reject(e);
    });
    child.once('exit', (code, signal) => {
      fs.closeSync(out);
      resolve(signal ? 1 : (code ?? 1));
    });
  });
}

interface RunFile {
  bench: string;
  file: string;
  exitCode: number | null;
}

async function runRounds(opts: Options, dir: string): Promise<RunFile[]> {
  const dispatchMain = path.join(__dirname, '..', 'dispatch', 'main.js');
  const hostApiMain = path.join(__dirname, '..', 'host-api', 'main.js');
  requireBuilt(dispatchMain, hostApiMain);
  const files: RunFile[] = [];
  for (let i = 1; i <= opts.runs; i++) {
    const benches: [string, string, string[]][] = [['dispatch', dispatchMain, opts.dispatchArgs]];
    if (opts.hostApi) {
      benches.push(['host-api', hostApiMain, []]);
    }
    for (const [bench, script, args] of benches) {
      const file = path.join(dir, `${bench}-${i}.json`);
      const t0 = performance.now();
      process.stderr.write(`bench: round ${i}/${opts.runs}: ${bench} …`);
      const exitCode = await runBench(script, [...args, '--json', file], path.join(dir, `${bench}-${i}.txt`));
      process.stderr.write(` exit ${exitCode} in ${((performance.now() - t0) / 1000).toFixed(0)} s\n`);
      files.push({ bench, file, exitCode });
    }
  }
  return files;
}

function readRun(f: RunFile): { bench: string; doc: unknown } | null {
  if (!fs.existsSync(f.file)) {
    return null;
  }
  const doc: unknown = JSON.parse(fs.readFileSync(f.file, 'utf8'));
  const named = typeof doc === 'object' && doc !== null ? (doc as { bench?: unknown }).bench : undefined;
  return { bench: typeof named === 'string' ? named : f.bench, doc };
}

function table(series: TargetSeries[], runs: number): string {
  const met = (s: TargetSeries): string =>
    s.met === null ? '—' : `${s.met ? 'yes' : 'no'} (${s.metRuns} of ${s.measured})`;
  return markdownTable(
    ['target', 'database', 'goal', ...Array.from({ length: runs }, (_, i) => `run ${i + 1}`), 'median', 'met (runs)'],
    series.map((s) => [s.target, s.database, s.goal, ...s.texts.map((t) => t ?? '—'), s.medianText, met(s)]),
  );
}

async function main(): Promise<number> {
  const parsed = parseOptions(process.argv.slice(2));
  if (parsed === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const opts = parsed;
  const started = performance.now();
  const load0 = os.loadavg()[0];
  let files: RunFile[];
  let dir: string | null = null;
  if (opts.files.length > 0) {
    files = opts.files.map((file) => ({ bench: '?', file, exitCode: null }));
  } else {
    dir = opts.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'bench-targets-'));
    fs.mkdirSync(dir, { recursive: true });
    files = await runRounds(opts, dir);
  }
  const problems: string[] = [];
  const byBench = new Map<string, unknown[]>();
  for (const f of files) {
    if (f.exitCode !== null && f.exitCode !== 0) {
      problems.push(`${f.file}: the bench exited ${f.exitCode} (see the .txt beside it)`);
    }
    const run = readRun(f);
    if (!run) {
      problems.push(`${f.file}: not written`);
      continue;
    }
    byBench.set(run.bench, [...(byBench.get(run.bench) ?? []), run.doc]);
  }
  const out: string[] = ['', `machine: ${machineLine()}`];
  if (dir) {
    out.push(`each run's output and --json file: ${dir}`);
  }
  const aggregate: Record<string, TargetSeries[]> = {};
  for (const [bench, docs] of byBench) {
    const series = aggregateTargets(docs.map(targetsOf));
    aggregate[bench] = series;
    out.push('', `### Targets of bench/${bench} over ${docs.length} run(s)`, '', table(series, docs.length));
  }
  out.push('', 'A target is met when most runs meet it (with an odd number of runs: when the median run does).');
  if (problems.length > 0) {
    out.push('', '### Problems', '', ...problems.map((p) => `- ${p}`));
  }
  out.push('', benchTimeLine(started, load0));
  process.stdout.write(out.join('\n') + '\n');
  if (opts.json) {
    writeJson(opts.json, {
      bench: 'targets',
      machine: machineJson(),
      runs: files.map((f) => ({ file: f.file, exit_code: f.exitCode })),
      targets: aggregate,
      problems,
    });
  }
  return problems.length > 0 ? 1 : 0;
}

runMain(main, USAGE);
