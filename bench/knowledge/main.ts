import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { UsageError, runMain } from '../common/cli';
import { BuiltHost } from '../common/host-process';
import { HostHttp } from '../common/http';
import { machineJson, num, writeJson } from '../common/json-out';
import { benchTimeLine, machineLine } from '../common/report';
import { fmtDuration, fmtInt, markdownTable, summarize, type Summary } from '../common/stats';
import { BenchDatabase } from '../dispatch/postgres';

/*
 * Knowledge uploads and searches against the event loop (docs/models-tools-knowledge.md#knowledge-bases):
 * the built host as a child; while it takes a 1.7 MB document at chunk_size 100, and while it
 * answers searches whose words match most chunks of a ~170,000-chunk base, the bench probes
 * GET /health/live one request at a time on its own connection. A probe's latency above the idle
 * one is time the host's event loop was held: the longest probe is the longest block (within one
 * probe's round trip). Same-run floor: the probes of the idle host before the upload.
 */

const USAGE = `usage: node dist/bench/knowledge/main.js [options]
  --db LIST         sqlite, postgres or both (default sqlite)
  --host-dist DIR   the build whose host to run (default this one's dist), e.g. /work/base/dist for A/B
  --chunks N        chunks in the base before the searches (default 170000; 0 skips the search phase)
  --searches N      searches timed (default 40)
  --concurrency N   searches in flight at once (default 1), each loop on its own connection
  --pg-url URL      PostgreSQL admin URL (default $BENCH_PG_URL or postgres://postgres@127.0.0.1:5432/postgres)
  --json FILE       also write the figures as JSON to FILE
  -h, --help        this text`;

interface Options {
  dbs: Array<'sqlite' | 'postgres'>;
  hostMain: string | undefined;
  chunks: number;
  searches: number;
  concurrency: number;
  pgUrl: string;
  json: string | null;
}

function options(argv: string[]): Options | 'help' {
  let v;
  try {
    v = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        db: { type: 'string' },
        'host-dist': { type: 'string' },
        chunks: { type: 'string' },
        searches: { type: 'string' },
        concurrency: { type: 'string' },
        'pg-url': { type: 'string' },
        json: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values;
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  if (v.help) {
    return 'help';
  }
  const dbs = (v.db ?? 'sqlite').split(',').map((d) => d.trim());
  for (const d of dbs) {
    if (d !== 'sqlite' && d !== 'postgres') {
      throw new UsageError(`--db: unknown database ${d}`);
    }
  }
  const int = (name: string, value: string | undefined, dflt: number) => {
    const n = value === undefined ? dflt : Number(value);
    if (!Number.isInteger(n) || n < 0) {
      throw new UsageError(`--${name}: must be a non-negative integer`);
    }
    return n;
  };
  return {
    dbs: dbs as Options['dbs'],
    hostMain: v['host-dist'] ? path.resolve(v['host-dist'], 'apps', 'host', 'src', 'main.js') : undefined,
    chunks: int('chunks', v.chunks, 170_000),
    searches: int('searches', v.searches, 40),
    concurrency: Math.max(1, int('concurrency', v.concurrency, 1)),
    pgUrl: v['pg-url'] ?? process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    json: v.json ?? null,
  };
}

const WORDS = (
  'alpha basin cedar delta ember fjord glacier harbor island jungle kelp lagoon meadow nectar orchard prairie ' +
  'quarry reef savanna tundra upland valley willow xylem yarrow zephyr amber bronze copper ' +
  'granite marble quartz slate'
).split(' ');

/** A deterministic prose document of `bytes` bytes; every sentence names "river". */
function document(bytes: number, seed: number): string {
  let x = seed * 2654435761;
  const next = () => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x;
  };
  const parts: string[] = [];
  let size = 0;
  while (size < bytes) {
    const n = 6 + (next() % 8);
    const words = Array.from({ length: n }, () => WORDS[next() % WORDS.length]);
    const sentence = `The river ${words.join(' ')}.${next() % 7 === 0 ? '\n\n' : ' '}`;
    parts.push(sentence);
    size += sentence.length;
  }
  return parts.join('').slice(0, bytes);
}

/** Probes GET /health/live back to back (1 ms apart) until stopped; latencies in ms. */
class Prober {
  private readonly http: HostHttp;
  private running = true;
  readonly samples: number[] = [];
  private readonly done: Promise<void>;

  constructor(host: BuiltHost) {
    this.http = new HostHttp(host.url, host.adminKey);
    this.done = this.loop();
  }

  private async loop(): Promise<void> {
    while (this.running) {
      const t0 = performance.now();
      const r = await this.http.json('GET', '/health/live', undefined, 60_000);
      if (r.status !== 200) {
        throw new Error(`/health/live answered ${r.status}`);
      }
      this.samples.push(performance.now() - t0);
      await sleep(1);
    }
  }

  async stop(): Promise<Summary> {
    this.running = false;
    await this.done;
    this.http.close();
    return summarize(this.samples);
  }
}

/** POSTs a document (a 2-minute timeout: a loaded machine can take longer than the client's 15 s). */
async function upload(http: HostHttp, name: string, content: string): Promise<{ chunk_count: number }> {
  const r = await http.json(
    'POST',
    '/v1/admin/knowledge-bases/kb/documents',
    { name, content_type: 'text/plain', content },
    120_000,
  );
  if (r.status !== 201) {
    throw new Error(`upload ${name}: ${r.status} ${JSON.stringify(r.body)}`);
  }
  return r.body as { chunk_count: number };
}

interface DbFigures {
  db: string;
  idle_probe: Summary;
  upload_ms: number;
  upload_chunks: number;
  upload_probe: Summary;
  base_chunks: number;
  fill_ms: number;
  search: Summary | null;
  search_hits: number;
  /** Wall time of the whole search phase (all `--searches`, `concurrency` at a time). */
  search_wall_ms: number | null;
  concurrency: number;
  search_probe: Summary | null;
}

async function measure(db: 'sqlite' | 'postgres', o: Options): Promise<DbFigures> {
  const pg = db === 'postgres' ? await BenchDatabase.create(o.pgUrl) : null;
  const host = await BuiltHost.start({
    tmpPrefix: 'runner-host-bench-kb-',
    hostMain: o.hostMain,
    databaseUrl: pg?.url ?? null,
  });
  try {
    const http = host.http;
    await http.expect(201, 'POST', '/v1/admin/knowledge-bases', { kb_id: 'kb', name: 'bench', chunk_size: 100 });
    const idle = new Prober(host);
    await sleep(1_000);
    const idleProbe = await idle.stop();

    // 1. One 1.7 MB upload at chunk_size 100, probed.
    const doc = document(1_700_000, 1);
    const probe = new Prober(host);
    await sleep(50);
    const t0 = performance.now();
    const up = await upload(http, 'doc-1', doc);
    const uploadMs = performance.now() - t0;
    await sleep(50);
    const uploadProbe = await probe.stop();
    process.stderr.write(
      `${db}: upload ${fmtInt(up.chunk_count)} chunks in ${fmtDuration(uploadMs)}, longest probe ${fmtDuration(uploadProbe.max)}\n`,
    );

    // 2. Fill to o.chunks, then time searches matching most chunks, probed.
    let chunks = up.chunk_count;
    const tf = performance.now();
    for (let i = 2; chunks < o.chunks; i++) {
      const r = await upload(http, `doc-${i}`, document(1_700_000, i));
      chunks += r.chunk_count;
    }
    const fillMs = performance.now() - tf;
    let search: Summary | null = null;
    let searchProbe: Summary | null = null;
    let hits = 0;
    let searchWallMs: number | null = null;
    if (o.chunks > 0 && o.searches > 0) {
      const query = { query_text: 'river alpha basin cedar', top_k: 10 };
      for (let i = 0; i < 3; i++) {
        await http.expect(200, 'POST', '/v1/admin/knowledge-bases/kb/search', query);
      }
      const sp = new Prober(host);
      const lat: number[] = [];
      // `--concurrency` loops take the searches one at a time from a shared count, each on its own
      // connection; the wall time of the phase shows whether concurrent searches queue.
      let left = o.searches;
      const w0 = performance.now();
      await Promise.all(
        Array.from({ length: o.concurrency }, async (_, k) => {
          const client = k === 0 ? http : new HostHttp(host.url, host.adminKey);
          while (left > 0) {
            left--;
            const s0 = performance.now();
            const r = (await client.expect(200, 'POST', '/v1/admin/knowledge-bases/kb/search', query)) as {
              results: unknown[];
            };
            lat.push(performance.now() - s0);
            hits = r.results.length;
            await sleep(5);
          }
        }),
      );
      searchWallMs = performance.now() - w0;
      searchProbe = await sp.stop();
      search = summarize(lat);
      process.stderr.write(
        `${db}: ${fmtInt(chunks)} chunks, search p50 ${fmtDuration(search.p50)}, longest probe ${fmtDuration(searchProbe.max)}\n`,
      );
    }
    return {
      db,
      idle_probe: idleProbe,
      upload_ms: uploadMs,
      upload_chunks: up.chunk_count,
      upload_probe: uploadProbe,
      base_chunks: chunks,
      fill_ms: fillMs,
      search,
      search_hits: hits,
      search_wall_ms: searchWallMs,
      concurrency: o.concurrency,
      search_probe: searchProbe,
    };
  } finally {
    await host.stop();
    host.removeDataDir();
    await pg?.drop();
  }
}

async function main(): Promise<number> {
  const o = options(process.argv.slice(2));
  if (o === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const started = performance.now();
  const load = os.loadavg()[0];
  const rows: DbFigures[] = [];
  for (const db of o.dbs) {
    rows.push(await measure(db, o));
  }
  const out: string[] = [
    `# bench/knowledge (host ${o.hostMain ?? 'this build'})`,
    '',
    machineLine(),
    '',
    markdownTable(
      [
        'db',
        'idle probe max',
        'upload (chunks)',
        'upload time',
        'probe max during upload',
        'probe p99 during upload',
        'base chunks',
        'search p50',
        'search max',
        'search phase (wall)',
        'probe max during searches',
      ],
      rows.map((r) => [
        r.db,
        fmtDuration(r.idle_probe.max),
        fmtInt(r.upload_chunks),
        fmtDuration(r.upload_ms),
        fmtDuration(r.upload_probe.max),
        fmtDuration(r.upload_probe.p99),
        fmtInt(r.base_chunks),
        r.search ? fmtDuration(r.search.p50) : '—',
        r.search ? fmtDuration(r.search.max) : '—',
        r.search_wall_ms === null ? '—' : `${fmtDuration(r.search_wall_ms)} (${r.concurrency} at a time)`,
        r.search_probe ? fmtDuration(r.search_probe.max) : '—',
      ]),
    ),
    '',
    benchTimeLine(started, load),
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  if (o.json) {
    const s = (x: Summary | null) =>
      x && { count: x.count, p50_ms: num(x.p50), p99_ms: num(x.p99), max_ms: num(x.max) };
    writeJson(o.json, {
      bench: 'knowledge',
      host: o.hostMain ?? 'this build',
      machine: machineJson(),
      rows: rows.map((r) => ({
        db: r.db,
        idle_probe: s(r.idle_probe),
        upload_ms: num(r.upload_ms),
        upload_chunks: r.upload_chunks,
        upload_probe: s(r.upload_probe),
        base_chunks: r.base_chunks,
        fill_ms: num(r.fill_ms),
        search: s(r.search),
        search_hits: r.search_hits,
        search_wall_ms: r.search_wall_ms === null ? null : num(r.search_wall_ms),
        concurrency: r.concurrency,
        search_probe: s(r.search_probe),
      })),
    });
  }
  return 0;
}

runMain(main, USAGE);
