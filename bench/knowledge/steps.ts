import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { documentChunks, type ChunkOptions } from '../../libs/resources/src/knowledge/chunker';
import { runMain, UsageError } from '../common/cli';
import { machineJson, num, writeJson } from '../common/json-out';
import { benchTimeLine, machineLine } from '../common/report';
import { fmtNum, markdownTable } from '../common/stats';

/*
 * The chunker's steps on a large Markdown document, in process: the time of the first chunk (what
 * an upload waits before its first batch: the split into sections, then the first chunk) and the
 * longest single `next()` over the whole document (an event-loop step at worst: the upload takes
 * 128 chunks a batch, docs/models-tools-knowledge.md#uploads-in-batches). Best of 5 runs each;
 * `--base DIR` measures DIR's build (e.g. /work/base) the same way, alternated with this one.
 *
 *   node dist/bench/knowledge/steps.js [--mib 5] [--base DIR] [--json FILE]
 */

const RUNS = 5;
const USAGE = `usage: node dist/bench/knowledge/steps.js [--mib N] [--base DIR] [--json FILE]`;
const OPTS: ChunkOptions = { chunk_size: 1000, chunk_overlap: 100, markdown: true };

type Chunker = typeof documentChunks;

/** `mib` MiB of Markdown: sections of a few paragraphs, a code fence now and then, CRLF line ends. */
function markdown(mib: number): string {
  const parts: string[] = [];
  let size = 0;
  for (let i = 0; size < mib * 1024 * 1024; i++) {
    const section = [
      `${'#'.repeat((i % 3) + 1)} Section ${i}`,
      '',
      `Paragraph ${i} explains the river alpha basin and the cedar ${i % 7}. It goes on for a while, as such text does.`,
      '',
      i % 5 === 0 ? '```sh\n# a comment, not a heading\nmake all\n```' : `- item ${i}\n- another item`,
      '',
    ].join('\r\n');
    parts.push(section);
    size += section.length;
  }
  return parts.join('\r\n');
}

function steps(chunker: Chunker, text: string): { first: number; longest: number; chunks: number } {
  let first = Infinity;
  let longest = 0;
  let chunks = 0;
  const it = chunker(text, OPTS);
  for (;;) {
    const t = performance.now();
    const r = it.next();
    const dt = performance.now() - t;
    if (chunks === 0) {
      first = dt;
    }
    longest = Math.max(longest, dt);
    if (r.done) {
      break;
    }
    chunks++;
  }
  return { first, longest, chunks };
}

function parseOptions(argv: string[]): { mib: number; base: string | null; json: string | null } {
  try {
    const { values } = parseArgs({
      args: argv,
      strict: true,
      options: { mib: { type: 'string' }, base: { type: 'string' }, json: { type: 'string' } },
    });
    const mib = Number(values.mib ?? '5');
    if (!(mib > 0)) {
      throw new Error('--mib: a positive number');
    }
    return { mib, base: values.base ?? null, json: values.json ?? null };
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
}

/** Synchronous (the steps are measured on the main thread); runMain gets it as a promise. */
function main(): number {
  const opts = parseOptions(process.argv.slice(2));
  const started = performance.now();
  const load = os.loadavg()[0];
  const text = markdown(opts.mib);
  /* eslint-disable @typescript-eslint/no-require-imports -- another build's module, by path */
  const base = opts.base
    ? (
        require(path.resolve(opts.base, 'dist', 'libs', 'resources', 'src', 'knowledge', 'chunker.js')) as {
          documentChunks: Chunker;
        }
      ).documentChunks
    : null;
  /* eslint-enable @typescript-eslint/no-require-imports */
  const builds: [string, Chunker][] = [
    ['this build', documentChunks],
    ...(base ? [[opts.base ?? '', base] as [string, Chunker]] : []),
  ];
  const best = new Map<string, { first: number; longest: number; chunks: number }>();
  for (let r = 0; r < RUNS; r++) {
    for (const [name, chunker] of r % 2 === 0 ? builds : [...builds].reverse()) {
      const s = steps(chunker, text);
      const b = best.get(name);
      best.set(
        name,
        b ? { first: Math.min(b.first, s.first), longest: Math.min(b.longest, s.longest), chunks: s.chunks } : s,
      );
    }
  }
  const rows = [...best].map(([name, s]) => ({
    build: name,
    first_ms: num(s.first),
    longest_ms: num(s.longest),
    chunks: s.chunks,
  }));
  process.stdout.write(
    [
      `# Markdown chunking, ${opts.mib} MiB (${text.length} characters), chunk_size ${OPTS.chunk_size}: best of ${RUNS}`,
      '',
      markdownTable(
        ['build', 'first chunk (ms)', 'longest step (ms)', 'chunks'],
        rows.map((r) => [r.build, fmtNum(r.first_ms ?? NaN), fmtNum(r.longest_ms ?? NaN), String(r.chunks)]),
      ),
      '',
      machineLine(),
      benchTimeLine(started, load),
      '',
    ].join('\n'),
  );
  if (opts.json) {
    writeJson(opts.json, {
      bench: 'knowledge-steps',
      mib: opts.mib,
      runs: RUNS,
      options: OPTS,
      rows,
      machine: machineJson(),
    });
  }
  return 0;
}

runMain(() => Promise.resolve().then(main), USAGE);
