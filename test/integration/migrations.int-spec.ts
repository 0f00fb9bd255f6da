import { DataSource } from 'typeorm';
import { ApiKeyEntity, dataSourceOptions, ENTITIES, MIGRATIONS } from '@libs/persistence';
import {
  DIALECTS,
  isPostgres,
  listIndexes,
  listTables,
  PERSISTENT_DIALECTS,
  postgresDatabase,
  type DatabaseFactory,
  type TestDatabase,
} from './support/databases';

jest.setTimeout(60_000);

const APP_TABLES = ['agents', 'api_keys', 'events', 'plugins', 'run_results', 'runners', 'runs'];
const MIGRATION_NAMES = MIGRATIONS.map((m) => new m().name);

/** Named secondary indexes the migration must create: [table, name, unique, columns]. */
const NAMED_INDEXES: Array<[string, string, boolean, string[]]> = [
  ['events', 'idx_events_conversation', false, ['conversation_id', 'received_at']],
  ['runs', 'idx_runs_conversation_status', false, ['conversation_id', 'status']],
  ['runs', 'idx_runs_status', false, ['status']],
  ['run_results', 'uq_run_results_run_sequence', true, ['run_id', 'sequence']],
];

/** Single-column UNIQUE constraints (their index names are dialect-generated). */
const UNIQUE_COLUMNS: Array<[string, string]> = [
  ['api_keys', 'key_hash'],
  ['plugins', 'token_hash'],
  ['events', 'idempotency_key'],
  ['runs', 'run_id'],
];

/** A fresh database per test, and every DataSource a test opens, torn down after it. */
function useFreshDatabase(factory: DatabaseFactory) {
  const state: { db: TestDatabase | null; open: DataSource[] } = { db: null, open: [] };
  beforeEach(async () => {
    state.db = await factory();
  });
  afterEach(async () => {
    for (const ds of state.open.splice(0)) {
      if (ds.isInitialized) {
        await ds.destroy();
      }
    }
    await state.db?.dispose();
    state.db = null;
  });
  return {
    get db(): TestDatabase {
      return state.db!;
    },
    /** Opens a DataSource the way the host does (migrationsRun: true). */
    async open(): Promise<DataSource> {
      const ds = new DataSource(dataSourceOptions(state.db!.config));
      state.open.push(ds);
      return ds.initialize();
    },
  };
}

async function appliedMigrations(ds: DataSource): Promise<Array<{ id: number; timestamp: number; name: string }>> {
  const rows: Array<{ id: number | string; timestamp: number | string; name: string }> = await ds.query(
    `SELECT "id", "timestamp", "name" FROM "migrations" ORDER BY "id"`,
  );
  return rows.map((r) => ({ id: Number(r.id), timestamp: Number(r.timestamp), name: r.name }));
}

function apiKey(id: string): ApiKeyEntity {
  return {
    id,
    name: `key ${id}`,
    role: 'admin',
    key_hash: `hash-${id}`,
    key_prefix: 'rh_',
    created_at: 1_764_500_000_000,
    revoked_at: null,
  };
}

describe.each(DIALECTS)('migrations on %s', (_name, factory) => {
  const ctx = useFreshDatabase(factory);

  it('applies the whole chain on an empty database at initialize', async () => {
    const ds = await ctx.open();

    expect((await appliedMigrations(ds)).map((m) => m.name)).toEqual(MIGRATION_NAMES);
    expect(await ds.showMigrations()).toBe(false);
    expect(await listTables(ds)).toEqual([...APP_TABLES, 'migrations'].sort());
  });

  it('creates the named indexes and unique constraints', async () => {
    const ds = await ctx.open();

    for (const [table, name, unique, columns] of NAMED_INDEXES) {
      const indexes = await listIndexes(ds, table);
      expect(indexes).toContainEqual({ name, unique, columns });
    }
    for (const [table, column] of UNIQUE_COLUMNS) {
      const indexes = await listIndexes(ds, table);
      expect(indexes.filter((i) => i.unique && i.columns.length === 1 && i.columns[0] === column)).toHaveLength(1);
    }
  });

  it('creates every entity column, with the declared primary key and nullability', async () => {
    const ds = await ctx.open();
    const runner = ds.createQueryRunner();
    // SQLite accepts NULL in a non-INTEGER PRIMARY KEY unless it is declared NOT NULL, so the
    // migration declares it and this compares nullability on every dialect.
    const shape = (name: string, nullable: boolean, primary: boolean) => ({ name, primary, nullable });
    try {
      for (const meta of ENTITIES.map((e) => ds.getMetadata(e))) {
        const table = await runner.getTable(meta.tableName);
        expect(table).toBeDefined();
        const actual = table!.columns
          .map((c) => shape(c.name, c.isNullable, c.isPrimary))
          .sort((a, b) => a.name.localeCompare(b.name));
        const expected = meta.columns
          .map((c) => shape(c.databaseName, c.isNullable, c.isPrimary))
          .sort((a, b) => a.name.localeCompare(b.name));
        expect({ table: meta.tableName, columns: actual }).toEqual({ table: meta.tableName, columns: expected });
      }
    } finally {
      await runner.release();
    }
  });

  it('reverts cleanly with undoLastMigration (with data present) and applies again', async () => {
    const ds = await ctx.open();
    await ds.getRepository(ApiKeyEntity).insert(apiKey('before-undo'));

    for (let i = 0; i < MIGRATIONS.length; i++) {
      await ds.undoLastMigration();
    }
    expect(await listTables(ds)).toEqual(['migrations']);
    expect(await appliedMigrations(ds)).toEqual([]);
    expect(await ds.showMigrations()).toBe(true);

    const applied = await ds.runMigrations();
    expect(applied.map((m) => m.name)).toEqual(MIGRATION_NAMES);
    expect(await listTables(ds)).toEqual([...APP_TABLES, 'migrations'].sort());
    for (const [table, name, unique, columns] of NAMED_INDEXES) {
      expect(await listIndexes(ds, table)).toContainEqual({ name, unique, columns });
    }
    // The schema is usable again, and empty: the revert really dropped the data.
    const keys = ds.getRepository(ApiKeyEntity);
    expect(await keys.count()).toBe(0);
    await keys.insert(apiKey('after-redo'));
    expect(await keys.findOneBy({ id: 'after-redo' })).toMatchObject({
      id: 'after-redo',
      created_at: 1_764_500_000_000,
    });
  });

  it('does nothing when the migrations are run again on an up-to-date database', async () => {
    const ds = await ctx.open();
    const before = await appliedMigrations(ds);

    expect(await ds.runMigrations()).toEqual([]);
    expect(await appliedMigrations(ds)).toEqual(before);
    expect(await listTables(ds)).toEqual([...APP_TABLES, 'migrations'].sort());
  });
});

describe.each(PERSISTENT_DIALECTS)('re-opening a migrated %s database', (_name, factory) => {
  const ctx = useFreshDatabase(factory);

  it('initializes a second time as a no-op, keeping the migration log and the data', async () => {
    const first = await ctx.open();
    await first.getRepository(ApiKeyEntity).insert(apiKey('survivor'));
    const log = await appliedMigrations(first);
    await first.destroy();

    const second = await ctx.open();
    expect(await appliedMigrations(second)).toEqual(log);
    expect(await second.showMigrations()).toBe(false);
    expect(await second.getRepository(ApiKeyEntity).findOneBy({ id: 'survivor' })).toMatchObject({
      id: 'survivor',
      key_hash: 'hash-survivor',
    });
  });
});

describe('postgres schema vs entities', () => {
  const ctx = useFreshDatabase(postgresDatabase);

  it('leaves nothing for TypeORM to synchronize (the hand-written migration matches the entities)', async () => {
    const ds = await ctx.open();
    expect(isPostgres(ds)).toBe(true);

    const pending = await ds.driver.createSchemaBuilder().log();
    expect(pending.upQueries.map((q) => q.query)).toEqual([]);
  });
});
