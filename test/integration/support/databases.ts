import type { Provider, ValueProvider } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client, DatabaseError } from 'pg';
import type { DataSource } from 'typeorm';
import { APP_CONFIG } from '@libs/config';
import { dataSourceOptions, DbSessions, ENTITIES, HotStore, MIGRATIONS, openDataSource } from '@libs/persistence';

export type DatabaseConfig = Parameters<typeof dataSourceOptions>[0];

/** A throwaway database for one suite: its config, and how to get rid of it. */
export interface TestDatabase {
  readonly config: DatabaseConfig;
  /** false for `:memory:`: every DataSource opened on it sees a fresh, empty database. */
  readonly persistent: boolean;
  dispose(): Promise<void>;
}

export type DatabaseFactory = () => Promise<TestDatabase>;

/** Maintenance connection used to create and drop the per-suite databases. */
const PG_ADMIN_URL = process.env.IT_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function withAdmin<T>(fn: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: PG_ADMIN_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** A fresh PostgreSQL database `rh_it_<random>`, dropped (connections and all) by dispose. */
export const postgresDatabase: DatabaseFactory = async () => {
  const name = `rh_it_${randomBytes(8).toString('hex')}`;
  await withAdmin((c) => c.query(`CREATE DATABASE "${name}"`));
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    config: { type: 'postgres', url: url.toString() },
    persistent: true,
    dispose: async () => {
      await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    },
  };
};

/** A SQLite file in a fresh temp directory (removed with its -wal/-shm files by dispose). */
export const sqliteFileDatabase: DatabaseFactory = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rh-it-'));
  return Promise.resolve({
    config: { type: 'sqlite', file: path.join(dir, 'nested', 'runner-host.sqlite') },
    persistent: true,
    dispose: () => {
      fs.rmSync(dir, { recursive: true, force: true });
      return Promise.resolve();
    },
  });
};

/** An in-memory SQLite database; it lives as long as the DataSource holding it. */
export const sqliteMemoryDatabase: DatabaseFactory = () =>
  Promise.resolve({
    config: { type: 'sqlite', file: ':memory:' },
    persistent: false,
    dispose: () => Promise.resolve(),
  });

/** Backends whose data outlives a DataSource (a second DataSource sees what the first wrote). */
export const PERSISTENT_DIALECTS: Array<[string, DatabaseFactory]> = [
  ['sqlite', sqliteFileDatabase],
  ['postgres', postgresDatabase],
];

/** Every backend the suites run against. */
export const DIALECTS: Array<[string, DatabaseFactory]> = [
  ...PERSISTENT_DIALECTS,
  ['sqlite :memory:', sqliteMemoryDatabase],
];

export function isPostgres(ds: DataSource): boolean {
  return ds.options.type === 'postgres';
}

/** User tables of the connected database (SQLite's internal tables left out), sorted. */
export async function listTables(ds: DataSource): Promise<string[]> {
  const rows: Array<{ name: string }> = isPostgres(ds)
    ? await ds.query(`SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema()`)
    : await ds.query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`);
  return rows.map((r) => r.name).sort();
}

export interface IndexInfo {
  name: string;
  unique: boolean;
  columns: string[];
}

/** Every index of `table` (including the ones backing PRIMARY KEY / UNIQUE), with its columns in order. */
export async function listIndexes(ds: DataSource, table: string): Promise<IndexInfo[]> {
  if (isPostgres(ds)) {
    const rows: Array<{ name: string; unique: boolean; columns: string }> = await ds.query(
      `SELECT i.relname AS name, ix.indisunique AS unique, string_agg(a.attname, ',' ORDER BY k.ord) AS columns
         FROM pg_class t
         JOIN pg_index ix ON ix.indrelid = t.oid
         JOIN pg_class i ON i.oid = ix.indexrelid
         JOIN LATERAL unnest(ix.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
         JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
        WHERE t.relname = $1 AND t.relnamespace = current_schema()::regnamespace
        GROUP BY i.relname, ix.indisunique`,
      [table],
    );
    return rows.map((r) => ({ name: r.name, unique: r.unique, columns: r.columns.split(',') }));
  }
  const list: Array<{ name: string; unique: number }> = await ds.query(`PRAGMA index_list("${table}")`);
  const out: IndexInfo[] = [];
  for (const idx of list) {
    const cols: Array<{ seqno: number; name: string }> = await ds.query(`PRAGMA index_info("${idx.name}")`);
    out.push({
      name: idx.name,
      unique: idx.unique === 1,
      columns: cols.sort((a, b) => a.seqno - b.seqno).map((c) => c.name),
    });
  }
  return out;
}

/**
 * A Nest testing module on `db` with every entity registered, the hot store (the run path's one
 * writer, which reads only `database` from the app config), the identity its sessions carry
 * (`sessions`: one process's connections, as PersistenceModule gives them) and the given providers.
 */
export function storesModule(
  db: TestDatabase,
  providers: Provider[],
  sessions = new DbSessions(),
): Promise<TestingModule> {
  return Test.createTestingModule({
    imports: [
      // As the host opens it (PersistenceModule): on SQLite every caller gets its own query runner
      // behind the connection's gate (sqlite-query-runner.ts), which Transactions counts on.
      TypeOrmModule.forRootAsync({
        useFactory: () => ({ ...dataSourceOptions(db.config, sessions), retryAttempts: 0 }),
        dataSourceFactory: (options) => openDataSource(options!),
      }),
      TypeOrmModule.forFeature(ENTITIES),
    ],
    providers: [
      { provide: APP_CONFIG, useValue: { ...configOf(providers), database: db.config } },
      { provide: DbSessions, useValue: sessions },
      HotStore,
      ...providers.filter((p) => p !== HotStore && !isConfig(p)),
    ],
  }).compile();
}

function isConfig(p: Provider): p is ValueProvider {
  return typeof p === 'object' && 'provide' in p && p.provide === APP_CONFIG && 'useValue' in p;
}

/** The app config a suite gives (its own sections), which the database section is added to. */
function configOf(providers: Provider[]): object {
  const given = providers.find(isConfig);
  return given ? (given.useValue as object) : {};
}

/**
 * What the hot store rejects with when the database refuses a write: the raw driver error
 * (better-sqlite3's SqliteError, pg's DatabaseError), never TypeORM's QueryFailedError.
 */
export interface DriverErrorInfo {
  dialect: 'sqlite' | 'postgres';
  /** SQLITE_CONSTRAINT_UNIQUE…, or the PostgreSQL SQLSTATE (23505…). */
  code: string;
}

/** The driver error `promise` rejects with (fails the test when it resolves or throws something else). */
export async function driverError(promise: Promise<unknown>): Promise<DriverErrorInfo> {
  const outcome = await promise.then(
    (value: unknown) => ({ resolved: value }),
    (error: unknown) => ({ rejected: error }),
  );
  if ('resolved' in outcome) {
    throw new Error(`expected a database error, the write resolved with ${JSON.stringify(outcome.resolved)}`);
  }
  const e = outcome.rejected;
  // Not `instanceof`: the native addon keeps the SqliteError class (and so the Error global) of
  // the first test file's context that loaded it; a later file in the same jest worker sees others.
  const sqlite = e as { name?: unknown; code?: unknown } | null;
  if (
    typeof sqlite === 'object' &&
    sqlite !== null &&
    sqlite.name === 'SqliteError' &&
    typeof sqlite.code === 'string'
  ) {
    return { dialect: 'sqlite', code: sqlite.code };
  }
  if (e instanceof DatabaseError) {
    return { dialect: 'postgres', code: String(e.code) };
  }
  throw e;
}

/** A unique (or primary key) violation, on either dialect. */
export const UNIQUE_VIOLATION = /^(SQLITE_CONSTRAINT_(UNIQUE|PRIMARYKEY)|23505)$/;
/** A NOT NULL violation, on either dialect. */
export const NOT_NULL_VIOLATION = /^(SQLITE_CONSTRAINT_NOTNULL|23502)$/;

/**
 * Undoes the migration `name` and every migration after it, newest first (a migration's spec
 * checks its `up` and `down` whatever migrations came later); returns their names, `name` first.
 */
export async function undoMigrationsFrom(ds: DataSource, name: string): Promise<string[]> {
  const names = MIGRATIONS.map((m) => new m().name);
  const at = names.indexOf(name);
  if (at < 0) {
    throw new Error(`undoMigrationsFrom: no migration ${name}`);
  }
  const undone = names.slice(at);
  for (let i = 0; i < undone.length; i++) {
    await ds.undoLastMigration();
  }
  return undone;
}
