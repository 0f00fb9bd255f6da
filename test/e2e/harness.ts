import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';

// Black-box harness: the host and the demo runner run as child processes from the build output
// (npm test builds first); tests talk HTTP and gRPC to them like any client would.

const ROOT = path.resolve(__dirname, '..', '..');
const HOST_MAIN = path.join(ROOT, 'dist/apps/host/src/main.js');
const RUNNER_MAIN = path.join(ROOT, 'dist/apps/demo-runner/src/main.js');
export const ADMIN_KEY = 'e2e-admin-key-0123456789abcdef';

/**
 * A short process lease for a host started after another was killed: on PostgreSQL a process takes
 * over only runs of processes declared dead (heartbeat older than the lease:
 * docs/scale-out.md#dead-owner-sweep), so a restart waits for the killed one's lease; on SQLite the
 * restart takes them at boot.
 */
export const SHORT_LEASE = { PROCESS_HEARTBEAT_MS: '200', PROCESS_LEASE_MS: '1000' };

/** Until no run of `runIds` is `running` in the database any more (the killed owner's runs taken over). */
export async function takenOver(db: TestDatabase, runIds: readonly string[]): Promise<void> {
  const ids = new Set(runIds);
  await waitFor('runs of the killed process taken over', async () =>
    (await dbRows(db, 'runs')).every((r) => !ids.has(r.run_id as string) || r.status !== 'running'),
  );
}
const PG_ADMIN_URL = process.env.E2E_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs = 15_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) {
      return v;
    }
    if (Date.now() > until) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A database for one test file: a fresh SQLite dir, or a fresh PostgreSQL database when E2E_DATABASE=postgres. */
export class TestDatabase {
  readonly dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rh-e2e-'));
  private pgName: string | null = null;

  /** `postgres`: PostgreSQL whatever E2E_DATABASE says (several host processes need it). */
  constructor(private readonly only?: 'postgres') {}

  async url(): Promise<string | undefined> {
    if (this.only !== 'postgres' && process.env.E2E_DATABASE !== 'postgres') {
      return undefined;
    }
    if (!this.pgName) {
      this.pgName = `rh_e2e_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
      const c = new Client({ connectionString: PG_ADMIN_URL });
      await c.connect();
      await c.query(`CREATE DATABASE ${this.pgName}`);
      await c.end();
    }
    return PG_ADMIN_URL.replace(/\/[^/]*$/, `/${this.pgName}`);
  }

  async drop(): Promise<void> {
    fs.rmSync(this.dataDir, { recursive: true, force: true });
    if (this.pgName) {
      const c = new Client({ connectionString: PG_ADMIN_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${this.pgName} WITH (FORCE)`);
      await c.end();
    }
  }
}

export interface Proc {
  child: ChildProcess;
  logs: () => string;
  stop: (signal?: NodeJS.Signals) => Promise<number | null>;
  /**
   * Resolves once the process has exited and its stdout and stderr are closed: everything it
   * logged is in `logs()` then (at 'exit' the pipes may still hold some of it).
   */
  closed: Promise<void>;
}

/**
 * Starts `main`. Its stdout and stderr go to a pipe read by this process, or (`toFile`) to a file
 * of its own: a process whose log writes to a file are synchronous (the demo runner's
 * `process.stdout.write`) has every line it wrote before an action in `logs()` as soon as the
 * action's effect is seen — no pipe that may not have been read yet (see `logged`).
 */
function launch(main: string, env: Record<string, string>, toFile = false): Proc {
  let logs: () => string;
  let child: ChildProcess;
  if (toFile) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rh-e2e-log-'));
    const file = path.join(dir, 'log');
    const fd = fs.openSync(file, 'a');
    try {
      child = spawn(process.execPath, [main], { env: { ...process.env, ...env }, stdio: ['ignore', fd, fd] });
    } finally {
      fs.closeSync(fd);
    }
    let kept: string | null = null;
    logs = () => kept ?? fs.readFileSync(file, 'utf8');
    child.on('close', () => {
      kept = fs.readFileSync(file, 'utf8');
      fs.rmSync(dir, { recursive: true, force: true });
    });
  } else {
    child = spawn(process.execPath, [main], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: string[] = [];
    child.stdout!.on('data', (d: Buffer) => chunks.push(d.toString()));
    child.stderr!.on('data', (d: Buffer) => chunks.push(d.toString()));
    logs = () => chunks.join('');
  }
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  return {
    child,
    closed,
    logs,
    stop: async (signal: NodeJS.Signals = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
      }
      return exited;
    },
  };
}

export class Host {
  proc!: Proc;
  http = '';
  grpc = '';
  /** The metrics listener (METRICS_PORT): GET `${metrics}/metrics`. */
  metrics = '';

  constructor(
    readonly db: TestDatabase,
    private readonly extraEnv: Record<string, string> = {},
  ) {}

  /**
   * Launches the host and waits until it is ready. The ports are picked free just before the
   * launch, so another process can take one in between: a host that exits on EADDRINUSE is
   * launched again on new ports. Any other exit before readiness, or no readiness within 60 s,
   * fails with the host's exit code and the end of its log.
   */
  async start(): Promise<this> {
    for (let attempt = 1; ; attempt++) {
      const proc = await this.launch();
      const ready = await waitFor(
        'host readiness',
        async () => {
          if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
            return 'exited';
          }
          return (await fetch(`${this.http}/health/ready`)).ok ? 'ready' : false;
        },
        60_000,
      ).catch((e: unknown) => {
        throw new Error(`${e instanceof Error ? e.message : String(e)}; host log:\n${proc.logs().slice(-4000)}`);
      });
      if (ready === 'ready') {
        return this;
      }
      // The exit is seen before the end of the log may have been read.
      await proc.closed;
      if (attempt < 3 && proc.logs().includes('EADDRINUSE')) {
        continue;
      }
      const how = proc.child.exitCode !== null ? `code ${proc.child.exitCode}` : `signal ${proc.child.signalCode}`;
      throw new Error(`the host exited before it was ready (${how}); host log:\n${proc.logs().slice(-4000)}`);
    }
  }

  /** Starts the process without waiting for readiness (for a host that is expected to refuse to start). */
  async launch(): Promise<Proc> {
    const [port, grpcPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
    const url = await this.db.url();
    this.http = `http://127.0.0.1:${port}`;
    this.grpc = `127.0.0.1:${grpcPort}`;
    this.metrics = `http://127.0.0.1:${metricsPort}`;
    this.proc = launch(HOST_MAIN, {
      PORT: String(port),
      HOST: '127.0.0.1',
      GRPC_PORT: String(grpcPort),
      GRPC_HOST: '127.0.0.1',
      DATA_DIR: this.db.dataDir,
      ADMIN_API_KEY: ADMIN_KEY,
      LOG_LEVEL: 'info',
      CANCEL_GRACE_MS: '1000',
      // Teardowns stop hosts with SIGTERM: runs still active end `interrupted` after 1 s (graceful-shutdown tests set their own).
      SHUTDOWN_GRACE_MS: '1000',
      METRICS_PORT: String(metricsPort),
      ...(url ? { DATABASE_URL: url } : {}),
      ...this.extraEnv,
    });
    return this.proc;
  }

  async api<T = any>(
    method: string,
    p: string,
    body?: unknown,
    key: string | null = ADMIN_KEY,
    headers: Record<string, string> = {},
  ) {
    const res = await fetch(`${this.http}${p}`, {
      method,
      headers: {
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
  }

  /** Reads a run's SSE stream to its end. */
  async sse(runId: string, opts: { after?: number; lastEventId?: string } = {}): Promise<SseEvent[]> {
    const q = opts.after !== undefined ? `?after=${opts.after}` : '';
    const res = await fetch(`${this.http}/v1/runs/${runId}/events${q}`, {
      headers: {
        authorization: `Bearer ${ADMIN_KEY}`,
        ...(opts.lastEventId ? { 'last-event-id': opts.lastEventId } : {}),
      },
    });
    if (res.status !== 200) {
      throw new Error(`SSE answered ${res.status}: ${await res.text()}`);
    }
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    return parseSse(await res.text());
  }

  async stop(signal?: NodeJS.Signals) {
    return this.proc?.stop(signal);
  }
}

export interface SseEvent {
  id: number;
  event: string;
  data: { run_id: string; sequence: number; type: string; data: any; usage: any; source: string };
}

export function parseSse(text: string): SseEvent[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() && !block.startsWith(':'))
    .map((block) => {
      const fields: Record<string, string> = {};
      for (const line of block.split('\n')) {
        const i = line.indexOf(':');
        fields[line.slice(0, i)] = line.slice(i + 1).trimStart();
      }
      return { id: Number(fields.id), event: fields.event, data: JSON.parse(fields.data) };
    });
}

/**
 * The complete lines of a log (each ended by its line feed): the last one may still be being read
 * from the pipe (or written), and a part of a JSON line does not parse.
 */
export function completeLines(logs: string): string[] {
  return logs
    .slice(0, logs.lastIndexOf('\n') + 1)
    .split('\n')
    .filter((l) => l.trim() !== '');
}

/**
 * Waits until `logs()` holds `line`. A process logs before it answers, but its stdout pipe and the
 * socket the answer comes on reach the test separately: a log line asserted right after an answer
 * (or a database row) may not have been read yet.
 */
export async function logged(logs: () => string, line: string | RegExp, timeoutMs?: number): Promise<void> {
  await waitFor(
    `the log line ${String(line)}`,
    () => Promise.resolve(typeof line === 'string' ? logs().includes(line) : line.test(logs())),
    timeoutMs,
  );
}

/** Waits until the runner is listed as connected. */
export async function runnerConnected(host: Host, runnerId = 'plugin:demo/echo/default'): Promise<void> {
  await waitFor('runner connected', async () => {
    const r = await host.api<any[]>('GET', '/v1/admin/runners');
    return r.body.find((x) => x.runner_id === runnerId && x.state === 'connected');
  });
}

/** Starts the demo runner (as a child process) with a plugin token it already has. */
export function launchDemoRunner(
  host: Host,
  token: string,
  opts: { author?: string; name?: string; env?: Record<string, string> } = {},
): Proc {
  // To a file: the runner logs with synchronous writes (apps/demo-runner/src/log.ts), so a line it
  // logged before it answered for a run is in logs() once the run's answer is seen.
  return launch(
    RUNNER_MAIN,
    {
      RUNNERHOST_GRPC_URL: host.grpc,
      RUNNERHOST_PLUGIN_TOKEN: token,
      RUNNERHOST_PLUGIN_AUTHOR: opts.author ?? 'demo',
      RUNNERHOST_PLUGIN_NAME: opts.name ?? 'echo',
      ...opts.env,
    },
    true,
  );
}

/** Registers a plugin, starts the demo runner for it and waits until its runner is connected. */
export async function startDemoRunner(
  host: Host,
  opts: { author?: string; name?: string; env?: Record<string, string> } = {},
) {
  const author = opts.author ?? 'demo';
  const name = opts.name ?? 'echo';
  const reg = await host.api('POST', '/v1/admin/plugins', { author, name });
  expect(reg.status).toBe(201);
  const runner = launchDemoRunner(host, reg.body.token as string, { author, name, env: opts.env });
  const runnerId = `plugin:${author}/${name}/default`;
  await runnerConnected(host, runnerId);
  return { runner, runnerId, token: reg.body.token as string };
}

export function event(agentId: string, text: string, extra: Record<string, unknown> = {}) {
  return {
    agent_id: agentId,
    event: { event_type: 'message.received', source: 'api' },
    conversation: { conversation_id: `conv-${Math.random().toString(36).slice(2)}` },
    actor: { actor_type: 'user', actor_id: 'u1' },
    input: { text },
    ...extra,
  };
}

/** Every row of one table of the host's database, read directly (SQLite file or PostgreSQL). */
export async function dbRows(db: TestDatabase, table: string): Promise<Record<string, unknown>[]> {
  if (!/^[a-z_]+$/.test(table)) {
    throw new Error(`not a table name: ${table}`);
  }
  const url = await db.url();
  if (url) {
    const c = new Client({ connectionString: url });
    await c.connect();
    try {
      return (await c.query(`SELECT * FROM ${table}`)).rows;
    } finally {
      await c.end();
    }
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- only the SQLite runs need the native module
  const Sqlite = require('better-sqlite3') as typeof import('better-sqlite3');
  const sqlite = new Sqlite(path.join(db.dataDir, 'runner-host.sqlite'), { readonly: true, fileMustExist: true });
  try {
    return sqlite.prepare(`SELECT * FROM ${table}`).all() as Record<string, unknown>[];
  } finally {
    sqlite.close();
  }
}
