import { Client } from 'pg';
import { pgServerLevel, readPgCounters, windowDelayMs, type PgCounters } from '../../bench/dispatch/pg-server';
import { postgresDatabase, type TestDatabase } from './support/databases';

jest.setTimeout(60_000);

/**
 * The dispatch bench's PostgreSQL server counters (bench/dispatch/pg-server.ts): a database's
 * commits and the server's WAL flushes, read from the statistics views over another connection.
 */
describe('bench PostgreSQL server counters', () => {
  let db: TestDatabase;
  let admin: Client;
  let name: string;

  beforeAll(async () => {
    db = await postgresDatabase();
    const url = (db.config as { url: string }).url;
    name = new URL(url).pathname.slice(1);
    admin = new Client({ connectionString: process.env.IT_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/test' });
    await admin.connect();
  });

  afterAll(async () => {
    await admin?.end();
    await db?.dispose();
  });

  /** Commits `n` write transactions in the database from a connection of its own, then closes it (its statistics are published as its backend exits). */
  async function commitWrites(n: number): Promise<void> {
    const c = new Client({ connectionString: (db.config as { url: string }).url });
    await c.connect();
    await c.query('CREATE TABLE IF NOT EXISTS t (id serial PRIMARY KEY, v text)');
    for (let i = 0; i < n; i++) {
      await c.query('INSERT INTO t (v) VALUES ($1)', [`row ${i}`]);
    }
    await c.end();
  }

  /** Reads until the database's commits reach `atLeast` (the statistics are published asynchronously). */
  async function countersReaching(atLeast: number): Promise<PgCounters> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const c = await readPgCounters(admin, name);
      if (c.commits >= atLeast || Date.now() > deadline) {
        return c;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it("counts the database's commits and the server's WAL flushes of its write transactions", async () => {
    const before = await readPgCounters(admin, name);
    await commitWrites(5);
    // CREATE TABLE and five inserts: six commits, each of which flushed the WAL (synchronous_commit=on)
    // unless a neighbour's flush covered it.
    const after = await countersReaching(before.commits + 6);
    expect(after.commits - before.commits).toBeGreaterThanOrEqual(6);
    expect(after.walSyncs).toBeGreaterThanOrEqual(before.walSyncs);
    const level = pgServerLevel(before, after, 2, 1000);
    expect(level.runs).toBe(2);
    expect(level.commitsPerRun).toBe((after.commits - before.commits) / 2);
    expect(level.walSyncsPerRun).toBe((after.walSyncs - before.walSyncs) / 2);
  });

  it('gives no time per flush unless track_wal_io_timing was on at both readings', () => {
    const at = (walSyncs: number, walSyncMs: number, timing: boolean): PgCounters => ({
      walSyncs,
      walSyncMs,
      timing,
      commits: walSyncs,
      otherCommits: 0,
    });
    expect(pgServerLevel(at(10, 1, true), at(20, 6, true), 5, 1000).walSyncMs).toBe(0.5);
    expect(pgServerLevel(at(10, 1, false), at(20, 6, true), 5, 1000).walSyncMs).toBeNull();
    expect(pgServerLevel(at(10, 1, true), at(10, 1, true), 5, 1000).walSyncMs).toBeNull();
  });

  it('refuses a window without a completed run', () => {
    const c: PgCounters = { walSyncs: 1, walSyncMs: 0, timing: false, commits: 1, otherCommits: 0 };
    expect(() => pgServerLevel(c, c, 0, 1000)).toThrow('no run completed in the 1000 ms window');
  });

  it('starts the window one second into a level, a quarter of a short one', () => {
    expect(windowDelayMs(6000)).toBe(1000);
    expect(windowDelayMs(2000)).toBe(500);
  });

  it('an unknown database reads zero commits (nothing of another database counted as its own)', async () => {
    const c = await readPgCounters(admin, 'no_such_database_here');
    expect(c.commits).toBe(0);
  });
});
