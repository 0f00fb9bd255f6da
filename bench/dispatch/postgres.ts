import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { Laps, type FloorResult } from './floors';

/*
 * PostgreSQL mode of the bench: a fresh database `bench_<pid>_<n>` per host start (created and
 * dropped over the admin URL, trust auth as in the e2e tests), its row counts afterwards, and the
 * PostgreSQL floor: one-row autocommit insert over one open `pg` connection.
 */

let created = 0;

export class BenchDatabase {
  private constructor(
    private readonly adminUrl: string,
    readonly name: string,
  ) {}

  static async create(adminUrl: string): Promise<BenchDatabase> {
    const name = `bench_${process.pid}_${++created}`;
    await withClient(adminUrl, (c) => c.query(`CREATE DATABASE ${name}`)).catch((e: unknown) => {
      throw new Error(
        `PostgreSQL: cannot create database ${name} over ${redact(adminUrl)}: ${e instanceof Error ? e.message : String(e)} (use --db sqlite, or --pg-url)`,
      );
    });
    return new BenchDatabase(adminUrl, name);
  }

  /** The URL of this database: the admin URL with its database name replaced. */
  get url(): string {
    const u = new URL(this.adminUrl);
    u.pathname = `/${this.name}`;
    return u.toString();
  }

  /** Row count of every table in the public schema. */
  async tableCounts(): Promise<Record<string, number>> {
    return withClient(this.url, async (c) => {
      const tables = await c.query<{ name: string }>(
        "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
      );
      const counts: Record<string, number> = {};
      for (const { name } of tables.rows) {
        const r = await c.query<{ n: string }>(`SELECT COUNT(*) AS n FROM "${name}"`);
        counts[name] = Number(r.rows[0].n);
      }
      return counts;
    });
  }

  async drop(): Promise<void> {
    await withClient(this.adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${this.name} WITH (FORCE)`));
  }
}

/** One short-lived pg connection for `fn` (the benches' bookkeeping queries). */
export async function withClient<T>(url: string, fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}

/** One-row insert per transaction (autocommit) into a fresh table of a fresh database. */
export async function postgresFloor(adminUrl: string, warmupMs: number, durationMs: number): Promise<FloorResult> {
  const db = await BenchDatabase.create(adminUrl);
  try {
    return await withClient(db.url, async (c) => {
      await c.query(
        'CREATE TABLE results (id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, sequence INTEGER NOT NULL, ' +
          'type TEXT NOT NULL, data TEXT NOT NULL, created_at TIMESTAMPTZ NOT NULL)',
      );
      const insert = (i: number) =>
        c.query({
          name: 'floor-insert',
          text: 'INSERT INTO results (run_id, sequence, type, data, created_at) VALUES ($1, $2, $3, $4, $5)',
          values: ['0b7e1c1e-6a35-4d3b-9a53-5f0e0c1f2a3b', i, 'message.delta', '{"text":" bench"}', new Date()],
        });
      let i = 0;
      const warmupEnd = performance.now() + warmupMs;
      while (performance.now() < warmupEnd) {
        await insert(i++);
      }
      const laps = new Laps(durationMs);
      while (laps.running()) {
        await insert(i++);
        laps.lap();
      }
      return laps.result();
    });
  } finally {
    await db.drop();
  }
}
