import { DataSource } from 'typeorm';
import { dataSourceOptions } from '@libs/persistence';
import { DIALECTS, isPostgres, listIndexes, undoMigrationsFrom, type TestDatabase } from './support/databases';

jest.setTimeout(60_000);

const NAME = 'AuditRowidIds1767730000000';
/** The run's audit page (StoresRepository.auditOf): its one reader. */
const AUDIT_PAGE = `SELECT * FROM "audit_log" WHERE "run_id" = ? AND "id" > ? ORDER BY "id" ASC LIMIT 10`;

async function ids(ds: DataSource): Promise<number[]> {
  const rows = await ds.query<Array<{ id: number | string }>>(`SELECT "id" FROM "audit_log" ORDER BY "id"`);
  return rows.map((r) => Number(r.id));
}

async function insertAudit(ds: DataSource, runId: string, n: number): Promise<void> {
  await ds.query(
    `INSERT INTO "audit_log" ("run_id", "runner_id", "plugin_id", "action", "resource", "scope", "outcome", "error_code",
       "duration_us", "created_at")
     VALUES ('${runId}', 'acme/echo/echo', 'plugin-1', 'state.get', NULL, 'conversation', 'allowed', NULL, ${n}, ${n})`,
  );
}

async function sequenceOf(ds: DataSource): Promise<Array<{ name: string; seq: number }>> {
  return ds.query(`SELECT "name", "seq" FROM "sqlite_sequence" WHERE "name" = 'audit_log'`);
}

describe.each(DIALECTS)('audit_log ids without AUTOINCREMENT on %s', (_name, factory) => {
  let db: TestDatabase;
  let ds: DataSource;

  beforeEach(async () => {
    db = await factory();
    ds = await new DataSource(dataSourceOptions(db.config)).initialize();
  });

  afterEach(async () => {
    if (ds?.isInitialized) {
      await ds.destroy();
    }
    await db?.dispose();
  });

  it('SQLite: audit_log loses AUTOINCREMENT with its rows, ids and index, new rows write no sqlite_sequence, down puts it back; PostgreSQL: unchanged; the audit page seeks idx_audit_run on both', async () => {
    // This migration and every later one undone (the later ones leave audit_log alone).
    const undone = await undoMigrationsFrom(ds, NAME);
    await insertAudit(ds, 'run-1', 1);
    await insertAudit(ds, 'run-2', 2);
    await insertAudit(ds, 'run-1', 3);
    const index = { name: 'idx_audit_run', unique: false, columns: ['run_id', 'id'] };
    if (isPostgres(ds)) {
      // PostgreSQL: the migration changes nothing (a SERIAL id comes from its sequence).
      expect((await ds.runMigrations()).map((m) => m.name)).toEqual(undone);
      expect(await listIndexes(ds, 'audit_log')).toContainEqual(index);
      await insertAudit(ds, 'run-1', 4);
      expect(await ids(ds)).toEqual([1, 2, 3, 4]);
      const runner = ds.createQueryRunner();
      try {
        await runner.query('SET enable_seqscan = off');
        const plan = (await runner.query(`EXPLAIN ${AUDIT_PAGE.replace('?', '$1').replace('?', '$2')}`, [
          'run-1',
          0,
        ])) as Array<{ 'QUERY PLAN': string }>;
        expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toMatch(/Index Scan using idx_audit_run/);
        await runner.query('RESET enable_seqscan');
      } finally {
        await runner.release();
      }
      return;
    }
    const createSql = async () =>
      (await ds.query<Array<{ sql: string }>>(`SELECT "sql" FROM "sqlite_schema" WHERE "name" = 'audit_log'`))[0].sql;
    expect(await createSql()).toContain('"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT');
    expect(await sequenceOf(ds)).toEqual([{ name: 'audit_log', seq: 3 }]);

    expect((await ds.runMigrations()).map((m) => m.name)).toEqual(undone);

    expect(await createSql()).not.toContain('AUTOINCREMENT');
    expect(await createSql()).toContain('"id" INTEGER NOT NULL PRIMARY KEY,');
    expect(await listIndexes(ds, 'audit_log')).toEqual([index]);
    expect(await ids(ds)).toEqual([1, 2, 3]);
    // New rows: max(id) + 1, and no sqlite_sequence row (the WAL frame per audit commit this removes).
    await insertAudit(ds, 'run-2', 4);
    expect(await ids(ds)).toEqual([1, 2, 3, 4]);
    expect(await sequenceOf(ds)).toEqual([]);
    // The run's audit page still seeks idx_audit_run (no scan of the table, no sort).
    const plan = await ds.query<Array<{ detail: string }>>(`EXPLAIN QUERY PLAN ${AUDIT_PAGE}`, ['run-1', 0]);
    expect(plan.map((r) => r.detail).join('; ')).toBe('SEARCH audit_log USING INDEX idx_audit_run (run_id=? AND id>?)');
    const page = await ds.query<Array<{ id: number }>>(AUDIT_PAGE, ['run-1', 1]);
    expect(page.map((r) => r.id)).toEqual([3]);

    expect(await undoMigrationsFrom(ds, NAME)).toEqual(undone);
    expect(await createSql()).toContain('"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT');
    expect(await listIndexes(ds, 'audit_log')).toEqual([index]);
    expect(await ids(ds)).toEqual([1, 2, 3, 4]);
    // SQLite sets the sequence to the largest id copied back.
    expect(await sequenceOf(ds)).toEqual([{ name: 'audit_log', seq: 4 }]);
    expect((await ds.runMigrations()).map((m) => m.name)).toEqual(undone);
  });
});
