import * as fs from 'node:fs';
import { BuiltHost } from '../../bench/common/host-process';

/*
 * The host of the demo: the built host (dist/apps/host) as a child process with SQLite in a fresh
 * temp DATA_DIR, loopback ports, a generated admin key; its log goes to a file in DATA_DIR (the
 * bench helper BuiltHost). Plus a small JSON/SSE client for the HTTP API.
 */

export interface ResultEvent {
  id: number;
  type: string;
  data: any;
}

export class DemoHost {
  private constructor(private readonly built: BuiltHost) {}

  get dataDir(): string {
    return this.built.dataDir;
  }

  get url(): string {
    return this.built.url;
  }

  /** `env` is added to the host's environment. The demo always uses the embedded SQLite database. */
  static async start(env: Record<string, string>): Promise<DemoHost> {
    return new DemoHost(
      await BuiltHost.start({ tmpPrefix: 'runner-host-demo-', keyPrefix: 'demo-admin-', env, pollMs: 100 }),
    );
  }

  log(): string {
    return fs.readFileSync(this.built.logFile, 'utf8');
  }

  async api<T = any>(method: string, p: string, body?: unknown): Promise<{ status: number; body: T }> {
    const r = await this.built.http.json(method, p, body);
    return { status: r.status, body: r.body as T };
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
    const res = await fetch(`${this.url}/v1/runs/${runId}/events`, { headers: this.built.http.headers() });
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

  /** A run's delivery ops so far (the deliveries SSE read to its end: the run has ended). */
  async deliveries(runId: string): Promise<{ op: string; payload: Record<string, any> }[]> {
    const res = await fetch(`${this.url}/v1/runs/${runId}/deliveries`, { headers: this.built.http.headers() });
    if (res.status !== 200) {
      throw new Error(`GET /v1/runs/${runId}/deliveries answered ${res.status}`);
    }
    return (await res.text())
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => JSON.parse(l.slice(5)) as { op: string; payload: Record<string, any> });
  }

  async stop(): Promise<void> {
    await this.built.stop();
  }

  remove(): void {
    this.built.removeDataDir();
  }
}
