import * as fs from 'node:fs';
import * as path from 'node:path';
import type { DataSourceOptions } from 'typeorm';
import type { DatabaseConfig } from '@libs/config';
import { busyRetryOf, type BusyRetry } from './busy-retry';
import type { DbSessions } from './db-sessions';
import { ENTITIES } from './entities';
import { MIGRATIONS } from './migrations';

/**
 * How long a statement on the host's SQLite connection waits for a lock another connection holds
 * (the checkpoint worker's, docs/durability.md#sqlite) before SQLITE_BUSY. SQLite waits
 * synchronously — on the host's only JS thread — so it is short: the hot writer then retries its
 * group, and TypeORM its statement or transaction, off the event loop (BUSY_RETRY, bound
 * SQLITE_BUSY_WAIT_MS; sqlite-query-runner.ts), and the checkpoint worker holds the writer lock
 * only for a truncation whose frames are already checkpointed.
 */
export const SQLITE_BUSY_TIMEOUT_MS = 100;

/**
 * TypeORM's options, and on SQLite how its statements wait for a busy writer lock, on PostgreSQL
 * the sessions' identity (both read by openDataSource, which installs the waiting query runner or
 * renames the pool's connections; TypeORM ignores the fields).
 */
export type HostDataSourceOptions = DataSourceOptions & {
  busyRetry?: BusyRetry;
  sessions?: DbSessions;
  /** SQLite: worker threads of the knowledge searches (KnowledgeRepository; unset: defaultReadWorkers()). */
  searchWorkers?: number;
};

/**
 * TypeORM options for either dialect. synchronize is always off; migrations run at boot. On
 * PostgreSQL the pool's connections carry this process's session name and idle-in-transaction
 * timeout (`sessions`: docs/scale-out.md#sessions-of-a-paused-process).
 */
export function dataSourceOptions(db: DatabaseConfig, sessions?: DbSessions): HostDataSourceOptions {
  const common = {
    entities: ENTITIES,
    migrations: MIGRATIONS,
    synchronize: false,
    migrationsRun: true,
    logging: false,
  };
  if (db.type === 'postgres') {
    return {
      ...common,
      type: 'postgres',
      url: db.url,
      extra: { max: 10, ...sessions?.options('pool') },
      ...(sessions ? { sessions } : {}),
    };
  }
  if (db.file !== ':memory:') {
    // The database holds hashed keys, transcripts and state: owner-only (0700 directory, 0600 file).
    const dir = path.dirname(db.file);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.chmodSync(dir, 0o700);
  }
  return {
    ...common,
    type: 'better-sqlite3',
    database: db.file,
    busyRetry: busyRetryOf(db.busyWaitMs),
    ...(db.searchWorkers === undefined ? {} : { searchWorkers: db.searchWorkers }),
    // WAL + synchronous=NORMAL: durable across process crashes, an order of magnitude cheaper
    // per commit than FULL (see bench/dispatch). Auto-checkpoint is off: a worker thread
    // checkpoints (hot/checkpointer.ts), so no commit on the event loop pays for one;
    // journal_size_limit truncates the WAL file back after a checkpoint let it restart.
    prepareDatabase: (sqlite: { pragma(sql: string): unknown; name: string; memory: boolean }) => {
      sqlite.pragma('journal_mode = WAL');
      sqlite.pragma('synchronous = NORMAL');
      sqlite.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
      sqlite.pragma('wal_autocheckpoint = 0');
      sqlite.pragma(`journal_size_limit = ${64 * 1024 * 1024}`);
      if (!sqlite.memory) {
        fs.chmodSync(sqlite.name, 0o600);
      }
    },
  };
}
