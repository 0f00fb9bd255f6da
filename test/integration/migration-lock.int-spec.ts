import type { DataSource } from 'typeorm';
import { dataSourceOptions, MIGRATION_LOCK_KEY, MIGRATIONS, openDataSource } from '@libs/persistence';
import { postgresDatabase, type TestDatabase } from './support/databases';

jest.setTimeout(120_000);

describe('migrations when several processes start on one PostgreSQL at once', () => {
  let db: TestDatabase;
  const open: DataSource[] = [];

  beforeEach(async () => {
    db = await postgresDatabase();
  });

  afterEach(async () => {
    await Promise.all(open.splice(0).map((ds) => ds.destroy()));
    await db.dispose();
  });

  it('applies each migration once: every process opens, the later ones find nothing pending', async () => {
    const opened = await Promise.allSettled(
      Array.from({ length: 4 }, () => openDataSource(dataSourceOptions(db.config))),
    );
    for (const o of opened) {
      if (o.status === 'fulfilled') {
        open.push(o.value);
      }
    }
    expect(opened.map((o) => (o.status === 'rejected' ? String(o.reason) : 'open'))).toEqual([
      'open',
      'open',
      'open',
      'open',
    ]);
    const rows: Array<{ name: string }> = await open[0].query(`SELECT "name" FROM "migrations" ORDER BY "id"`);
    expect(rows.map((r) => r.name)).toEqual(MIGRATIONS.map((m) => new m().name));
    for (const ds of open) {
      expect(await ds.showMigrations()).toBe(false);
    }
  });

  it('leaves the lock free after a migration run (a process that starts later does not wait)', async () => {
    open.push(await openDataSource(dataSourceOptions(db.config)));
    const [{ free }]: Array<{ free: boolean }> = await open[0].query(`SELECT pg_try_advisory_lock($1) AS "free"`, [
      MIGRATION_LOCK_KEY,
    ]);
    expect(free).toBe(true);
    await open[0].query(`SELECT pg_advisory_unlock($1)`, [MIGRATION_LOCK_KEY]);
  });
});
