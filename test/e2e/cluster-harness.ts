import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import {
  ADMIN_KEY,
  Host,
  TestDatabase,
  completeLines,
  freePort,
  launchDemoRunner,
  parseSse,
  waitFor,
  type Proc,
  type SseEvent,
} from './harness';
import { completeFrames } from './sse-client';

/*
 * Scale-out e2e (issue 17 item 7, docs/scale-out.md): N host processes from the build output on
 * one PostgreSQL database, each with its own ports and DATA_DIR, a short heartbeat / lease / poll,
 * and a shared signal bus: `postgres` (LISTEN/NOTIFY) or `nats` (a private nats-server on a free
 * port, so a spec can stop "the bus" without touching anyone else's). Helpers to kill -9, pause,
 * resume, SIGTERM and restart one process, to spread clients over them, and `checkCluster`: every
 * 202-answered event has exactly one run, every run is terminal, every result a reader saw is
 * still in the replay, no run was handed to a runner twice (DEMO_LOG_RUNS=1).
 *
 * The cluster is always on PostgreSQL (several processes on one SQLite file are refused:
 * database-lock.e2e-spec.ts). Which bus: E2E_CLUSTER_BUS, else `postgres` in the PostgreSQL e2e
 * run (E2E_DATABASE=postgres) and `nats` in the SQLite one, so `npm test` covers both buses once.
 */

const PG_ADMIN_URL = process.env.E2E_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const NATS_SERVER = process.env.E2E_NATS_SERVER ?? '/usr/sbin/nats-server';

export type ClusterBus = 'postgres' | 'nats';

export function clusterBus(): ClusterBus {
  const forced = process.env.E2E_CLUSTER_BUS;
  if (forced === 'postgres' || forced === 'nats') {
    return forced;
  }
  if (forced) {
    throw new Error(`E2E_CLUSTER_BUS must be postgres or nats, not ${forced}`);
  }
  return process.env.E2E_DATABASE === 'postgres' ? 'postgres' : 'nats';
}

/** Timing of every process of a cluster: a dead process is declared dead within about a second. */
export const CLUSTER_TIMING = { heartbeatMs: 200, leaseMs: 1000, pollMs: 200 };

/** One PostgreSQL database for the whole cluster, whatever E2E_DATABASE says. */
export class ClusterDatabase {
  private readonly name = `rh_e2e_cluster_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  private created = false;
  readonly url = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${this.name}`);

  async create(): Promise<void> {
    if (this.created) {
      return;
    }
    const c = new Client({ connectionString: PG_ADMIN_URL });
    await c.connect();
    try {
      await c.query(`CREATE DATABASE ${this.name}`);
      this.created = true;
    } finally {
      await c.end();
    }
  }

  async query<T extends Record<string, unknown> = Record<string, unknown>>(
    sql: string,
    params: unknown[] = [],
  ): Promise<T[]> {
    const c = new Client({ connectionString: this.url });
    await c.connect();
    try {
      return (await c.query(sql, params)).rows as T[];
    } finally {
      await c.end();
    }
  }

  async drop(): Promise<void> {
    if (!this.created) {
      return;
    }
    const c = new Client({ connectionString: PG_ADMIN_URL });
    await c.connect();
    try {
      await c.query(`DROP DATABASE IF EXISTS ${this.name} WITH (FORCE)`);
    } finally {
      await c.end();
    }
  }
}

/** One process's view of the cluster database: the shared URL, its own DATA_DIR. */
class NodeDatabase extends TestDatabase {
  constructor(private readonly shared: ClusterDatabase) {
    super();
  }

  override url(): Promise<string> {
    return Promise.resolve(this.shared.url);
  }

  override drop(): Promise<void> {
    fs.rmSync(this.dataDir, { recursive: true, force: true });
    return Promise.resolve();
  }
}

/** A private nats-server (the `nats` bus of one spec file) that can be stopped and started again on its port. */
export class NatsServer {
  private child: ChildProcess | null = null;
  port = 0;
  private readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rh-e2e-nats-'));

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    if (!this.port) {
      this.port = await freePort();
    }
    const child = spawn(
      NATS_SERVER,
      ['-a', '127.0.0.1', '-p', String(this.port), '-l', path.join(this.dir, 'nats.log')],
      {
        stdio: 'ignore',
      },
    );
    this.child = child;
    await waitFor('nats-server listening', async () => {
      if (child.exitCode !== null) {
        throw new Error(`nats-server exited with ${child.exitCode}`);
      }
      return portOpen(this.port);
    });
  }

  async stop(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
  }

  async dispose(): Promise<void> {
    await this.stop();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

async function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

export interface ClusterOptions {
  /** Number of host processes (default 3). */
  size?: number;
  bus?: ClusterBus;
  /** Extra environment of every process. */
  env?: Record<string, string>;
}

/** One host process of a cluster; `restart()` starts a new process in its place (new ports, new registry id). */
export class ClusterNode {
  host: Host;
  paused = false;

  constructor(
    readonly index: number,
    readonly name: string,
    private readonly db: NodeDatabase,
    private readonly env: Record<string, string>,
  ) {
    this.host = new Host(db, env);
  }

  get http(): string {
    return this.host.http;
  }

  get grpc(): string {
    return this.host.grpc;
  }

  get pid(): number {
    return this.host.proc.child.pid!;
  }

  get instance(): string {
    return this.env.HOST_INSTANCE_ID;
  }

  get alive(): boolean {
    const c = this.host.proc?.child;
    return !!c && c.exitCode === null && c.signalCode === null;
  }

  api<T = any>(
    method: string,
    p: string,
    body?: unknown,
    key: string | null = ADMIN_KEY,
    headers: Record<string, string> = {},
  ) {
    return this.host.api<T>(method, p, body, key, headers);
  }

  async start(): Promise<this> {
    await this.host.start();
    return this;
  }

  /** kill -9: no shutdown hook runs, its registry row stays until another process sweeps it. */
  async kill(): Promise<void> {
    if (this.paused) {
      this.host.proc.child.kill('SIGCONT');
      this.paused = false;
    }
    await this.host.stop('SIGKILL');
  }

  /** SIGSTOP: the process keeps its sockets but answers nothing and heartbeats nothing. */
  pause(): void {
    this.host.proc.child.kill('SIGSTOP');
    this.paused = true;
  }

  resume(): void {
    this.host.proc.child.kill('SIGCONT');
    this.paused = false;
  }

  /**
   * SIGTERM; resolves with how the process ended: its exit code, or the signal (Nest's shutdown
   * hooks re-raise SIGTERM after closing the app, so a clean stop today ends with `SIGTERM`; the
   * exit deadline ends with 1).
   */
  async terminate(): Promise<number | NodeJS.Signals | null> {
    if (this.paused) {
      this.resume();
    }
    await this.host.stop('SIGTERM');
    const c = this.host.proc.child;
    return c.exitCode ?? c.signalCode;
  }

  /** A new process in this one's place (same DATA_DIR and environment, new ports). */
  async restart(): Promise<this> {
    if (this.alive) {
      await this.terminate();
    }
    this.host = new Host(this.db, this.env);
    await this.host.start();
    return this;
  }

  logs(): string {
    return this.host.proc?.logs() ?? '';
  }

  async dispose(): Promise<void> {
    if (this.alive) {
      if (this.paused) {
        this.resume();
      }
      await this.host.stop('SIGKILL');
    }
    await this.db.drop();
  }
}

export interface RegistryRow {
  id: string;
  instance: string;
  state: string;
  http_address: string;
  grpc_address: string;
}

export class Cluster {
  readonly db = new ClusterDatabase();
  readonly bus: ClusterBus;
  readonly nats: NatsServer | null;
  readonly nodes: ClusterNode[] = [];
  readonly runners: Proc[] = [];
  private readonly size: number;
  private readonly env: Record<string, string>;

  constructor(opts: ClusterOptions = {}) {
    this.bus = opts.bus ?? clusterBus();
    this.size = opts.size ?? 3;
    this.env = opts.env ?? {};
    this.nats = this.bus === 'nats' ? new NatsServer() : null;
  }

  /** Creates the database and the bus, then starts every process at once (they race for the migration lock). */
  async start(): Promise<this> {
    await this.db.create();
    await this.nats?.start();
    for (let i = 0; i < this.size; i++) {
      const name = String.fromCharCode(65 + i); // A, B, C, ...
      const env: Record<string, string> = {
        HOST_INSTANCE_ID: `e2e-node-${name}`,
        SIGNAL_BUS: this.bus,
        SIGNAL_POLL_MS: String(CLUSTER_TIMING.pollMs),
        PROCESS_HEARTBEAT_MS: String(CLUSTER_TIMING.heartbeatMs),
        PROCESS_LEASE_MS: String(CLUSTER_TIMING.leaseMs),
        ADVERTISE_HOST: '127.0.0.1',
        ...(this.nats ? { NATS_URL: this.nats.url } : {}),
        ...this.env,
      };
      this.nodes.push(new ClusterNode(i, name, new NodeDatabase(this.db), env));
    }
    await Promise.all(this.nodes.map((n) => n.start()));
    return this;
  }

  node(name: string): ClusterNode {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) {
      throw new Error(`no node ${name}`);
    }
    return n;
  }

  /** The live nodes, round-robin: `spread(i)` is the node of the i-th client. */
  spread(i: number): ClusterNode {
    const live = this.nodes.filter((n) => n.alive && !n.paused);
    if (live.length === 0) {
      throw new Error('no live process in the cluster');
    }
    return live[i % live.length];
  }

  /** The rows of host_processes (the registry), read directly. */
  async registry(): Promise<RegistryRow[]> {
    return this.db.query<RegistryRow & Record<string, unknown>>(
      'SELECT id, instance, state, http_address, grpc_address FROM host_processes ORDER BY instance',
    );
  }

  /** Registers a plugin (at `via`), starts the demo runner connected to `at`, waits until `at` lists it connected. */
  async startRunner(
    at: ClusterNode,
    opts: { via?: ClusterNode; author?: string; name?: string; env?: Record<string, string> } = {},
  ): Promise<{ runner: Proc; runnerId: string; token: string }> {
    const author = opts.author ?? 'demo';
    const name = opts.name ?? 'echo';
    const reg = await (opts.via ?? at).api('POST', '/v1/admin/plugins', { author, name });
    if (reg.status !== 201) {
      throw new Error(`registering ${author}/${name} answered ${reg.status}: ${JSON.stringify(reg.body)}`);
    }
    const token = reg.body.token as string;
    const runner = this.connectRunner(at, token, { author, name, env: opts.env });
    const runnerId = `plugin:${author}/${name}/default`;
    await runnerConnectedAt(at, runnerId);
    return { runner, runnerId, token };
  }

  /**
   * Creates agents bound to `runnerId` through `via`'s admin API, each with its runner_config (an
   * admin write at one process that the others read when they admit: the database is the only
   * truth). Throws naming the agent when one is not created.
   */
  async bindAgents(via: ClusterNode, runnerId: string, agents: Record<string, Record<string, unknown>>): Promise<void> {
    for (const [agent_id, runner_config] of Object.entries(agents)) {
      const created = await via.api('POST', '/v1/admin/agents', { agent_id, runner_id: runnerId, runner_config });
      if (created.status !== 201) {
        throw new Error(`creating agent ${agent_id} answered ${created.status}: ${JSON.stringify(created.body)}`);
      }
    }
  }

  /** Starts one more demo runner process with a token it has, connected to `at` (DEMO_LOG_RUNS on). */
  connectRunner(
    at: ClusterNode,
    token: string,
    opts: { author?: string; name?: string; env?: Record<string, string> } = {},
  ): Proc {
    const runner = launchDemoRunner(at.host, token, {
      author: opts.author,
      name: opts.name,
      env: { DEMO_LOG_RUNS: '1', ...opts.env },
    });
    this.runners.push(runner);
    return runner;
  }

  /**
   * How many times each run was handed to a runner, over every runner process this cluster started.
   * Complete for every run that has ended: a runner writes its `run executing` line (synchronously,
   * to its log file: `launchDemoRunner`) before it sends anything for the run, so the line is in
   * `logs()` once the run's end is seen — the count cannot miss a line not yet read from a pipe.
   */
  executions(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const r of this.runners) {
      for (const line of completeLines(r.logs())) {
        if (!line.includes('"msg":"run executing"')) {
          continue;
        }
        const runId = (JSON.parse(line) as { run_id: string }).run_id;
        counts.set(runId, (counts.get(runId) ?? 0) + 1);
      }
    }
    return counts;
  }

  /** Every process's log, labelled (for a failing spec's message). */
  logs(): string {
    return this.nodes.map((n) => `--- ${n.name} ---\n${n.logs()}`).join('\n');
  }

  async stop(): Promise<void> {
    await Promise.all(this.runners.map((r) => r.stop('SIGKILL')));
    await Promise.all(this.nodes.map((n) => n.dispose()));
    await this.nats?.dispose();
    await this.db.drop();
  }
}

/** Waits until `node` lists the runner as connected. */
export async function runnerConnectedAt(node: ClusterNode, runnerId: string, timeoutMs = 15_000): Promise<void> {
  await waitFor(
    `${runnerId} connected at ${node.name}`,
    async () => {
      const r = await node.api<any[]>('GET', '/v1/admin/runners');
      return r.body.find((x) => x.runner_id === runnerId && x.state === 'connected');
    },
    timeoutMs,
  );
}

/** What one reader saw of a run's stream, and how the stream ended. */
export interface Reading {
  runId: string;
  node: string;
  events: SseEvent[];
  /** `terminal`: the stream ended after the run's terminal result; `cut`: it ended before (the process died); `error`: not 200. */
  end: 'terminal' | 'cut' | 'error';
  status: number;
}

const TERMINAL_TYPES = new Set(['run.completed', 'run.failed']);

/** Follows a run's SSE stream at `node` until it ends (or `timeoutMs`), keeping every complete frame (a cut stream is not an error). */
export async function follow(
  node: ClusterNode,
  runId: string,
  headers: Record<string, string> = {},
  timeoutMs = 90_000,
): Promise<Reading> {
  let status = 0;
  let body = '';
  try {
    const res = await fetch(`${node.http}/v1/runs/${runId}/events`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}`, ...headers },
      // A stream that never ends (a process that never learns of the run's end) is cut here and reported as `cut`.
      signal: AbortSignal.timeout(timeoutMs),
    });
    status = res.status;
    if (status !== 200) {
      return { runId, node: node.name, events: [], end: 'error', status };
    }
    const decoder = new TextDecoder();
    const reader = res.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        break;
      }
      body += decoder.decode(value, { stream: true });
    }
  } catch {
    // the connection was cut (the process died): keep what arrived
  }
  const events = parseSse(completeFrames(body));
  const last = events[events.length - 1];
  return {
    runId,
    node: node.name,
    events,
    end: last && TERMINAL_TYPES.has(last.data.type) ? 'terminal' : 'cut',
    status,
  };
}

/** A run's whole stream replayed at `node` (after its end). */
export async function replay(node: ClusterNode, runId: string): Promise<SseEvent[]> {
  const r = await follow(node, runId);
  if (r.status !== 200) {
    throw new Error(`replay of ${runId} at ${node.name} answered ${r.status}`);
  }
  return r.events;
}

export interface ClusterCheck {
  /** Event ids answered 202 whose run count is not exactly 1: event id → count. */
  eventsWithoutOneRun: Record<string, number>;
  /** Runs not in a terminal status: run id → status. */
  notTerminal: Record<string, string>;
  /** Results a reader saw that the replay does not hold (or holds differently). */
  lostResults: { runId: string; node: string; sequence: number; type: string }[];
  /** Runs handed to a runner more than once: run id → count. */
  executedTwice: Record<string, number>;
  /** Runs by status (for the spec's own expectations). */
  statuses: Record<string, number>;
}

const TERMINAL_STATUSES = ['completed', 'failed', 'cancelled', 'timeout', 'interrupted'];

/**
 * The acceptance check of issue 17: every event answered 202 has exactly one run, every run is
 * terminal, every result any reader saw is in the replay at `replayAt` (same sequence, type and
 * data), no run was executed twice. Read once everything has settled.
 */
export async function checkCluster(
  cluster: Cluster,
  admitted: { eventId: string; runId: string }[],
  readings: Reading[],
  replayAt: ClusterNode,
): Promise<ClusterCheck> {
  const eventIds = admitted.map((a) => a.eventId);
  const runIds = admitted.map((a) => a.runId);
  const perEvent = await cluster.db.query<{ event_id: string; n: string }>(
    'SELECT event_id, COUNT(*) AS n FROM runs WHERE event_id = ANY($1) GROUP BY event_id',
    [eventIds],
  );
  const counts = new Map(perEvent.map((r) => [r.event_id, Number(r.n)]));
  const eventsWithoutOneRun: Record<string, number> = {};
  for (const id of eventIds) {
    if ((counts.get(id) ?? 0) !== 1) {
      eventsWithoutOneRun[id] = counts.get(id) ?? 0;
    }
  }
  const runs = await cluster.db.query<{ run_id: string; status: string }>(
    'SELECT run_id, status FROM runs WHERE run_id = ANY($1)',
    [runIds],
  );
  const notTerminal: Record<string, string> = {};
  const statuses: Record<string, number> = {};
  for (const r of runs) {
    statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    if (!TERMINAL_STATUSES.includes(r.status)) {
      notTerminal[r.run_id] = r.status;
    }
  }
  const lostResults: ClusterCheck['lostResults'] = [];
  const replays = new Map<string, Map<number, string>>();
  for (const reading of readings) {
    if (!replays.has(reading.runId)) {
      const events = await replay(replayAt, reading.runId);
      replays.set(reading.runId, new Map(events.map((e) => [e.data.sequence, JSON.stringify(e.data)])));
    }
    const held = replays.get(reading.runId)!;
    for (const e of reading.events) {
      if (held.get(e.data.sequence) !== JSON.stringify(e.data)) {
        lostResults.push({ runId: reading.runId, node: reading.node, sequence: e.data.sequence, type: e.data.type });
      }
    }
  }
  const executedTwice: Record<string, number> = {};
  for (const [runId, n] of cluster.executions()) {
    if (n > 1) {
      executedTwice[runId] = n;
    }
  }
  return { eventsWithoutOneRun, notTerminal, lostResults, executedTwice, statuses };
}

/** An event body whose conversation and event id are fresh (the caller keeps the id). */
export function clusterEvent(agentId: string, text: string, extra: Record<string, unknown> = {}) {
  const id = Math.random().toString(36).slice(2);
  return {
    agent_id: agentId,
    event: { event_id: `evt-${id}`, event_type: 'message.received', source: 'api' },
    conversation: { conversation_id: `conv-${id}` },
    actor: { actor_type: 'user', actor_id: 'u1' },
    input: { text },
    ...extra,
  };
}

/**
 * A round-robin TCP balancer in front of the gRPC ports of a cluster's live processes (what an L4
 * load balancer does for long-lived runner streams): each new connection goes to the next live,
 * unpaused process; a connection whose process dies is cut, and the runner's reconnect lands on
 * another one.
 */
export class GrpcBalancer {
  private server: net.Server | null = null;
  private next = 0;
  private readonly sockets = new Set<net.Socket>();
  address = '';

  constructor(private readonly cluster: Cluster) {}

  async start(): Promise<this> {
    const server = net.createServer((client) => this.route(client));
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.address = `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    return this;
  }

  private route(client: net.Socket): void {
    const live = this.cluster.nodes.filter((n) => n.alive && !n.paused);
    if (live.length === 0) {
      client.destroy();
      return;
    }
    const node = live[this.next++ % live.length];
    const [hostName, port] = node.grpc.split(':');
    const upstream = net.connect(Number(port), hostName);
    this.sockets.add(client).add(upstream);
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) {
      s.destroy();
    }
    const server = this.server;
    this.server = null;
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }
}
