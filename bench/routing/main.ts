import * as fs from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { runJsonOnlyBench } from '../common/cli';
import { BuiltHost, DIST, requireBuilt, waitFor } from '../common/host-process';
import { machineJson, num, writeJson } from '../common/json-out';
import { Child } from '../common/proc';
import { HostHttp } from '../common/http';
import { withClient } from '../dispatch/postgres';
import { fmtDuration, markdownTable, summarize, type Summary } from '../common/stats';
import { BenchDatabase } from '../dispatch/postgres';

/*
 * Dispatch latency with the runner on another process than admission (docs/scale-out.md#routing):
 * two built hosts on one fresh PostgreSQL database, the demo runner (echo) connected to B only.
 * Events without a conversation are posted one at a time at B (runner local: started at once) and
 * at A (routed: stored waiting at A, claimed and dispatched by B after the `conversation` signal),
 * then a burst posted at A concurrently. Per run: POST → terminal status (read by polling
 * GET /v1/runs/{id} every POLL_MS, so its figures carry up to that much), and for routed runs the
 * database's admission → start (`runs.started_at − runs.created_at`, both written on this machine's
 * clock). `BENCH_PG_URL`: the PostgreSQL admin URL.
 */

const RUNNER_MAIN = path.join(DIST, 'apps', 'demo-runner', 'src', 'main.js');
const RUNNER_ID = 'plugin:demo/echo/default';
const SAMPLES = Number(process.env.BENCH_ROUTING_SAMPLES) || 40;
const BURST = Number(process.env.BENCH_ROUTING_BURST) || 40;
const POLL_MS = 5;

interface Phase {
  name: string;
  post_to_terminal_ms: Summary;
  admission_to_start_ms: Summary;
  wall_ms: number;
  failed: number;
}

async function main(opts: { json: string | null }): Promise<number> {
  requireBuilt(RUNNER_MAIN);
  const pgAdmin = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const db = await BenchDatabase.create(pgAdmin);
  const hosts: BuiltHost[] = [];
  const clients: HostHttp[] = [];
  let runner: Child | undefined;
  try {
    const a = await BuiltHost.start({
      tmpPrefix: 'rh-bench-routing-a-',
      databaseUrl: db.url,
      env: { HOST_INSTANCE_ID: 'a' },
    });
    hosts.push(a);
    const b = await BuiltHost.start({
      tmpPrefix: 'rh-bench-routing-b-',
      databaseUrl: db.url,
      env: { HOST_INSTANCE_ID: 'b' },
    });
    hosts.push(b);
    // Each BuiltHost has its own ADMIN_API_KEY and the last process to boot seeds its own as the
    // admin key: A is reached with B's key (a deployment gives every process the same one).
    const aHttp = new HostHttp(a.url, b.adminKey);
    clients.push(aHttp);
    const plugin = (await b.http.expect(201, 'POST', '/v1/admin/plugins', { author: 'demo', name: 'echo' })) as {
      token: string;
    };
    const log = fs.openSync(path.join(b.dataDir, 'runner.log'), 'a');
    runner = new Child(
      'demo-runner',
      RUNNER_MAIN,
      { ...process.env, RUNNERHOST_GRPC_URL: b.grpcAddress, RUNNERHOST_PLUGIN_TOKEN: plugin.token },
      ['ignore', log, log],
    );
    fs.closeSync(log);
    await waitFor('the runner at B and its presence row', 20_000, () => presence(db.url), [runner, a.child, b.child]);
    await b.http.expect(201, 'POST', '/v1/admin/agents', {
      agent_id: 'echo',
      runner_id: RUNNER_ID,
      runner_config: { mode: 'echo' },
    });
    // Warm-up: both paths once.
    await sequential(b.http, b.http, 3, 'started', db.url);
    await sequential(aHttp, b.http, 3, 'queued', db.url);

    const phases: Phase[] = [
      await sequential(b.http, b.http, SAMPLES, 'started', db.url, 'local (admitted at B, runner at B)'),
      await sequential(aHttp, b.http, SAMPLES, 'queued', db.url, 'routed (admitted at A, runner at B)'),
      await burst(aHttp, b.http, BURST, db.url),
    ];
    const rows = phases.map((p) => [
      p.name,
      String(p.post_to_terminal_ms.count),
      fmtDuration(p.post_to_terminal_ms.p50),
      fmtDuration(p.post_to_terminal_ms.p99),
      fmtDuration(p.admission_to_start_ms.p50),
      fmtDuration(p.admission_to_start_ms.p99),
      String(p.failed),
    ]);
    process.stdout.write(
      `${markdownTable(['phase', 'runs', 'POST→terminal p50', 'p99', 'admission→start p50', 'p99', 'failed'], rows)}\n`,
    );
    if (opts.json) {
      writeJson(opts.json, {
        bench: 'routing',
        machine: machineJson(),
        poll_ms: POLL_MS,
        phases: phases.map((p) => ({
          name: p.name,
          failed: p.failed,
          wall_ms: num(p.wall_ms),
          post_to_terminal_ms: summaryJson(p.post_to_terminal_ms),
          admission_to_start_ms: summaryJson(p.admission_to_start_ms),
        })),
      });
    }
    return phases.some((p) => p.failed > 0) ? 1 : 0;
  } finally {
    clients.forEach((c) => c.close());
    await runner?.stop();
    for (const h of hosts.reverse()) {
      await h.stop();
    }
    await db.drop();
  }
}

function summaryJson(s: Summary) {
  return { count: s.count, p50: num(s.p50), p99: num(s.p99), mean: num(s.mean), max: num(s.max) };
}

async function presence(url: string): Promise<boolean> {
  return withClient(url, async (c) => {
    const r = await c.query(`SELECT 1 FROM runner_presence WHERE runner_id = $1`, [RUNNER_ID]);
    return r.rowCount! > 0;
  });
}

/** One event without a conversation posted at `at`: its run id and POST → terminal (ms). */
async function one(
  at: HostHttp,
  reader: HostHttp,
  disposition: string,
): Promise<{ run_id: string; ms: number; ok: boolean }> {
  const t0 = performance.now();
  const r = (await at.expect(202, 'POST', '/v1/events', {
    agent_id: 'echo',
    event: { event_type: 'message.received', source: 'api' },
    input: { text: 'routed hello' },
  })) as { run_id: string; disposition: string };
  if (r.disposition !== disposition) {
    throw new Error(`expected disposition ${disposition}, got ${r.disposition}`);
  }
  for (;;) {
    const run = (await reader.expect(200, 'GET', `/v1/runs/${r.run_id}`)) as { status: string };
    if (run.status !== 'queued' && run.status !== 'running') {
      return { run_id: r.run_id, ms: performance.now() - t0, ok: run.status === 'completed' };
    }
    await sleep(POLL_MS);
  }
}

async function startDelays(url: string, runIds: string[]): Promise<number[]> {
  return withClient(url, async (c) => {
    const r = await c.query<{ d: string }>(
      `SELECT started_at - created_at AS d FROM runs WHERE run_id = ANY($1) AND started_at IS NOT NULL`,
      [runIds],
    );
    return r.rows.map((x) => Number(x.d));
  });
}

async function sequential(
  at: HostHttp,
  reader: HostHttp,
  n: number,
  disposition: string,
  url: string,
  name = 'warm-up',
): Promise<Phase> {
  const t0 = performance.now();
  const done = [];
  for (let i = 0; i < n; i++) {
    done.push(await one(at, reader, disposition));
  }
  return phase(name, done, performance.now() - t0, url);
}

async function burst(a: HostHttp, b: HostHttp, n: number, url: string): Promise<Phase> {
  const t0 = performance.now();
  const posted = await Promise.all(
    Array.from(
      { length: n },
      async () =>
        (await a.expect(202, 'POST', '/v1/events', {
          agent_id: 'echo',
          event: { event_type: 'message.received', source: 'api' },
          input: { text: 'routed hello' },
        })) as { run_id: string },
    ),
  );
  const ids = posted.map((p) => p.run_id);
  // Waits on the database (one query per poll, so the waiting adds no HTTP load to the hosts).
  const ends = await waitFor(
    'the burst to end',
    120_000,
    async () => {
      const rows = await withClient(url, (c) =>
        c.query<{ d: string; status: string }>(
          `SELECT finished_at - created_at AS d, status FROM runs WHERE run_id = ANY($1) AND finished_at IS NOT NULL`,
          [ids],
        ),
      );
      return rows.rows.length === n ? rows.rows : undefined;
    },
    [],
    20,
  );
  const wall = performance.now() - t0;
  return {
    name: `routed burst (${n} at once; admission → end from the database)`,
    post_to_terminal_ms: summarize(ends.map((e) => Number(e.d))),
    admission_to_start_ms: summarize(await startDelays(url, ids)),
    wall_ms: wall,
    failed: ends.filter((e) => e.status !== 'completed').length,
  };
}

async function phase(
  name: string,
  done: { run_id: string; ms: number; ok: boolean }[],
  wall: number,
  url: string,
): Promise<Phase> {
  return {
    name,
    post_to_terminal_ms: summarize(done.map((d) => d.ms)),
    admission_to_start_ms: summarize(
      await startDelays(
        url,
        done.map((d) => d.run_id),
      ),
    ),
    wall_ms: wall,
    failed: done.filter((d) => !d.ok).length,
  };
}

runJsonOnlyBench('routing', main);
