import * as os from 'node:os';
import { performance } from 'node:perf_hooks';
import { encodingFor, TokenCounter } from '../../libs/resources/src/models/tokenizer';
import { HUGE_TEXT_CHARS } from '../../libs/resources/src/models/bounded-bpe';
import { runJsonOnlyBench } from '../common/cli';
import { machineJson, num, writeJson } from '../common/json-out';
import { benchTimeLine, machineLine } from '../common/report';
import { fmtDuration, fmtInt, markdownTable } from '../common/stats';

/*
 * Token counting benchmark (in process, no host): the host's bounded counter (libs/resources
 * tokenizer.ts + bounded-bpe.ts) on o200k_base, per KB of input, for normal English text and for
 * inputs whose exact BPE is quadratic (one unbroken ASCII word, CJK without spaces), 2k to 1M
 * characters; beside plain js-tiktoken `encode` on the same normal text as the baseline (and on
 * the unbroken inputs where it finishes in seconds). Also the longest the event loop waited while
 * the same inputs were counted with `requestAsync` (the host's path), and a repeated count of an
 * unchanged message (the LRU). Sync times are the fastest of 3 runs up to 64k characters.
 *
 *   npm run bench:tokens -- [--json FILE]   (builds, then runs dist/bench/tokens/main.js; about a minute)
 */

const SIZES = [2_048, 16_384, 65_536, 262_144, 1_048_576];
/** Plain js-tiktoken on unbroken input only up to here (4k: ~1 s, 32k: 83 s). */
const PLAIN_UNBROKEN_MAX = 4_096;

const ENGLISH =
  'The quick brown fox jumps over the lazy dog, then reads a paragraph about token counting. ' +
  'Models bill input by tokens; a count is needed before the request is sent.\n';
const CJK = '我们今天去公园散步天气很好阳光明媚大家都很开心';

const INPUTS: Record<string, (n: number) => string> = {
  'normal English': (n) => ENGLISH.repeat(Math.ceil(n / ENGLISH.length)).slice(0, n),
  'unbroken word (x…)': (n) => 'x'.repeat(n),
  'CJK, no spaces': (n) => CJK.repeat(Math.ceil(n / CJK.length)).slice(0, n),
};

const progress = (msg: string): void => {
  process.stderr.write(`bench: ${msg}\n`);
};

/** The fastest of `reps` runs of `fn` (JIT and load noise only ever add time). */
function timed<T>(fn: () => T, reps = 1): { ms: number; value: T } {
  let best = Infinity;
  let value!: T;
  for (let i = 0; i < reps; i++) {
    const t = performance.now();
    value = fn();
    best = Math.min(best, performance.now() - t);
  }
  return { ms: best, value };
}

/** Repetitions of a timed count: 3 up to 64k characters, else 1. */
const repsFor = (chars: number): number => (chars <= 65_536 ? 3 : 1);

/** The longest gap between turns of a 1 ms timer chain while `work` runs. */
async function maxLoopGap(work: () => Promise<unknown>): Promise<number> {
  let last = performance.now();
  let max = 0;
  let on = true;
  const tick = () => {
    const now = performance.now();
    max = Math.max(max, now - last);
    last = now;
    if (on) {
      setTimeout(tick, 1);
    }
  };
  setTimeout(tick, 1);
  await work();
  on = false;
  return max;
}

interface Row {
  input: string;
  chars: number;
  tokens: number;
  estimated: boolean;
  bounded_ms: number;
  bounded_ms_per_kb: number;
  plain_ms_per_kb: number | null;
  async_ms: number;
  async_max_loop_gap_ms: number;
}

async function main(opts: { json: string | null }): Promise<number> {
  const started = performance.now();
  const loadBefore = os.loadavg()[0];
  progress('building the o200k_base encoder');
  const enc = encodingFor('o200k_base');
  const counter = new TokenCounter('o200k_base');
  counter.text(INPUTS['normal English'](20_000)); // warm-up
  enc.encode(INPUTS['normal English'](20_000), [], []);

  const rows: Row[] = [];
  for (const [input, make] of Object.entries(INPUTS)) {
    for (const chars of SIZES) {
      progress(`${input}, ${chars} characters`);
      const text = make(chars);
      const b = timed(() => counter.text(text), repsFor(chars));
      let plainMs: number | null = null;
      if (input === 'normal English' || chars <= PLAIN_UNBROKEN_MAX) {
        plainMs = timed(() => enc.encode(text, [], []).length, input === 'normal English' ? repsFor(chars) : 1).ms;
      }
      let asyncMs = 0;
      let estimated = false;
      const gap = await maxLoopGap(async () => {
        const t = performance.now();
        // Each (input, size) is a new message: the LRU does not answer it.
        const r = await counter.requestAsync([{ role: 'user', content: text }], []);
        asyncMs = performance.now() - t;
        estimated = r.estimated;
      });
      const kb = chars / 1024;
      rows.push({
        input,
        chars,
        tokens: b.value,
        estimated,
        bounded_ms: b.ms,
        bounded_ms_per_kb: b.ms / kb,
        plain_ms_per_kb: plainMs === null ? null : plainMs / kb,
        async_ms: asyncMs,
        async_max_loop_gap_ms: gap,
      });
    }
  }

  // The LRU: the same long message counted again.
  const message = [{ role: 'user' as const, content: INPUTS['CJK, no spaces'](16_384) }];
  const first = timed(() => counter.request(message, []));
  const again = timed(() => counter.request(message, []));

  const out: string[] = [];
  out.push('# bench/tokens: bounded token counting (o200k_base, in process)', '');
  out.push(machineLine(), '');
  out.push(
    markdownTable(
      [
        'input',
        'chars',
        'tokens',
        'bounded count',
        'bounded / KB',
        'plain js-tiktoken / KB',
        'async count (host path)',
        'max event-loop gap',
      ],
      rows.map((r) => [
        r.input,
        fmtInt(r.chars),
        `${fmtInt(r.tokens)}${r.chars > HUGE_TEXT_CHARS ? ' (bytes)' : ''}`,
        fmtDuration(r.bounded_ms),
        fmtDuration(r.bounded_ms_per_kb),
        r.plain_ms_per_kb === null ? 'not run (quadratic)' : fmtDuration(r.plain_ms_per_kb),
        `${fmtDuration(r.async_ms)}${r.estimated ? ' (budget: upper estimate)' : ''}`,
        fmtDuration(r.async_max_loop_gap_ms),
      ]),
    ),
    '',
  );
  out.push(
    `Baseline: plain js-tiktoken on normal English text (same run). Texts over ${fmtInt(HUGE_TEXT_CHARS)} characters count their UTF-8 bytes.`,
    `Unchanged message counted again (16,384 CJK characters): first ${fmtDuration(first.ms)}, again ${fmtDuration(again.ms)} (LRU hit).`,
    '',
    benchTimeLine(started, loadBefore),
  );
  process.stdout.write(out.join('\n') + '\n');
  if (opts.json) {
    writeJson(opts.json, {
      bench: 'tokens',
      machine: machineJson(),
      rows: rows.map((r) => ({
        ...r,
        bounded_ms: num(r.bounded_ms),
        bounded_ms_per_kb: num(r.bounded_ms_per_kb),
        plain_ms_per_kb: r.plain_ms_per_kb === null ? null : num(r.plain_ms_per_kb),
        async_ms: num(r.async_ms),
        async_max_loop_gap_ms: num(r.async_max_loop_gap_ms),
      })),
      lru: { first_ms: num(first.ms), again_ms: num(again.ms) },
    });
  }
  return 0;
}

runJsonOnlyBench('tokens', main);
