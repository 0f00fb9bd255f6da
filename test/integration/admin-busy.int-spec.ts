import Database from 'better-sqlite3';
import type { DataSource } from 'typeorm';
import { DomainError } from '@libs/protocol';
import {
  BusyRetryingQueryRunner,
  dataSourceOptions,
  DatabaseBusyError,
  openDataSource,
  Transactions,
  WorkspaceEntity,
} from '@libs/persistence';
import { postgresDatabase, sqliteFileDatabase, type TestDatabase } from './support/databases';
import { stillWaiting } from './support/waiting';

jest.setTimeout(60_000);

const ws = (id: string, name: string): WorkspaceEntity =>
  Object.assign(new WorkspaceEntity(), { workspace_id: id, name, quotas: {}, created_at: 1, updated_at: 1 });

/**
 * TypeORM's writes on SQLite wait for a writer lock another connection holds (an operator's
 * sqlite3 shell, a backup, the checkpoint worker) like the hot writer, then fail 503
 * `database.busy` with nothing written (docs/durability.md#a-busy-writer-lock).
 */
describe('TypeORM writes under a busy SQLite writer lock', () => {
  let db: TestDatabase;
  let ds: DataSource;
  let other: Database.Database;

  async function open(busyWaitMs?: number): Promise<void> {
    const config = db.config.type === 'sqlite' ? { ...db.config, busyWaitMs } : db.config;
    ds = await openDataSource(dataSourceOptions(config));
    other = new Database((db.config as { file: string }).file);
    other.pragma('busy_timeout = 0');
  }

  const names = async (): Promise<string[]> =>
    (await ds.getRepository(WorkspaceEntity).find({ order: { workspace_id: 'ASC' } })).map((w) => w.name);

  beforeEach(async () => {
    db = await sqliteFileDatabase();
  });

  afterEach(async () => {
    if (other?.inTransaction) {
      other.exec('ROLLBACK');
    }
    other?.close();
    await ds?.destroy();
    await db.dispose();
  });

  it('runs every TypeORM statement through a waiting query runner (one per caller, migrations too)', async () => {
    await open();
    expect(ds.createQueryRunner()).toBeInstanceOf(BusyRetryingQueryRunner);
    // Each caller its own runner (test/integration/sqlite-connection.int-spec.ts: their gate).
    expect(ds.createQueryRunner() === ds.createQueryRunner()).toBe(false);
  });

  it('an autocommit write waits for the lock and is written once after it is released', async () => {
    await open();
    other.exec('BEGIN IMMEDIATE');
    const write = ds.getRepository(WorkspaceEntity).insert(ws('a', 'first'));
    expect(await stillWaiting(write)).toBe(true);
    other.exec('COMMIT');
    await write;
    expect(await names()).toEqual(['first', 'Default workspace']);
  });

  it('a transaction takes the lock at BEGIN: it waits before any statement, then runs whole', async () => {
    await open();
    const tx = new Transactions(ds);
    other.exec('BEGIN IMMEDIATE');
    const write = tx.run(async (m) => {
      await m.insert(WorkspaceEntity, ws('a', 'one'));
      await m.insert(WorkspaceEntity, ws('b', 'two'));
    });
    expect(await stillWaiting(write)).toBe(true);
    other.exec('COMMIT');
    await write;
    expect(await names()).toEqual(['one', 'two', 'Default workspace']);
  });

  it('an open TypeORM transaction holds the writer lock (BEGIN IMMEDIATE, not deferred)', async () => {
    await open();
    const tx = new Transactions(ds);
    let seen: unknown;
    await tx.run(async (m) => {
      await m.find(WorkspaceEntity); // a read first: a deferred BEGIN would hold no write lock yet
      try {
        other.exec('BEGIN IMMEDIATE');
      } catch (e) {
        seen = (e as { code?: unknown }).code;
      }
    });
    expect(seen).toBe('SQLITE_BUSY');
  });

  it('past the bound, an autocommit write fails with the retryable database.busy error and writes nothing', async () => {
    await open(150);
    other.exec('BEGIN IMMEDIATE');
    const e = await ds
      .getRepository(WorkspaceEntity)
      .update({ workspace_id: 'default' }, { name: 'changed' })
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(DatabaseBusyError);
    expect((e as DomainError).toProtocol()).toMatchObject({
      code: 'unavailable',
      retryable: true,
      details: { reason: 'database.busy' },
    });
    other.exec('ROLLBACK');
    expect(await names()).toEqual(['Default workspace']);
  });

  it('past the bound, a transaction fails before any statement ran, and the runner stays usable', async () => {
    await open(150);
    const tx = new Transactions(ds);
    other.exec('BEGIN IMMEDIATE');
    let ran = 0;
    const e = await tx
      .run(async (m) => {
        ran++;
        await m.insert(WorkspaceEntity, ws('a', 'one'));
      })
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(DatabaseBusyError);
    expect(ran).toBe(0);
    other.exec('ROLLBACK');
    expect(ds.createQueryRunner().isTransactionActive).toBe(false);
    // A save() starts its own transaction again (the failed BEGIN left no "active" mark).
    await ds.getRepository(WorkspaceEntity).save(ws('b', 'two'));
    await tx.run(async (m) => {
      await m.insert(WorkspaceEntity, ws('c', 'three'));
    });
    expect(await names()).toEqual(['two', 'three', 'Default workspace']);
  });

  it('an error other than a busy lock is not retried', async () => {
    await open();
    const repo = ds.getRepository(WorkspaceEntity);
    await repo.insert(ws('a', 'one'));
    await expect(repo.insert(ws('a', 'again'))).rejects.toMatchObject({
      driverError: { code: 'SQLITE_CONSTRAINT_PRIMARYKEY' },
    });
  });
});

describe('TypeORM writes on PostgreSQL', () => {
  let db: TestDatabase;
  let ds: DataSource;

  afterEach(async () => {
    await ds?.destroy();
    await db?.dispose();
  });

  it('keep their own query runners (no SQLite lock policy) and write as before', async () => {
    db = await postgresDatabase();
    ds = await openDataSource(dataSourceOptions(db.config));
    const runner = ds.createQueryRunner();
    expect(runner).not.toBeInstanceOf(BusyRetryingQueryRunner);
    await runner.release();
    await new Transactions(ds).run(async (m) => {
      await m.insert(WorkspaceEntity, ws('a', 'one'));
    });
    const rows = await ds.getRepository(WorkspaceEntity).find({ order: { workspace_id: 'ASC' } });
    expect(rows.map((w) => w.name)).toEqual(['one', 'Default workspace']);
  });
});
