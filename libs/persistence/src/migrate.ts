import type { Pool } from 'pg';
import { DataSource } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';
import type { HostDataSourceOptions } from './data-source';
import { checkPostgresVersion } from './pg-version';
import { retryBusySqlite } from './sqlite-query-runner';

/** The session advisory lock that serialises migrations of processes sharing one PostgreSQL. */
export const MIGRATION_LOCK_KEY = 0x52484d47; // "RHMG"

/**
 * Opens the data source and runs pending migrations once, also when several host processes start
 * on one PostgreSQL at the same moment (docs/deployment.md): the migrations run under a session
 * advisory lock, so the second process waits, then finds nothing pending. SQLite has one process
 * per file (docs/durability.md#one-process-per-sqlite-database): migrations run as TypeORM does.
 * PostgreSQL older than the host needs is refused first (docs/deployment.md#postgresql-version).
 */
export async function openDataSource(options: HostDataSourceOptions): Promise<DataSource> {
  if (options.type !== 'postgres') {
    // SQLite: TypeORM's statements wait for a busy writer lock like the hot writer
    // (docs/durability.md#a-busy-writer-lock), migrations included.
    const ds = new DataSource(options);
    retryBusySqlite(ds, options.busyRetry);
    return ds.initialize();
  }
  const ds = await new DataSource({ ...options, migrationsRun: false }).initialize();
  // A connection made before the registry renamed this process is renamed at its next use.
  options.sessions?.watch((ds.driver as PostgresDriver).master as Pool, 'pool');
  try {
    // A server too old for the host's statements is refused before any migration runs.
    await checkPostgresVersion(ds);
    await runMigrationsLocked(ds);
  } catch (e) {
    await ds.destroy();
    throw e;
  }
  return ds;
}

/** Runs pending migrations (all in one transaction) while holding the migration lock (PostgreSQL). */
export async function runMigrationsLocked(ds: DataSource): Promise<void> {
  const holder = ds.createQueryRunner();
  await holder.connect();
  try {
    await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      await ds.runMigrations({ transaction: 'all' });
    } finally {
      await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await holder.release();
  }
}
