import type { DataSource } from 'typeorm';
import { DomainError } from '@libs/protocol';
import { dataSourceOptions, DatabaseBusyError, openDataSource, Transactions, WorkspaceEntity } from '@libs/persistence';
import { sqliteFileDatabase, type TestDatabase } from './support/databases';
import { stillWaiting } from './support/waiting';

jest.setTimeout(60_000);

const ws = (id: string, name: string): WorkspaceEntity =>
  Object.assign(new WorkspaceEntity(), { workspace_id: id, name, quotas: {}, created_at: 1, updated_at: 1 });

/** A promise and the function that resolves it (a step the test lets happen). */
function signal(): { wait: Promise<void>; go: () => void } {
  let go!: () => void;
  const wait = new Promise<void>((r) => (go = r));
  return { wait, go };
}

const boom = new Error('boom: the admin transaction fails and rolls back');

/**
 * TypeORM shares the host's one SQLite connection between every caller; a transaction of one
 * caller must neither absorb another caller's writes nor roll them back
 * (docs/durability.md#a-busy-writer-lock, "One open transaction per connection").
 */
describe('SQLite: one open transaction per connection, other callers wait for it', () => {
  let db: TestDatabase;
  let ds: DataSource;
  let tx: Transactions;

  async function open(busyWaitMs?: number): Promise<void> {
    ds = await openDataSource(dataSourceOptions({ ...(db.config as { type: 'sqlite'; file: string }), busyWaitMs }));
    tx = new Transactions(ds);
  }

  const names = async (): Promise<string[]> =>
    (await ds.getRepository(WorkspaceEntity).find({ order: { workspace_id: 'ASC' } })).map((w) => w.name);

  beforeEach(async () => {
    db = await sqliteFileDatabase();
  });

  afterEach(async () => {
    await ds?.destroy();
    await db.dispose();
  });

  it('a plain write of another caller during an open transaction waits, and survives its rollback', async () => {
    await open();
    const inside = signal();
    const fail = signal();
    const t = tx.run(async (m) => {
      await m.insert(WorkspaceEntity, ws('a', 'in the transaction'));
      inside.go();
      await fail.wait;
      throw boom;
    });
    await inside.wait;
    const other = ds.getRepository(WorkspaceEntity).insert(ws('b', 'another request'));
    const waited = await stillWaiting(other);
    fail.go();
    await expect(t).rejects.toBe(boom);
    await other;
    expect(await names()).toEqual(['another request', 'Default workspace']);
    expect(waited).toBe(true); // it ran after the transaction, not inside it
  });

  it('a save() of another caller (its own transaction) during an open transaction survives its rollback', async () => {
    await open();
    const inside = signal();
    const fail = signal();
    const t = tx.run(async (m) => {
      await m.update(WorkspaceEntity, { workspace_id: 'default' }, { name: 'renamed in the transaction' });
      inside.go();
      await fail.wait;
      throw boom;
    });
    await inside.wait;
    const other = ds.getRepository(WorkspaceEntity).save(ws('b', 'saved by another request'));
    const waited = await stillWaiting(other);
    fail.go();
    await expect(t).rejects.toBe(boom);
    await other;
    expect(await names()).toEqual(['saved by another request', 'Default workspace']);
    expect(waited).toBe(true);
  });

  it('reverse order: a transaction opened behind another caller’s open one starts after its commit, and its rollback leaves that commit', async () => {
    await open();
    const firstInside = signal();
    const firstCommit = signal();
    const secondFail = signal();
    const first = ds.transaction(async (m) => {
      await m.insert(WorkspaceEntity, ws('a', 'committed by the first caller'));
      firstInside.go();
      await firstCommit.wait;
    });
    await firstInside.wait;
    let secondRan = false;
    const second = tx.run(async (m) => {
      secondRan = true;
      await m.insert(WorkspaceEntity, ws('b', 'rolled back'));
      await secondFail.wait;
      throw boom;
    });
    const waited = await stillWaiting(second);
    const ranEarly = secondRan;
    firstCommit.go();
    await first;
    secondFail.go();
    await expect(second).rejects.toBe(boom);
    expect(await names()).toEqual(['committed by the first caller', 'Default workspace']);
    expect(waited).toBe(true);
    expect(ranEarly).toBe(false); // its work started only once the first had committed
    expect(secondRan).toBe(true);
  });

  it('each caller has its own runner and transaction state; a second BEGIN waits for the first to end', async () => {
    await open();
    const one = ds.createQueryRunner();
    const two = ds.createQueryRunner();
    expect(one === two).toBe(false);
    await one.startTransaction();
    expect(one.isTransactionActive).toBe(true);
    expect(two.isTransactionActive).toBe(false);
    const begin = two.startTransaction();
    expect(await stillWaiting(begin)).toBe(true);
    expect(two.isTransactionActive).toBe(false);
    await one.manager.insert(WorkspaceEntity, ws('a', 'one')); // the holder's own statements run
    await one.rollbackTransaction();
    await begin;
    expect(two.isTransactionActive).toBe(true);
    await two.manager.insert(WorkspaceEntity, ws('b', 'two'));
    await two.commitTransaction();
    await one.release();
    await two.release();
    expect(await names()).toEqual(['two', 'Default workspace']);
  });

  it('a transaction that never ends: other callers fail 503 database.busy past the bound, nothing written', async () => {
    await open(150);
    const holder = ds.createQueryRunner();
    await holder.startTransaction();
    await holder.manager.insert(WorkspaceEntity, ws('a', 'held'));
    const write = await ds
      .getRepository(WorkspaceEntity)
      .update({ workspace_id: 'default' }, { name: 'changed' })
      .catch((x: unknown) => x);
    expect(write).toBeInstanceOf(DatabaseBusyError);
    expect((write as DomainError).toProtocol()).toMatchObject({
      code: 'unavailable',
      retryable: true,
      details: { reason: 'database.busy' },
    });
    const transaction = await tx.run((m) => m.insert(WorkspaceEntity, ws('b', 'never'))).catch((x: unknown) => x);
    expect(transaction).toBeInstanceOf(DatabaseBusyError);
    await holder.rollbackTransaction();
    await holder.release();
    // Nothing of the failed callers was written, and the connection serves again.
    expect(await names()).toEqual(['Default workspace']);
    await tx.run((m) => m.insert(WorkspaceEntity, ws('c', 'after')));
    expect(await names()).toEqual(['after', 'Default workspace']);
  });

  it('a runner released with its transaction open is rolled back and lets the others in', async () => {
    await open();
    const holder = ds.createQueryRunner();
    await holder.startTransaction();
    await holder.manager.insert(WorkspaceEntity, ws('a', 'abandoned'));
    const other = ds.getRepository(WorkspaceEntity).insert(ws('b', 'waited'));
    expect(await stillWaiting(other)).toBe(true);
    await holder.release();
    await other;
    expect(await names()).toEqual(['waited', 'Default workspace']);
  });

  it('an error inside a transaction rolls back only that transaction; a nested savepoint stays the holder’s', async () => {
    await open();
    await tx.run(async (m) => {
      await m.insert(WorkspaceEntity, ws('a', 'outer'));
      await m
        .transaction(async (inner) => {
          await inner.insert(WorkspaceEntity, ws('b', 'inner'));
          throw boom;
        })
        .catch(() => undefined);
    });
    expect(await names()).toEqual(['outer', 'Default workspace']);
  });
});
