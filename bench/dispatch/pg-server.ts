import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';

/*
 * What the PostgreSQL server did for a level, per run: the commits of the bench database
 * (`pg_stat_database.xact_commit`: every transaction, the pool's autocommit reads included) and
 * the WAL flushes of the whole server (`pg_stat_wal.wal_sync`: with the default
 * synchronous_commit=on each commit that wrote WAL waits for one, unless a neighbour's flush
 * already covered it). SQLite in WAL mode with synchronous=NORMAL (the host's setting) pays no
 * flush per commit: this is the part of the PostgreSQL ÷ SQLite gap the disk sets, shown in every
 * run. Read over the admin URL (not counted in the bench database); the bench never changes a
 * server setting: the flush time is given only when `track_wal_io_timing` is already on.
 *
 * PostgreSQL (15+) publishes a backend's counters at most once a second, so the window starts one
 * second into the level (both ends then lag by the same load) and counts the runs completed within
 * it. `pg_stat_wal` is server-wide: the commits of other databases in the window are given beside
 * it (another engineer's tests on the same server raise both).
 */

export interface PgCounters {
  walSyncs: number;
  /** ms, cumulative; meaningful only when `timing`. */
  walSyncMs: number;
  timing: boolean;
  commits: number;
  otherCommits: number;
}

export interface PgServerLevel {
  /** Runs completed between the two readings. */
  runs: number;
  commitsPerRun: number;
  walSyncsPerRun: number;
  /** Mean ms per WAL flush in the window; null when track_wal_io_timing is off. */
  walSyncMs: number | null;
  /** Commits of the server's other databases in the window (their flushes are in walSyncsPerRun too). */
  otherCommits: number;
  windowMs: number;
}

const READ = `SELECT w.wal_sync::float8 AS wal_syncs, w.wal_sync_time AS wal_sync_ms,
  current_setting('track_wal_io_timing') = 'on' AS timing,
  (SELECT coalesce(sum(xact_commit) FILTER (WHERE datname = $1), 0)::float8 FROM pg_stat_database) AS commits,
  (SELECT coalesce(sum(xact_commit) FILTER (WHERE datname IS DISTINCT FROM $1), 0)::float8 FROM pg_stat_database) AS other_commits
FROM pg_stat_wal w`;

export async function readPgCounters(c: Client, database: string): Promise<PgCounters> {
  const r = await c.query<{
    wal_syncs: number;
    wal_sync_ms: number;
    timing: boolean;
    commits: number;
    other_commits: number;
  }>(READ, [database]);
  const row = r.rows[0];
  return {
    walSyncs: row.wal_syncs,
    walSyncMs: row.wal_sync_ms,
    timing: row.timing,
    commits: row.commits,
    otherCommits: row.other_commits,
  };
}

/** The per-run figures between two readings with `runs` runs completed between them. */
export function pgServerLevel(before: PgCounters, after: PgCounters, runs: number, windowMs: number): PgServerLevel {
  if (runs <= 0) {
    throw new Error(`pgServerLevel: no run completed in the ${Math.round(windowMs)} ms window`);
  }
  const syncs = after.walSyncs - before.walSyncs;
  return {
    runs,
    commitsPerRun: (after.commits - before.commits) / runs,
    walSyncsPerRun: syncs / runs,
    walSyncMs: before.timing && after.timing && syncs > 0 ? (after.walSyncMs - before.walSyncMs) / syncs : null,
    otherCommits: Math.max(0, after.otherCommits - before.otherCommits),
    windowMs,
  };
}

/** How far into a level its window starts: one second (the stats' publishing interval), at most a quarter of the level. */
export const windowDelayMs = (levelMs: number): number => Math.min(1000, levelMs / 4);

/**
 * Reads the counters `windowDelayMs` into a level and once `done` resolves; `completed()` gives
 * the runs completed so far. Null (and a progress note) if the server cannot be read: the level's
 * own figures stand without it.
 */
export async function pgServerWindow(
  adminUrl: string,
  database: string,
  levelMs: number,
  completed: () => number,
  done: Promise<unknown>,
  note: (msg: string) => void,
): Promise<PgServerLevel | null> {
  const c = new Client({ connectionString: adminUrl });
  try {
    await c.connect();
    await sleep(windowDelayMs(levelMs));
    const t0 = performance.now();
    const n0 = completed();
    const before = await readPgCounters(c, database);
    await done;
    const n1 = completed();
    const after = await readPgCounters(c, database);
    return pgServerLevel(before, after, n1 - n0, performance.now() - t0);
  } catch (e) {
    note(`PostgreSQL server counters not read: ${e instanceof Error ? e.message : String(e)}`);
    return null;
  } finally {
    await c.end().catch(() => undefined);
  }
}
