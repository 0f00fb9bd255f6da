import { DataSource } from 'typeorm';
import { ApiKeyEntity, dataSourceOptions, ENTITIES, MIGRATIONS, RunEntity, TranscriptEntity } from '@libs/persistence';
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

/** Tables of the first migration (initial schema). */
const INITIAL_TABLES = ['agents', 'api_keys', 'events', 'plugins', 'run_results', 'runners', 'runs'];
/** Tables the second migration (context stores) adds on every dialect. */
const CONTEXT_TABLES = ['audit_log', 'event_log', 'state_entries', 'storage_entries', 'transcript'];
/** SQLite only: the FTS5 virtual table over transcript.content and its shadow tables. */
const SQLITE_FTS_TABLES = [
  'transcript_fts',
  'transcript_fts_config',
  'transcript_fts_data',
  'transcript_fts_docsize',
  'transcript_fts_idx',
];
const MIGRATION_NAMES = MIGRATIONS.map((m) => new m().name);

/** Every table of the fully migrated schema on this dialect (with `migrations`), sorted. */
function allTables(ds: DataSource): string[] {
  return [...INITIAL_TABLES, ...CONTEXT_TABLES, ...(isPostgres(ds) ? [] : SQLITE_FTS_TABLES), 'migrations'].sort();
}

/** Named secondary indexes of the first migration: [table, name, unique, columns]. */
const INITIAL_INDEXES: Array<[string, string, boolean, string[]]> = [
  ['events', 'idx_events_conversation', false, ['conversation_id', 'received_at']],
  ['runs', 'idx_runs_conversation_status', false, ['conversation_id', 'status']],
  ['runs', 'idx_runs_status', false, ['status']],
  ['run_results', 'uq_run_results_run_sequence', true, ['run_id', 'sequence']],
];

/** Named secondary indexes of the second migration. */
const CONTEXT_INDEXES: Array<[string, string, boolean, string[]]> = [
  ['transcript', 'uq_transcript_conversation_seq', true, ['conversation_id', 'seq']],
  ['event_log', 'idx_event_log_conversation', false, ['conversation_id', 'id']],
  ['event_log', 'idx_event_log_event', false, ['event_id']],
  ['state_entries', 'uq_state_scope_key', true, ['scope_key', 'state_key']],
  ['storage_entries', 'uq_storage_owner_key', true, ['owner_key', 'key']],
  ['audit_log', 'idx_audit_run', false, ['run_id', 'id']],
];

const NAMED_INDEXES = [...INITIAL_INDEXES, ...CONTEXT_INDEXES];

/**
 * The full-text machinery of the transcript, by name: the tsvector indexes (PostgreSQL) or the
 * triggers on transcript (SQLite, keeping transcript_fts in step), with their definitions.
 */
async function fullTextObjects(ds: DataSource): Promise<Array<{ name: string; def: string }>> {
  const rows: Array<{ name: string; def: string }> = isPostgres(ds)
    ? await ds.query(
        `SELECT indexname AS name, indexdef AS def FROM pg_indexes
          WHERE schemaname = current_schema() AND tablename = 'transcript' AND indexdef ILIKE '%to_tsvector%'`,
      )
    : await ds.query(`SELECT name, sql AS def FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'transcript'`);
  return rows.sort((a, b) => a.name.localeCompare(b.name));
}

/** What fullTextObjects must find on a fully migrated database of this dialect. */
function expectedFullTextObjects(ds: DataSource) {
  return isPostgres(ds)
    ? [
        {
          name: 'idx_transcript_fts',
          def: expect.stringMatching(/USING gin \(to_tsvector\('simple'::regconfig, content\)\)/),
        },
      ]
    : [
        { name: 'transcript_fts_ad', def: expect.stringMatching(/AFTER DELETE ON "transcript"/) },
        { name: 'transcript_fts_ai', def: expect.stringMatching(/AFTER INSERT ON "transcript"/) },
      ];
}

/** Ids of the transcript rows whose content matches `word`, by the dialect's full-text search. */
async function fullTextMatch(ds: DataSource, word: string): Promise<number[]> {
  const rows: Array<{ id: number | string }> = isPostgres(ds)
    ? await ds.query(
        `SELECT id FROM transcript WHERE to_tsvector('simple', content) @@ plainto_tsquery('simple', $1) ORDER BY id`,
        [word],
      )
    : await ds.query(`SELECT rowid AS id FROM transcript_fts WHERE transcript_fts MATCH ? ORDER BY rowid`, [
        `"${word}"`,
      ]);
  return rows.map((r) => Number(r.id));
}

async function columnsOf(ds: DataSource, table: string): Promise<string[]> {
  const runner = ds.createQueryRunner();
  try {
    const t = await runner.getTable(table);
    return (t?.columns ?? []).map((c) => c.name).sort();
  } finally {
    await runner.release();
  }
}

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

function run(runId: string): Omit<RunEntity, 'id'> {
  return {
    run_id: runId,
    event_id: `evt-${runId}`,
    agent_id: 'agent-1',
    runner_id: 'acme/echo/echo',
    conversation_id: 'conv-1',
    thread_id: null,
    status: 'queued',
    status_reason: null,
    error_code: null,
    retryable: null,
    context: { protocol: 'v1' },
    usage: null,
    authorization: { version: 1 },
    authorization_hash: 'a'.repeat(64),
    created_at: 1_764_500_000_000,
    started_at: null,
    finished_at: null,
    deadline_at: null,
    cancel_requested_at: null,
  };
}

function transcriptRow(seq: number, content: string): Omit<TranscriptEntity, 'id'> {
  return {
    conversation_id: 'conv-1',
    thread_id: null,
    seq,
    role: 'user',
    item_type: 'message',
    content,
    content_json: { role: 'user', content },
    attachment_refs: [],
    event_id: null,
    run_id: null,
    agent_id: 'agent-1',
    metadata: {},
    created_at: 1_764_500_000_000,
  };
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
    expect(await listTables(ds)).toEqual(allTables(ds));
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
    expect(await fullTextObjects(ds)).toEqual(expectedFullTextObjects(ds));
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

  it('undoLastMigration reverts the context stores first, keeping the initial schema and its data', async () => {
    const ds = await ctx.open();
    await ds.getRepository(ApiKeyEntity).insert(apiKey('kept'));
    await ds.getRepository(RunEntity).insert(run('run-kept'));
    await ds.getRepository(TranscriptEntity).insert(transcriptRow(1, 'dropped with its table'));

    await ds.undoLastMigration();

    expect((await appliedMigrations(ds)).map((m) => m.name)).toEqual(MIGRATION_NAMES.slice(0, 1));
    expect(await ds.showMigrations()).toBe(true);
    expect(await listTables(ds)).toEqual([...INITIAL_TABLES, 'migrations'].sort());
    expect(await fullTextObjects(ds)).toEqual([]);
    const runColumns = await columnsOf(ds, 'runs');
    expect(runColumns).not.toContain('authorization');
    expect(runColumns).not.toContain('authorization_hash');
    expect(runColumns).toEqual(expect.arrayContaining(['run_id', 'context', 'usage', 'created_at']));
    for (const [table, name, unique, columns] of INITIAL_INDEXES) {
      expect(await listIndexes(ds, table)).toContainEqual({ name, unique, columns });
    }
    // The initial schema's rows survive the revert of the second migration.
    expect(await ds.query(`SELECT "id" FROM "api_keys"`)).toEqual([{ id: 'kept' }]);
    expect(await ds.query(`SELECT "run_id", "status" FROM "runs"`)).toEqual([{ run_id: 'run-kept', status: 'queued' }]);

    const applied = await ds.runMigrations();
    expect(applied.map((m) => m.name)).toEqual(MIGRATION_NAMES.slice(1));
    expect(await appliedMigrations(ds)).toEqual([
      expect.objectContaining({ name: MIGRATION_NAMES[0] }),
      expect.objectContaining({ name: MIGRATION_NAMES[1] }),
    ]);
    expect(await listTables(ds)).toEqual(allTables(ds));
    expect(await fullTextObjects(ds)).toEqual(expectedFullTextObjects(ds));
    for (const [table, name, unique, columns] of CONTEXT_INDEXES) {
      expect(await listIndexes(ds, table)).toContainEqual({ name, unique, columns });
    }
    // The existing run gets the new columns as NULL; the context tables start empty and work.
    expect(await ds.getRepository(RunEntity).findOneBy({ run_id: 'run-kept' })).toMatchObject({
      status: 'queued',
      authorization: null,
      authorization_hash: null,
    });
    expect(await ds.getRepository(TranscriptEntity).count()).toBe(0);
    const { identifiers } = await ds.getRepository(TranscriptEntity).insert(transcriptRow(1, 'searchable again'));
    expect(await fullTextMatch(ds, 'searchable')).toEqual([Number(identifiers[0].id)]);
    expect(await fullTextMatch(ds, 'dropped')).toEqual([]);
  });

  it('reverts the whole chain newest first (with data present) and applies it again', async () => {
    const ds = await ctx.open();
    await ds.getRepository(ApiKeyEntity).insert(apiKey('before-undo'));
    await ds.getRepository(TranscriptEntity).insert(transcriptRow(1, 'before undo'));

    const remaining: string[][] = [];
    for (let i = 0; i < MIGRATIONS.length; i++) {
      await ds.undoLastMigration();
      remaining.push((await appliedMigrations(ds)).map((m) => m.name));
    }
    // One migration per undo, the newest first.
    expect(remaining).toEqual(MIGRATION_NAMES.map((_, i) => MIGRATION_NAMES.slice(0, MIGRATION_NAMES.length - 1 - i)));
    expect(await listTables(ds)).toEqual(['migrations']);
    expect(await fullTextObjects(ds)).toEqual([]);
    expect(await appliedMigrations(ds)).toEqual([]);
    expect(await ds.showMigrations()).toBe(true);

    const applied = await ds.runMigrations();
    expect(applied.map((m) => m.name)).toEqual(MIGRATION_NAMES);
    expect(await listTables(ds)).toEqual(allTables(ds));
    for (const [table, name, unique, columns] of NAMED_INDEXES) {
      expect(await listIndexes(ds, table)).toContainEqual({ name, unique, columns });
    }
    expect(await fullTextObjects(ds)).toEqual(expectedFullTextObjects(ds));
    expect(await columnsOf(ds, 'runs')).toEqual(expect.arrayContaining(['authorization', 'authorization_hash']));
    // The schema is usable again, and empty: the revert really dropped the data.
    const keys = ds.getRepository(ApiKeyEntity);
    expect(await keys.count()).toBe(0);
    expect(await ds.getRepository(TranscriptEntity).count()).toBe(0);
    await keys.insert(apiKey('after-redo'));
    expect(await keys.findOneBy({ id: 'after-redo' })).toMatchObject({
      id: 'after-redo',
      created_at: 1_764_500_000_000,
    });
    const { identifiers } = await ds.getRepository(TranscriptEntity).insert(transcriptRow(1, 'after redo'));
    expect(await fullTextMatch(ds, 'redo')).toEqual([Number(identifiers[0].id)]);
    expect(await fullTextMatch(ds, 'before')).toEqual([]);
  });

  it('does nothing when the migrations are run again on an up-to-date database', async () => {
    const ds = await ctx.open();
    const before = await appliedMigrations(ds);

    expect(await ds.runMigrations()).toEqual([]);
    expect(await appliedMigrations(ds)).toEqual(before);
    expect(await listTables(ds)).toEqual(allTables(ds));
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
