import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/*
 * The host of the demo: the built host (dist/apps/host) as a child process with SQLite in a fresh
 * temp DATA_DIR, loopback ports, a generated admin key; its log goes to a file in DATA_DIR. Plus
 * a small JSON/SSE client for the HTTP API.
 */

const HOST_MAIN = path.resolve(__dirname, '..', '..', 'apps', 'host', 'src', 'main.js');

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface ResultEvent {
  id: number;
  type: string;
  data: any;
}

export class DemoHost {
  private constructor(
    readonly dataDir: string,
    readonly url: string,
    private readonly adminKey: string,
    private readonly child: ChildProcess,
  ) {}

  static async start(env: Record<string, string>): Promise<DemoHost> {
    if (!fs.existsSync(HOST_MAIN)) {
      throw new Error(`${HOST_MAIN} is missing: run npm run build first`);
    }
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'runner-host-demo-'));
    const [port, grpcPort] = [await freePort(), await freePort()];
    const adminKey = `demo-admin-${randomBytes(16).toString('hex')}`;
    const log = fs.openSync(path.join(dataDir, 'host.log'), 'a');
    const hostEnv: NodeJS.ProcessEnv = {
      ...process.env,
      ...env,
      HOST: '127.0.0.1',
      PORT: String(port),
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(grpcPort),
      DATA_DIR: dataDir,
      ADMIN_API_KEY: adminKey,
      LOG_LEVEL: 'warn',
    };
    delete hostEnv.DATABASE_URL; // the demo always uses the embedded SQLite database
    const child = spawn(process.execPath, [HOST_MAIN], { env: hostEnv, stdio: ['ignore', log, log] });
    fs.closeSync(log);
    const host = new DemoHost(dataDir, `http://127.0.0.1:${port}`, adminKey, child);
    const until = Date.now() + 30_000;
    for (;;) {
      if (child.exitCode !== null) {
        throw new Error(`the host exited (${child.exitCode}); its log:\n${host.log()}`);
      }
      const ready = await fetch(`${host.url}/health/ready`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) {
        return host;
      }
      if (Date.now() > until) {
        throw new Error(`the host did not get ready in 30 s; its log:\n${host.log()}`);
      }
      await sleep(100);
    }
  }

  log(): string {
    return fs.readFileSync(path.join(this.dataDir, 'host.log'), 'utf8');
  }

  async api<T = any>(method: string, p: string, body?: unknown): Promise<{ status: number; body: T }> {
    const res = await fetch(`${this.url}${p}`, {
      method,
      headers: {
        authorization: `Bearer ${this.adminKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
  }

  /** Like api(), but a status other than `status` is an error naming the call and the answer. */
  async expect<T = any>(status: number, method: string, p: string, body?: unknown): Promise<T> {
    const r = await this.api<T>(method, p, body);
    if (r.status !== status) {
      throw new Error(`${method} ${p} answered ${r.status}: ${JSON.stringify(r.body)}`);
    }
    return r.body;
  }

  /** Follows a run's result stream to its end, handing each result to `on` as it arrives. */
  async follow(runId: string, on: (e: ResultEvent) => void | Promise<void>): Promise<ResultEvent[]> {
    const res = await fetch(`${this.url}/v1/runs/${runId}/events`, {
      headers: { authorization: `Bearer ${this.adminKey}` },
    });
    if (res.status !== 200 || !res.body) {
      throw new Error(`GET /v1/runs/${runId}/events answered ${res.status}`);
    }
    const all: ResultEvent[] = [];
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(bytes, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const fields = Object.fromEntries(
          block
            .split('\n')
            .filter((l) => l && !l.startsWith(':'))
            .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trimStart()]),
        );
        if (fields.data) {
          const result = JSON.parse(fields.data as string) as { type: string; data: unknown };
          const e = { id: Number(fields.id), type: result.type, data: result.data };
          all.push(e);
          await on(e);
        }
      }
    }
    return all;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve));
      this.child.kill('SIGTERM');
      await exited;
    }
  }

  remove(): void {
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}
