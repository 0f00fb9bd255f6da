import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { HOST_NODE_FLAGS } from '@libs/config';
import { HostHttp } from './http';
import { Child } from './proc';

/*
 * The built host (dist/apps/host) as a child process of a bench or the demo: a fresh temp
 * DATA_DIR (SQLite unless DATABASE_URL is given), free loopback ports, a generated admin key,
 * LOG_LEVEL=warn, its stdout/stderr in DATA_DIR/host.log, and a JSON client once it is ready.
 */

/** The root of the build (dist/): this file is dist/bench/common/host-process.js. */
export const DIST = path.resolve(__dirname, '..', '..');
/**
 * The host under test: this build's, or BENCH_HOST_DIST's (another build's dist/, e.g. a base build
 * for an A/B with this build's bench client and runner).
 */
export const HOST_MAIN = path.join(process.env.BENCH_HOST_DIST ?? DIST, 'apps', 'host', 'src', 'main.js');

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Throws naming the first missing file: the benches and the demo run from dist/. */
export function requireBuilt(...files: string[]): void {
  for (const file of files) {
    if (!fs.existsSync(file)) {
      throw new Error(`${file} is missing: run npm run build first`);
    }
  }
}

export interface HostEnvOptions {
  port: number;
  grpcPort: number;
  dataDir: string;
  adminKey: string;
  /** More variables (rate limits, model keys…), applied over the inherited environment. */
  extra?: Record<string, string>;
  /** Inherited variables the host must not see. */
  unset?: string[];
  /** PostgreSQL URL; without it the host uses SQLite in dataDir even if DATABASE_URL is set. */
  databaseUrl?: string | null;
}

/** The host's environment: this process's, plus the listen addresses, data dir and admin key. */
export function hostEnv(o: HostEnvOptions): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...o.extra,
    HOST: '127.0.0.1',
    PORT: String(o.port),
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: String(o.grpcPort),
    DATA_DIR: o.dataDir,
    ADMIN_API_KEY: o.adminKey,
    LOG_LEVEL: 'warn',
    // Several hosts may run at once: an ephemeral metrics port unless the bench names one.
    METRICS_PORT: o.extra?.METRICS_PORT ?? '0',
  };
  for (const name of ['DATABASE_URL', ...(o.unset ?? [])]) {
    delete env[name];
  }
  if (o.databaseUrl) {
    env.DATABASE_URL = o.databaseUrl;
  }
  return env;
}

/**
 * The host's node flags: those `npm start` uses (HOST_NODE_FLAGS, so the benches measure the host
 * as it is started), then BENCH_HOST_NODE_ARGS, extra flags for the host only, e.g. "--cpu-prof
 * --cpu-prof-dir=/tmp/prof" (a V8 flag given again there wins: it comes last).
 */
export function hostNodeArgs(): string[] {
  return [...HOST_NODE_FLAGS, ...(process.env.BENCH_HOST_NODE_ARGS ?? '').split(/\s+/).filter((a) => a !== '')];
}

/**
 * Polls `probe` until it answers a value (not undefined/false); a throw counts as not yet. Fails
 * as soon as one of `alive` exits, or after `timeoutMs`.
 */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined | false>,
  alive: Child[] = [],
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const c of alive) {
      if (!c.running) {
        throw new Error(`${c.name} exited (${c.exitStatus ?? '?'}) while waiting for ${what}`);
      }
    }
    const value = await probe().catch(() => undefined);
    if (value !== undefined && value !== false) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await sleep(intervalMs);
  }
}

/** The non-blank lines of a log file; none when it does not exist. */
export function readLines(file: string): string[] {
  try {
    return fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '');
  } catch {
    return [];
  }
}

export interface BuiltHostOptions {
  /** Prefix of the temp DATA_DIR, e.g. 'runner-host-bench-'. */
  tmpPrefix: string;
  /** Prefix of the generated admin key. */
  keyPrefix?: string;
  /** The admin key itself (several hosts on one database share it: the last one booted sets it). */
  adminKey?: string;
  env?: Record<string, string>;
  unset?: string[];
  databaseUrl?: string | null;
  /** Node flags of the host; default hostNodeArgs() (the flags of `npm start`, then BENCH_HOST_NODE_ARGS). */
  nodeArgs?: string[];
  /** Poll interval of the readiness wait. */
  pollMs?: number;
  /** The host's main script (another build's, for an A/B run); default this build's. */
  hostMain?: string;
}

/** The host exited because a port it was given was taken before it could listen on it. */
class PortTaken extends Error {}

/** A started, ready host. stop() closes the client and stops the process; the data dir stays. */
export class BuiltHost {
  private constructor(
    readonly dataDir: string,
    readonly port: number,
    readonly grpcPort: number,
    readonly adminKey: string,
    readonly child: Child,
    readonly http: HostHttp,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get grpcAddress(): string {
    return `127.0.0.1:${this.grpcPort}`;
  }

  /**
   * Spawns the host and waits (30 s at most) for /health/ready; on failure the host is stopped. A
   * host that could not bind a port it was given (another process took it between `freePort` and
   * the host's listen: tests run in parallel) is started again on new ports, twice at most.
   */
  static async start(o: BuiltHostOptions): Promise<BuiltHost> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await BuiltHost.startOnce(o);
      } catch (e) {
        if (!(e instanceof PortTaken) || attempt >= 3) {
          throw e;
        }
      }
    }
  }

  private static async startOnce(o: BuiltHostOptions): Promise<BuiltHost> {
    const hostMain = o.hostMain ?? HOST_MAIN;
    requireBuilt(hostMain);
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), o.tmpPrefix));
    const [port, grpcPort] = [await freePort(), await freePort()];
    const adminKey = o.adminKey ?? `${o.keyPrefix ?? 'bench-admin-'}${randomBytes(18).toString('hex')}`;
    const env = hostEnv({
      port,
      grpcPort,
      dataDir,
      adminKey,
      extra: o.env,
      unset: o.unset,
      databaseUrl: o.databaseUrl,
    });
    const log = fs.openSync(path.join(dataDir, 'host.log'), 'a');
    const child = new Child('host', hostMain, env, ['ignore', log, log], o.nodeArgs ?? hostNodeArgs());
    fs.closeSync(log);
    const host = new BuiltHost(
      dataDir,
      port,
      grpcPort,
      adminKey,
      child,
      new HostHttp(`http://127.0.0.1:${port}`, adminKey),
    );
    try {
      await waitFor(
        'the host to be ready',
        // A loaded shared machine can take longer than 30 s to boot the host: BENCH_HOST_READY_MS.
        Number(process.env.BENCH_HOST_READY_MS) || 30_000,
        async () => (await host.http.json('GET', '/health/ready')).status === 200,
        [child],
        o.pollMs,
      );
    } catch (e) {
      await host.stop();
      const tail = host.logTail();
      const message = `${e instanceof Error ? e.message : String(e)}\n--- host.log (tail) ---\n${tail}`;
      if (tail.includes('EADDRINUSE')) {
        host.removeDataDir();
        throw new PortTaken(message);
      }
      throw new Error(message);
    }
    return host;
  }

  get logFile(): string {
    return path.join(this.dataDir, 'host.log');
  }

  logLines(): string[] {
    return readLines(this.logFile);
  }

  logTail(n = 20): string {
    return this.logLines().slice(-n).join('\n');
  }

  async stop(): Promise<void> {
    this.http.close();
    await this.child.stop();
  }

  removeDataDir(): void {
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}
