import { createHash } from 'node:crypto';
import { DataSource } from 'typeorm';
import { snapshotHash, type AuthorizationSnapshot } from '@libs/authz';
import {
  ApiKeyEntity,
  conversationKey,
  dataSourceOptions,
  ENTITIES,
  joinSnapshot,
  KbChunkEntity,
  KbDocumentEntity,
  KnowledgeBaseEntity,
  MIGRATIONS,
  RunEntity,
  TranscriptEntity,
} from '@libs/persistence';
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
/** Tables the third migration (resources) adds on every dialect. */
const RESOURCE_TABLES = [
  'kb_chunks',
  'kb_documents',
  'knowledge_bases',
  'model_usage',
  'models',
  'tool_sources',
  'tools',
];
/** SQLite only: the FTS5 virtual table over kb_chunks.content and its shadow tables. */
const SQLITE_KB_FTS_TABLES = SQLITE_FTS_TABLES.map((t) => t.replace(/^transcript/, 'kb_chunks'));
const MIGRATION_NAMES = MIGRATIONS.map((m) => new m().name);
/**
 * PostgreSQL only: columns a migration adds that no entity declares (an entity serves both dialects
 * and SQLite has no tsvector type): the knowledge chunks' stored vector (KbStoredTsvector), which
 * only the search's SQL reads. TypeORM's synchronize (always off) would drop it.
 */
const PG_ONLY_COLUMNS: Record<string, string[]> = { kb_chunks: ['content_tsv'] };
/** The fifth migration (conversations and steering; its own tests: steering.int-spec.ts). */
const STEERING_TABLES = ['steering_items'];

/** Every table after the first `applied` migrations (all by default) on this dialect, with `migrations`, sorted. */
function allTables(ds: DataSource, applied = MIGRATIONS.length): string[] {
  const sqlite = !isPostgres(ds);
  return [
    ...INITIAL_TABLES,
    ...(applied >= 2 ? [...CONTEXT_TABLES, ...(sqlite ? SQLITE_FTS_TABLES : [])] : []),
    ...(applied >= 3 ? [...RESOURCE_TABLES, ...(sqlite ? SQLITE_KB_FTS_TABLES : [])] : []),
    ...(applied >= 5 ? STEERING_TABLES : []),
    ...(applied >= 6 ? DELIVERY_TABLES : []),
    ...(applied >= 10 ? INTERACTION_TABLES : []),
    ...(applied >= 12 ? ['workspaces'] : []),
    ...(applied >= 13 ? ['snapshots'] : []),
    ...(applied >= 14 && sqlite ? ['fts_watermarks'] : []),
    ...(applied >= 15 ? ['host_processes'] : []),
    ...(applied >= 17 ? ['runner_presence'] : []),
    ...(applied >= 18 ? ['delivery_senders'] : []),
    ...(applied >= 19 ? ['catalog_version'] : []),
    // TypeORM's record of generated columns (KbStoredTsvector's `content_tsv`).
    ...(applied >= 22 && !sqlite ? ['typeorm_metadata'] : []),
    'migrations',
  ].sort();
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

/** Named secondary indexes of the third migration (the full-text ones are checked by fullTextObjects). */
const RESOURCE_INDEXES: Array<[string, string, boolean, string[]]> = [
  ['model_usage', 'idx_model_usage_run', false, ['run_id']],
  ['tools', 'uq_tools_name', true, ['tool_name']],
  ['kb_documents', 'idx_kb_documents_kb', false, ['kb_id']],
  ['kb_chunks', 'idx_kb_chunks_doc', false, ['document_id', 'position']],
];

/** Named secondary indexes of the fifth migration (the unique running run per conversation is an expression index). */
const STEERING_INDEXES: Array<[string, string, boolean, string[]]> = [
  ['steering_items', 'idx_steering_items_run', false, ['run_id', 'state', 'position']],
  ['steering_items', 'idx_steering_items_waiting', false, ['conversation_key', 'dispatch', 'id']],
  ['steering_items', 'idx_steering_items_dispatch', false, ['dispatch']],
];

/** The delivery outbox (issue 10, sixth migration) and its indexes (two partial ones for the worker and the admin). */
const DELIVERY_TABLES = ['delivery_outbox'];
const DELIVERY_INDEXES: Array<[string, string, boolean, string[]]> = [
  // PendingDeliveryIdIndex1767690000000: the delivery id's unique index over pending webhook ops only.
  ['delivery_outbox', 'uq_delivery_outbox_pending_id', true, ['delivery_id']],
  ['delivery_outbox', 'uq_delivery_outbox_run_seq', true, ['run_id', 'sequence']],
  ['delivery_outbox', 'idx_delivery_outbox_pending', false, ['run_id', 'sequence']],
  ['delivery_outbox', 'idx_delivery_outbox_failed', false, ['id']],
];

/** The retention job's `created_at` indexes (the retention-indexes migration). */
const RETENTION_INDEXES: Array<[string, string, boolean, string[]]> = [
  ['delivery_outbox', 'idx_delivery_outbox_created', false, ['created_at']],
  ['run_results', 'idx_run_results_created', false, ['created_at']],
  ['event_log', 'idx_event_log_created', false, ['created_at']],
];

/** Conversation scope: the scoped reads of the transcript and the event log lead with the agent. */
const SCOPE_INDEXES: Array<[string, string, boolean, string[]]> = [
  ['transcript', 'idx_transcript_scope', false, ['agent_id', 'conversation_id', 'seq']],
  ['event_log', 'idx_event_log_scope', false, ['agent_id', 'conversation_id', 'id']],
];

/** Structured interactions (the interactions migration): one row per request, its token hash unique. */
const INTERACTION_TABLES = ['interactions'];
const INTERACTION_INDEXES: Array<[string, string, boolean, string[]]> = [
  ['interactions', 'uq_interactions_run_interaction', true, ['run_id', 'interaction_id']],
  ['interactions', 'uq_interactions_token', true, ['callback_token_hash']],
  ['interactions', 'idx_interactions_status_expiry', false, ['status', 'expires_at']],
];

/** Runner presence (1767610000000): which process holds which runner. */
const PRESENCE_INDEXES: Array<[string, string, boolean, string[]]> = [
  ['runner_presence', 'idx_runner_presence_process', false, ['process_id']],
];

/** The webhook outbox lease (delivery-senders migration): every lease of one process. */
const SENDER_INDEXES: Array<[string, string, boolean, string[]]> = [
  ['delivery_senders', 'idx_delivery_senders_process', false, ['process_id']],
];

/** Run leases (docs/scale-out.md#leases-and-fencing): the dead-owner sweep finds a process's runs. */
const LEASE_INDEXES: Array<[string, string, boolean, string[]]> = [
  ['runs', 'idx_runs_owner_process', false, ['owner_process_id']],
];

/** RunsConversationIndex1767720000000: the runs of a conversation by id, not by status (partial: with a conversation). */
const CONVERSATION_RUN_INDEXES: Array<[string, string, boolean, string[]]> = [
  ['runs', 'idx_runs_conversation', false, ['conversation_id', 'id']],
];

const NAMED_INDEXES = [
  ...LEASE_INDEXES,
  ...SCOPE_INDEXES,
  ...INITIAL_INDEXES.filter(([, name]) => name !== 'idx_runs_conversation_status'),
  ...CONVERSATION_RUN_INDEXES,
  ...CONTEXT_INDEXES,
  ...RESOURCE_INDEXES,
  ...STEERING_INDEXES,
  ...DELIVERY_INDEXES,
  ...RETENTION_INDEXES,
  ...INTERACTION_INDEXES,
  ...PRESENCE_INDEXES,
  ...SENDER_INDEXES,
];

/** The tables with full-text search: the transcript (second migration), knowledge chunks (third). */
const FULL_TEXT_TABLES = ['transcript', 'kb_chunks'] as const;
type FullTextTable = (typeof FULL_TEXT_TABLES)[number];

/**
 * The full-text machinery of the transcript and the knowledge chunks, by name: the tsvector
 * indexes (PostgreSQL) or the triggers keeping `<table>_fts` in step (SQLite), with their definitions.
 */
async function fullTextObjects(ds: DataSource): Promise<Array<{ name: string; def: string }>> {
  const rows: Array<{ name: string; def: string }> = isPostgres(ds)
    ? await ds.query(
        `SELECT indexname AS name, indexdef AS def FROM pg_indexes
          WHERE schemaname = current_schema() AND tablename IN ('transcript', 'kb_chunks')
            AND (indexdef ILIKE '%to_tsvector%' OR indexdef ILIKE '%content_tsv%')`,
      )
    : await ds.query(
        `SELECT name, sql AS def FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ('transcript', 'kb_chunks')`,
      );
  return rows.sort((a, b) => a.name.localeCompare(b.name));
}

/** What fullTextObjects must find after the first `applied` migrations (all by default). */
function expectedFullTextObjects(ds: DataSource, applied = MIGRATIONS.length) {
  const tables = FULL_TEXT_TABLES.filter((_, i) => applied >= i + 2);
  // The fourth migration (kb stemming) indexes the chunks with the `english` configuration.
  const configOf = (table: string) => (table === 'kb_chunks' && applied >= 4 ? 'english' : 'simple');
  // KbStoredTsvector (22nd) indexes the chunks' stored vector instead of the expression.
  const storedVector = (table: string) => table === 'kb_chunks' && applied >= 22;
  const objects = tables.flatMap((table) =>
    isPostgres(ds) && storedVector(table)
      ? [{ name: `idx_${table}_tsv`, def: expect.stringMatching(/USING gin \(content_tsv\)/) }]
      : isPostgres(ds)
        ? [
            {
              name: `idx_${table}_fts`,
              def: expect.stringMatching(
                new RegExp(`USING gin \\(to_tsvector\\('${configOf(table)}'::regconfig, content\\)\\)`),
              ),
            },
          ]
        : [
            { name: `${table}_fts_ad`, def: expect.stringMatching(new RegExp(`AFTER DELETE ON "${table}"`)) },
            // The transcript-index-deferred migration (14th) indexes the transcript off the commit.
            ...(table === 'transcript' && applied >= 14
              ? []
              : [{ name: `${table}_fts_ai`, def: expect.stringMatching(new RegExp(`AFTER INSERT ON "${table}"`)) }]),
          ],
  );
  return objects.sort((a, b) => a.name.localeCompare(b.name));
}

/** Ids of the rows of `table` whose content matches `word`, by the dialect's full-text search. */
async function fullTextMatch(ds: DataSource, word: string, table: FullTextTable = 'transcript'): Promise<number[]> {
  if (!isPostgres(ds) && table === 'transcript' && (await listTables(ds)).includes('fts_watermarks')) {
    // Indexed off the commit since the transcript-index-deferred migration: catch up as a search does.
    await ds.query(`INSERT INTO "transcript_fts"(rowid, content) SELECT "id", "content" FROM "transcript"
      WHERE "id" > (SELECT "indexed_id" FROM "fts_watermarks" WHERE "name" = 'transcript')`);
    await ds.query(`UPDATE "fts_watermarks" SET "indexed_id" = (SELECT COALESCE(MAX("id"), 0) FROM "transcript")`);
  }
  const rows: Array<{ id: number | string }> = isPostgres(ds)
    ? await ds.query(
        `SELECT id FROM ${table} WHERE to_tsvector('simple', content) @@ plainto_tsquery('simple', $1) ORDER BY id`,
        [word],
      )
    : await ds.query(`SELECT rowid AS id FROM ${table}_fts WHERE ${table}_fts MATCH ? ORDER BY rowid`, [`"${word}"`]);
  return rows.map((r) => Number(r.id));
}

/** A knowledge base with one document and one chunk; the chunk's id. */
async function knowledgeRows(ds: DataSource, text: string): Promise<number> {
  await ds.getRepository(KnowledgeBaseEntity).insert({
    kb_id: 'kb-1',
    name: 'KB',
    description: '',
    chunk_size: 1000,
    chunk_overlap: 150,
    created_at: 1_764_700_000_000,
    updated_at: 1_764_700_000_000,
  });
  await ds.getRepository(KbDocumentEntity).insert({
    document_id: 'doc-1',
    kb_id: 'kb-1',
    name: 'doc',
    content_type: 'text/plain',
    metadata: {},
    size: text.length,
    chunk_count: 1,
    created_at: 1_764_700_000_000,
    status: 'ready',
    updated_at: 1_764_700_000_000,
  });
  const { identifiers } = await ds
    .getRepository(KbChunkEntity)
    .insert({ kb_id: 'kb-1', document_id: 'doc-1', position: 0, content: text, metadata: { position: 0 } });
  return Number(identifiers[0].id);
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

/** A run row as the schema before the conversation-workspace migration stores it (no workspace). */
function runBefore(runId: string, status: string, conversationId = 'conv-1'): string {
  return `INSERT INTO "runs" ("run_id", "event_id", "agent_id", "runner_id", "conversation_id", "status", "context", "created_at")
    VALUES ('${runId}', 'evt-${runId}', 'agent-1', 'acme/echo/echo', '${conversationId}', '${status}', '{}', 1)`;
}

/** The definition of the one-running-run index (an expression index: listIndexes does not show it). */
async function runningIndexDefinition(ds: DataSource): Promise<string> {
  const rows: Array<{ def: string }> = isPostgres(ds)
    ? await ds.query(`SELECT indexdef AS def FROM pg_indexes WHERE schemaname = current_schema() AND indexname = $1`, [
        'uq_runs_running_conversation',
      ])
    : await ds.query(`SELECT sql AS def FROM sqlite_master WHERE type = 'index' AND name = ?`, [
        'uq_runs_running_conversation',
      ]);
  return rows[0]?.def ?? '';
}

/** Undoes the migrations after `name`, newest first (each later one has its own tests). */
async function undoNewerThan(ds: DataSource, name: string): Promise<void> {
  while ((await appliedMigrations(ds)).at(-1)?.name !== name) {
    await ds.undoLastMigration();
  }
}

/** A run row as the migrations before run leases know it (the lease columns keep their defaults). */
function run(runId: string): Omit<RunEntity, 'id' | 'owner_process_id' | 'attempt' | 'last_write_at'> {
  return {
    run_id: runId,
    event_id: `evt-${runId}`,
    agent_id: 'agent-1',
    runner_id: 'acme/echo/echo',
    conversation_id: 'conv-1',
    thread_id: null,
    workspace_id: null,
    status: 'queued',
    status_reason: null,
    error_code: null,
    retryable: null,
    context: { protocol: 'v1' },
    usage: null,
    snapshot_hash: null,
    authorization_run: null,
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
    workspace_id: null,
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
    workspace_ids: null,
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
        const pgOnly = isPostgres(ds) ? (PG_ONLY_COLUMNS[meta.tableName] ?? []) : [];
        const actual = table!.columns
          .filter((c) => !pgOnly.includes(c.name))
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

  it('undoLastMigration reverts the resources first, keeping the context stores and their data', async () => {
    const ds = await ctx.open();
    const { identifiers } = await ds.getRepository(TranscriptEntity).insert(transcriptRow(1, 'kept transcript'));
    await knowledgeRows(ds, 'dropped knowledge chunk');

    await undoNewerThan(ds, 'Resources1764700000000'); // kb stemming (kb-stemming.int-spec.ts), tool metadata
    await ds.undoLastMigration();

    expect((await appliedMigrations(ds)).map((m) => m.name)).toEqual(MIGRATION_NAMES.slice(0, 2));
    expect(await ds.showMigrations()).toBe(true);
    expect(await listTables(ds)).toEqual(allTables(ds, 2));
    expect(await fullTextObjects(ds)).toEqual(expectedFullTextObjects(ds, 2));
    for (const [table, name, unique, columns] of [...INITIAL_INDEXES, ...CONTEXT_INDEXES]) {
      expect(await listIndexes(ds, table)).toContainEqual({ name, unique, columns });
    }
    // The context stores keep their rows, and their full-text search still works.
    expect(await fullTextMatch(ds, 'kept')).toEqual([Number(identifiers[0].id)]);

    const applied = await ds.runMigrations();
    expect(applied.map((m) => m.name)).toEqual(MIGRATION_NAMES.slice(2));
    expect((await appliedMigrations(ds)).map((m) => m.name)).toEqual(MIGRATION_NAMES);
    expect(await listTables(ds)).toEqual(allTables(ds));
    expect(await fullTextObjects(ds)).toEqual(expectedFullTextObjects(ds));
    for (const [table, name, unique, columns] of [...RESOURCE_INDEXES, ...STEERING_INDEXES, ...DELIVERY_INDEXES]) {
      expect(await listIndexes(ds, table)).toContainEqual({ name, unique, columns });
    }
    // The resource tables start empty, and the chunk index follows inserts and deletes.
    for (const entity of [KnowledgeBaseEntity, KbDocumentEntity, KbChunkEntity]) {
      expect(await ds.getRepository(entity).count()).toBe(0);
    }
    const chunkId = await knowledgeRows(ds, 'searchable knowledge again');
    expect(await fullTextMatch(ds, 'searchable', 'kb_chunks')).toEqual([chunkId]);
    expect(await fullTextMatch(ds, 'dropped', 'kb_chunks')).toEqual([]);
    await ds.getRepository(KbChunkEntity).delete({ id: chunkId });
    expect(await fullTextMatch(ds, 'searchable', 'kb_chunks')).toEqual([]);
    expect(await fullTextMatch(ds, 'kept')).toEqual([Number(identifiers[0].id)]);
  });

  it('undoing two migrations reverts the resources, then the context stores, keeping the initial schema and its data', async () => {
    const ds = await ctx.open();
    await ds.getRepository(ApiKeyEntity).insert(apiKey('kept'));
    await ds.getRepository(RunEntity).insert(run('run-kept'));
    await ds.getRepository(TranscriptEntity).insert(transcriptRow(1, 'dropped with its table'));

    await undoNewerThan(ds, 'Resources1764700000000'); // kb stemming (kb-stemming.int-spec.ts), tool metadata
    await ds.undoLastMigration();
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
    expect(await appliedMigrations(ds)).toEqual(MIGRATION_NAMES.map((name) => expect.objectContaining({ name })));
    expect(await listTables(ds)).toEqual(allTables(ds));
    expect(await fullTextObjects(ds)).toEqual(expectedFullTextObjects(ds));
    for (const [table, name, unique, columns] of [...CONTEXT_INDEXES, ...RESOURCE_INDEXES]) {
      expect(await listIndexes(ds, table)).toContainEqual({ name, unique, columns });
    }
    // The existing run gets the new columns as NULL; the context tables start empty and work.
    expect(await ds.getRepository(RunEntity).findOneBy({ run_id: 'run-kept' })).toMatchObject({
      status: 'queued',
      snapshot_hash: null,
      authorization_run: null,
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
    await knowledgeRows(ds, 'before undo');

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
    expect(await columnsOf(ds, 'runs')).toEqual(
      expect.arrayContaining(['snapshot_hash', 'authorization_run', 'authorization_hash']),
    );
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
    expect(await ds.getRepository(KbChunkEntity).count()).toBe(0);
    const chunkId = await knowledgeRows(ds, 'after redo');
    expect(await fullTextMatch(ds, 'redo', 'kb_chunks')).toEqual([chunkId]);
    expect(await fullTextMatch(ds, 'before', 'kb_chunks')).toEqual([]);
  });

  it('the conversation-scope migration gives existing transcript rows the workspace of their event', async () => {
    const ds = await ctx.open();
    await undoNewerThan(ds, 'ToolMetadata1765300000000');
    expect(await columnsOf(ds, 'transcript')).not.toContain('workspace_id');
    // A user row (its own event), an assistant row (its run's event), a row of another agent
    // with the same event id (not matched), and a row of an event without a workspace.
    const log = (eventId: string, agentId: string, workspace: string | null, runId: string | null) =>
      `INSERT INTO "event_log" ("event_id", "event_type", "source", "agent_id", "conversation_id", "workspace_id",
        "input_summary", "run_id", "metadata", "created_at")
       VALUES ('${eventId}', 'message.received', 'api', '${agentId}', 'conv-1',
        ${workspace === null ? 'NULL' : `'${workspace}'`}, '', ${runId === null ? 'NULL' : `'${runId}'`}, '{}', 1)`;
    const row = (seq: number, agentId: string, eventId: string | null, runId: string | null) =>
      `INSERT INTO "transcript" ("conversation_id", "seq", "role", "item_type", "content", "content_json",
        "attachment_refs", "event_id", "run_id", "agent_id", "metadata", "created_at")
       VALUES ('conv-1', ${seq}, 'user', 'message', 'm${seq}', '{}', '[]',
        ${eventId === null ? 'NULL' : `'${eventId}'`}, ${runId === null ? 'NULL' : `'${runId}'`}, '${agentId}', '{}', 1)`;
    await ds.query(runBefore('run-1', 'queued'));
    for (const sql of [
      log('evt-run-1', 'agent-1', 'tenant-1', 'run-1'),
      log('evt-user', 'agent-1', 'tenant-2', null),
      log('evt-none', 'agent-1', null, null),
      row(1, 'agent-1', 'evt-user', null),
      row(2, 'agent-1', 'assistant-uuid', 'run-1'),
      row(3, 'agent-2', 'evt-user', null),
      row(4, 'agent-1', 'evt-none', null),
    ]) {
      await ds.query(sql);
    }

    await ds.runMigrations();
    const rows: Array<{ seq: number | string; workspace_id: string | null }> = await ds.query(
      `SELECT "seq", "workspace_id" FROM "transcript" ORDER BY "seq"`,
    );
    // runMigrations applies the chain to its end: the workspaces migration then moves every row into
    // the default workspace (docs/tenancy.md), so each row's workspace is 'default' now.
    expect(rows.map((r) => [Number(r.seq), r.workspace_id])).toEqual([
      [1, 'default'],
      [2, 'default'],
      [3, 'default'],
      [4, 'default'],
    ]);
    for (const [table, name, unique, columns] of SCOPE_INDEXES) {
      expect(await listIndexes(ds, table)).toContainEqual({ name, unique, columns });
    }
  });

  it('the pending-delivery-id migration indexes the delivery id of pending ops only, keeps the rows, and down builds the full index again', async () => {
    const ds = await ctx.open();
    await undoNewerThan(ds, 'KbStoredTsvector1767670000000');
    const full = { name: 'uq_delivery_outbox_id', unique: true, columns: ['delivery_id'] };
    const pending = { name: 'uq_delivery_outbox_pending_id', unique: true, columns: ['delivery_id'] };
    expect(await listIndexes(ds, 'delivery_outbox')).toContainEqual(full);
    const op = (id: string, sequence: number, state: string) =>
      `INSERT INTO "delivery_outbox" ("delivery_id", "run_id", "agent_id", "sequence", "op", "idempotency_key",
        "payload", "created_at", "webhook_state")
       VALUES ('${id}', 'run-1', 'agent-1', ${sequence}, 'message.send', 'k-${sequence}', '{}', 1, '${state}')`;
    await ds.query(op('d-sse', 1, 'none'));
    await ds.query(op('d-hook', 2, 'pending'));

    expect((await ds.runMigrations()).map((m) => m.name)).toEqual(
      MIGRATION_NAMES.slice(MIGRATION_NAMES.indexOf('PendingDeliveryIdIndex1767690000000')),
    );
    const names = (await listIndexes(ds, 'delivery_outbox')).map((i) => i.name);
    expect(names).not.toContain('uq_delivery_outbox_id');
    expect(await listIndexes(ds, 'delivery_outbox')).toContainEqual(pending);
    const ids = await ds.query<Array<{ delivery_id: string }>>(
      `SELECT "delivery_id" FROM "delivery_outbox" ORDER BY "sequence"`,
    );
    expect(ids.map((r) => r.delivery_id)).toEqual(['d-sse', 'd-hook']);
    // A pending op's id stays unique.
    await expect(ds.query(op('d-hook', 3, 'pending'))).rejects.toThrow(/unique|UNIQUE/);
    if (!isPostgres(ds)) {
      // The webhook worker's update by delivery id seeks it in the partial index.
      const plan = await ds.query<Array<{ detail: string }>>(
        `EXPLAIN QUERY PLAN UPDATE "delivery_outbox" SET "webhook_state" = 'delivered'
         WHERE "delivery_id" = 'd-hook' AND "webhook_state" = 'pending'`,
      );
      expect(plan.map((r) => r.detail).join('; ')).toMatch(
        /USING INDEX uq_delivery_outbox_pending_id \(delivery_id=\?\)/,
      );
    }

    await undoNewerThan(ds, 'KbStoredTsvector1767670000000');
    expect(await listIndexes(ds, 'delivery_outbox')).toContainEqual(full);
    expect((await listIndexes(ds, 'delivery_outbox')).map((i) => i.name)).not.toContain(
      'uq_delivery_outbox_pending_id',
    );
    expect(await ds.query(`SELECT COUNT(*) AS "n" FROM "delivery_outbox"`)).toEqual([{ n: isPostgres(ds) ? '2' : 2 }]);
    await ds.runMigrations();
  });

  it('the conversation-workspace migration keys running runs and steering items by workspace, from their events', async () => {
    const ds = await ctx.open();
    expect(await runningIndexDefinition(ds)).toMatch(/workspace_id/);
    await undoNewerThan(ds, 'Interactions1767000000000');
    expect(await columnsOf(ds, 'runs')).not.toContain('workspace_id');
    expect(await columnsOf(ds, 'steering_items')).not.toContain('workspace_id');
    expect(await runningIndexDefinition(ds)).not.toMatch(/workspace_id/);
    const log = (eventId: string, workspace: string | null) =>
      `INSERT INTO "event_log" ("event_id", "event_type", "source", "agent_id", "conversation_id", "workspace_id",
        "input_summary", "metadata", "created_at")
       VALUES ('${eventId}', 'message.received', 'api', 'agent-1', 'conv-1',
        ${workspace === null ? 'NULL' : `'${workspace}'`}, '', '{}', 1)`;
    const item = (eventId: string, oldKey: string) =>
      `INSERT INTO "steering_items" ("conversation_key", "agent_id", "runner_id", "conversation_id", "event_id", "kind",
        "state", "next_run_id", "dispatch", "item", "submission", "created_at")
       VALUES ('${oldKey}', 'agent-1', 'acme/echo/echo', 'conv-1', '${eventId}', 'queue', 'waiting', 'run-q', 'waiting',
        '{}', '{}', 1)`;
    const oldKey = JSON.stringify(['agent-1', 'conv-1', '']);
    for (const sql of [
      runBefore('run-1', 'running'),
      log('evt-run-1', 'tenant-1'),
      runBefore('run-none', 'completed'),
      log('evt-run-none', null),
      log('evt-item', 'tenant-1'),
      item('evt-item', oldKey),
      log('evt-item-none', null),
      item('evt-item-none', oldKey),
    ]) {
      await ds.query(sql);
    }

    await ds.runMigrations();
    const runs: Array<{ run_id: string; workspace_id: string | null }> = await ds.query(
      `SELECT "run_id", "workspace_id" FROM "runs" ORDER BY "run_id"`,
    );
    // Then the workspaces migration moves every row into the default workspace (docs/tenancy.md).
    expect(runs.map((r) => [r.run_id, r.workspace_id])).toEqual([
      ['run-1', 'default'],
      ['run-none', 'default'],
    ]);
    const items: Array<{ event_id: string; workspace_id: string | null; conversation_key: string }> = await ds.query(
      `SELECT "event_id", "workspace_id", "conversation_key" FROM "steering_items" ORDER BY "event_id"`,
    );
    expect(items.map((i) => [i.event_id, i.workspace_id, i.conversation_key])).toEqual([
      ['evt-item', 'default', conversationKey('agent-1', 'default', 'conv-1', null)],
      ['evt-item-none', 'default', conversationKey('agent-1', 'default', 'conv-1', null)],
    ]);
    expect(await runningIndexDefinition(ds)).toMatch(/workspace_id/);
    // Another workspace of the conversation may run now; the same workspace still may not.
    await ds.getRepository(RunEntity).insert({ ...run('run-2'), status: 'running', workspace_id: 'tenant-2' });
    await expect(
      ds.getRepository(RunEntity).insert({ ...run('run-3'), status: 'running', workspace_id: 'default' }),
    ).rejects.toThrow();
  });

  it('the workspaces migration moves existing rows into the default workspace and scopes keys (docs/tenancy.md)', async () => {
    const ds = await ctx.open();
    await undoNewerThan(ds, 'ConversationWorkspace1767100000000');
    expect(await listTables(ds)).not.toContain('workspaces');
    const key = (id: string, role: string) =>
      `INSERT INTO "api_keys" ("id", "name", "role", "key_hash", "key_prefix", "created_at")
       VALUES ('${id}', '${id}', '${role}', 'hash-${id}', 'rhk_', 1)`;
    for (const sql of [
      key('k-platform', 'platform'),
      key('k-admin', 'admin'),
      `INSERT INTO "agents" ("agent_id", "runner_id", "description", "runner_config", "resource_policy", "state_policy",
        "delivery_policy", "concurrency_policy", "version", "created_at", "updated_at")
       VALUES ('agent-1', 'acme/echo/echo', '', '{}', '{}', '{}', '{}', '{}', 1, 1, 1)`,
      `INSERT INTO "runs" ("run_id", "event_id", "agent_id", "runner_id", "conversation_id", "workspace_id", "status",
        "context", "created_at") VALUES ('run-w', 'evt-w', 'agent-1', 'acme/echo/echo', 'conv-1', 'tenant-1',
        'completed', '{}', 1)`,
    ]) {
      await ds.query(sql);
    }

    await ds.runMigrations();
    const workspaces: Array<{ workspace_id: string }> = await ds.query(`SELECT "workspace_id" FROM "workspaces"`);
    expect(workspaces.map((w) => w.workspace_id)).toEqual(['default']);
    const keys: Array<{ id: string; workspace_ids: string | null }> = await ds.query(
      `SELECT "id", "workspace_ids" FROM "api_keys" ORDER BY "id"`,
    );
    // Platform keys act in the default workspace; admin keys stay global.
    expect(keys.map((k) => [k.id, k.workspace_ids])).toEqual([
      ['k-admin', null],
      ['k-platform', '["default"]'],
    ]);
    const agents: Array<{ workspace_id: string }> = await ds.query(`SELECT "workspace_id" FROM "agents"`);
    expect(agents.map((a) => a.workspace_id)).toEqual(['default']);
    const runs: Array<{ workspace_id: string }> = await ds.query(`SELECT "workspace_id" FROM "runs"`);
    expect(runs.map((r) => r.workspace_id)).toEqual(['default']);

    await undoNewerThan(ds, 'ConversationWorkspace1767100000000');
    expect(await listTables(ds)).not.toContain('workspaces');
    expect(await columnsOf(ds, 'agents')).not.toContain('workspace_id');
    expect(await columnsOf(ds, 'api_keys')).not.toContain('workspace_ids');
  });

  it('the run-snapshots migration stores each snapshot once by its hash; moved snapshots still verify, and revert', async () => {
    const ds = await ctx.open();
    await undoNewerThan(ds, 'Workspaces1767200000000');
    expect(await columnsOf(ds, 'runs')).toContain('authorization');
    const grants = { version: 1, available_apis: { run_get: true }, limits: { burst: 5 }, prompt: [] };
    const snapshot = (runId: string, actor: string) => ({
      ...grants,
      run_id: runId,
      scope: { agent_id: 'agent-1', actor_id: actor },
      deadline_at_ms: null,
    });
    const runs = [
      ['run-a', snapshot('run-a', 'u1')],
      ['run-b', snapshot('run-b', 'u2')],
      ['run-c', { ...snapshot('run-c', 'u1'), limits: { burst: 9 } }],
      ['run-none', null],
    ] as const;
    for (const [runId, auth] of runs) {
      await ds.query(runBefore(runId, 'completed'));
      await ds.query(
        `UPDATE "runs" SET "authorization" = ${isPostgres(ds) ? '$1' : '?'}, "authorization_hash" = ${isPostgres(ds) ? '$2' : '?'}
         WHERE "run_id" = '${runId}'`,
        [auth ? JSON.stringify(auth) : null, auth ? snapshotHash(auth as unknown as AuthorizationSnapshot) : null],
      );
    }

    await ds.runMigrations();
    expect(await columnsOf(ds, 'runs')).not.toContain('authorization');
    const stored: Array<{ hash: string; content: string }> = await ds.query(
      `SELECT "hash", "content" FROM "snapshots"`,
    );
    expect(stored).toHaveLength(2);
    for (const row of stored) {
      expect(createHash('sha256').update(row.content).digest('hex')).toBe(row.hash);
    }
    const joined: Array<{
      run_id: string;
      authorization_hash: string | null;
      authorization_run: string | null;
      content: string | null;
    }> = await ds.query(
      `SELECT r."run_id", r."authorization_hash", r."authorization_run", s."content" FROM "runs" AS r
         LEFT JOIN "snapshots" AS s ON s."hash" = r."snapshot_hash" ORDER BY r."run_id"`,
    );
    for (const [runId, auth] of runs) {
      const row = joined.find((r) => r.run_id === runId)!;
      const whole = joinSnapshot(row.content, row.authorization_run);
      expect(whole).toEqual(auth);
      if (auth) {
        expect(snapshotHash(whole as unknown as AuthorizationSnapshot)).toBe(row.authorization_hash);
      }
    }

    await undoNewerThan(ds, 'Workspaces1767200000000'); // host processes, transcript index, run snapshots
    expect(await listTables(ds)).not.toContain('snapshots');
    const reverted: Array<{ run_id: string; authorization: string | null }> = await ds.query(
      `SELECT "run_id", "authorization" FROM "runs" ORDER BY "run_id"`,
    );
    expect(
      reverted.map((r) => [r.run_id, r.authorization === null ? null : (JSON.parse(r.authorization) as unknown)]),
    ).toEqual(runs.map(([runId, auth]) => [runId, auth]));
  });

  it('the transcript-index migration keeps existing rows searchable; new rows are searchable once indexed', async () => {
    const ds = await ctx.open();
    await undoNewerThan(ds, 'RunSnapshots1767400000000');
    await ds.getRepository(TranscriptEntity).insert(transcriptRow(1, 'written before the migration'));
    await ds.runMigrations();
    const [{ id: oldId }]: Array<{ id: number | string }> = await ds.query(`SELECT "id" FROM "transcript"`);
    expect(await fullTextMatch(ds, 'before')).toEqual([Number(oldId)]);
    const { identifiers } = await ds.getRepository(TranscriptEntity).insert(transcriptRow(2, 'written after it'));
    const newId = Number(identifiers[0].id);
    if (!isPostgres(ds)) {
      // Not indexed at insert; deleting such a row leaves the index intact.
      const raw = (word: string) =>
        ds.query(`SELECT rowid FROM "transcript_fts" WHERE "transcript_fts" MATCH ?`, [word]);
      expect(await raw('after')).toEqual([]);
      await ds.getRepository(TranscriptEntity).delete({ id: newId });
      await ds.getRepository(TranscriptEntity).insert(transcriptRow(3, 'written after it again'));
      expect(await ds.query(`INSERT INTO "transcript_fts"("transcript_fts") VALUES ('integrity-check')`)).toBeDefined();
    }
    const after = await fullTextMatch(ds, 'after');
    expect(after).toHaveLength(1);
    expect(await fullTextMatch(ds, 'before')).toEqual([Number(oldId)]);
    if (!isPostgres(ds)) {
      await ds.getRepository(TranscriptEntity).delete({ id: after[0] });
      expect(await fullTextMatch(ds, 'after')).toEqual([]);
      await ds.query(`INSERT INTO "transcript_fts"("transcript_fts") VALUES ('integrity-check')`);
    }
  });

  it('the run-leases migration adds owner, attempt (0 for the runs it finds) and last write; down removes them', async () => {
    const ds = await ctx.open();
    await undoNewerThan(ds, 'HostProcesses1767500000000');
    const lease = ['attempt', 'last_write_at', 'owner_process_id'];
    expect((await columnsOf(ds, 'runs')).filter((c) => lease.includes(c))).toEqual([]);
    await ds.query(
      `INSERT INTO "runs" ("run_id", "event_id", "agent_id", "runner_id", "status", "context", "created_at")
       VALUES ('run-before-leases', 'evt-1', 'agent-1', 'acme/echo/echo', 'running', '{}', 1)`,
    );
    await ds.runMigrations();
    expect((await columnsOf(ds, 'runs')).filter((c) => lease.includes(c))).toEqual(lease);
    expect(await ds.getRepository(RunEntity).findOneByOrFail({ run_id: 'run-before-leases' })).toMatchObject({
      owner_process_id: null,
      attempt: 0,
      last_write_at: null,
    });
    expect((await listIndexes(ds, 'runs')).map((i) => i.name)).toContain('idx_runs_owner_process');
    await undoNewerThan(ds, 'HostProcesses1767500000000');
    expect((await columnsOf(ds, 'runs')).filter((c) => lease.includes(c))).toEqual([]);
    expect((await listIndexes(ds, 'runs')).map((i) => i.name)).not.toContain('idx_runs_owner_process');
    await ds.query(`DELETE FROM "runs" WHERE "run_id" = 'run-before-leases'`);
    await ds.runMigrations();
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
    // Only the PostgreSQL-only column no entity declares (PG_ONLY_COLUMNS), which TypeORM would
    // drop with its index and its typeorm_metadata row.
    expect(PG_ONLY_COLUMNS).toEqual({ kb_chunks: ['content_tsv'] });
    expect(pending.upQueries.map((q) => [q.query, q.parameters ?? []])).toEqual([
      [`DROP INDEX "public"."idx_kb_chunks_tsv"`, []],
      [`ALTER TABLE "kb_chunks" DROP COLUMN "content_tsv"`, []],
      [
        `DELETE FROM "typeorm_metadata" WHERE "type" = $1 AND "name" = $2 AND "database" = $3 AND "schema" = $4 AND "table" = $5`,
        ['GENERATED_COLUMN', 'content_tsv', expect.any(String), 'public', 'kb_chunks'],
      ],
    ]);
  });
});
