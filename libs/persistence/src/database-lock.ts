import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';

/** Who holds a database lock: written by the holder, read by a process that is refused. */
export interface LockHolder {
  pid: number;
  hostname: string;
  started_at: string;
}

/** A second process tried to open a SQLite database another process is serving. */
export class DatabaseLockedError extends Error {
  constructor(
    readonly databaseFile: string,
    readonly lockFile: string,
    readonly holder: LockHolder | null,
  ) {
    const who = holder
      ? `process ${holder.pid} on ${holder.hostname} (started ${holder.started_at})`
      : 'another process (its pid could not be read)';
    super(
      `the database ${databaseFile} is in use by ${who}; lock file ${lockFile}. ` +
        'Stop that process first, or give this one its own DATA_DIR (several processes share one database only on PostgreSQL).',
    );
    this.name = 'DatabaseLockedError';
  }
}

/**
 * One process per SQLite database: an exclusive lock held for the life of the process.
 *
 * The lock is SQLite's own (a RESERVED lock on a small lock database beside the data file, taken
 * by a write transaction that is never committed), so the operating system releases it when the
 * process ends in any way, kill -9 included: a stale lock file never blocks a restart. The main
 * database cannot carry the lock itself, because the WAL checkpointer opens a second connection
 * to it. The holder's pid is committed before the lock is taken, so a refused process can still
 * read it (a RESERVED lock lets readers in).
 */
export class DatabaseLock {
  private constructor(
    private readonly db: Database.Database,
    readonly lockFile: string,
  ) {}

  static lockFileOf(databaseFile: string): string {
    return `${databaseFile}.lock`;
  }

  /** Takes the lock or throws DatabaseLockedError naming the holder. */
  static acquire(databaseFile: string): DatabaseLock {
    const lockFile = DatabaseLock.lockFileOf(databaseFile);
    fs.mkdirSync(path.dirname(lockFile), { recursive: true, mode: 0o700 });
    const db = new Database(lockFile, { timeout: 0 });
    try {
      fs.chmodSync(lockFile, 0o600);
      db.pragma('journal_mode = DELETE');
      db.exec(
        'CREATE TABLE IF NOT EXISTS holder (id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER, hostname TEXT, started_at TEXT)',
      );
      const me: LockHolder = { pid: process.pid, hostname: os.hostname(), started_at: new Date().toISOString() };
      // One transaction: the holder row is written only by the process that gets the lock.
      db.exec('BEGIN IMMEDIATE');
      db.prepare('INSERT OR REPLACE INTO holder (id, pid, hostname, started_at) VALUES (1, ?, ?, ?)').run(
        me.pid,
        me.hostname,
        me.started_at,
      );
      db.exec('COMMIT');
      db.exec('BEGIN IMMEDIATE'); // held until the process ends
      return new DatabaseLock(db, lockFile);
    } catch (e) {
      if (isBusy(e)) {
        const holder = readHolder(db);
        db.close();
        throw new DatabaseLockedError(databaseFile, lockFile, holder);
      }
      db.close();
      throw e;
    }
  }

  /** Releases the lock (tests; a process that ends releases it anyway). */
  release(): void {
    if (this.db.open) {
      this.db.close();
    }
  }
}

function isBusy(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED';
}

function readHolder(db: Database.Database): LockHolder | null {
  try {
    return (
      (db.prepare('SELECT pid, hostname, started_at FROM holder WHERE id = 1').get() as LockHolder | undefined) ?? null
    );
  } catch {
    return null;
  }
}
