import type { TestingModule } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { KnowledgeRepository, MIGRATIONS, Transactions } from '@libs/persistence';
import { KnowledgeService, KnowledgeUploads, type ResourceCall } from '@libs/resources';
import { type TestDatabase, postgresDatabase, storesModule } from './support/databases';

jest.setTimeout(120_000);

const CALL: ResourceCall = { run_id: 'run-1', signal: new AbortController().signal, deadline_at_ms: null };
const MIGRATION = 'KbStoredTsvector1767670000000';
/** This migration and the ones after it, oldest first: what undoing it (and them) takes, and what runMigrations then applies. */
const FROM_IT = MIGRATIONS.slice(MIGRATIONS.findIndex((m) => m.name === MIGRATION)).map((m) => m.name);

/*
 * PostgreSQL knowledge search on a stored vector (migration KbStoredTsvector1767670000000,
 * docs/models-tools-knowledge.md#searching): chunks written before the migration get their vector
 * from it and are found, new chunks get theirs at insert, searches match and rank on the column
 * through its GIN index, and `down` puts the expression index back.
 */
describe('knowledge chunks with a stored tsvector on postgres', () => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let kb: KnowledgeService;

  beforeAll(async () => {
    db = await postgresDatabase();
    moduleRef = await storesModule(db, [Transactions, KnowledgeRepository, KnowledgeService, KnowledgeUploads]);
    ds = moduleRef.get(DataSource);
    kb = moduleRef.get(KnowledgeService);
  });

  afterAll(async () => {
    await moduleRef?.close();
    await db?.dispose();
  });

  const names = (hits: Array<{ metadata: Record<string, unknown> }>) => hits.map((h) => h.metadata.document_name);
  const indexes = async () =>
    (
      await ds.query<Array<{ indexname: string; indexdef: string }>>(
        `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'kb_chunks' AND indexname LIKE 'idx_kb_chunks_%' ORDER BY indexname`,
      )
    ).map((r) => [r.indexname, r.indexdef.replace(/^.* USING /, '')]);
  const hasColumn = async () =>
    (
      await ds.query<unknown[]>(
        `SELECT 1 FROM information_schema.columns WHERE table_name = 'kb_chunks' AND column_name = 'content_tsv'`,
      )
    ).length === 1;

  /** Undoes the migrations after this one, then this one. */
  const undoIt = async () => {
    for (let i = 0; i < FROM_IT.length; i++) {
      await ds.undoLastMigration();
    }
  };

  it('down restores the expression index without the column', async () => {
    expect(FROM_IT[0]).toBe(MIGRATION);
    expect(await hasColumn()).toBe(true);
    expect(await indexes()).toEqual([
      ['idx_kb_chunks_doc', 'btree (document_id, "position")'],
      ['idx_kb_chunks_tsv', 'gin (content_tsv)'],
    ]);

    // TypeORM can load the table's shape (it reads a generated column's expression from typeorm_metadata).
    const runner = ds.createQueryRunner();
    try {
      const column = (await runner.getTable('kb_chunks'))?.findColumnByName('content_tsv');
      expect(column).toMatchObject({ generatedType: 'STORED', asExpression: `to_tsvector('english', "content")` });
    } finally {
      await runner.release();
    }

    await undoIt();

    expect(await hasColumn()).toBe(false);
    const metadata = await ds.query<unknown[]>(`SELECT 1 FROM pg_tables WHERE tablename = 'typeorm_metadata'`);
    expect(metadata).toEqual([]);
    expect(await indexes()).toEqual([
      ['idx_kb_chunks_doc', 'btree (document_id, "position")'],
      ['idx_kb_chunks_fts', `gin (to_tsvector('english'::regconfig, content))`],
    ]);
    expect((await ds.runMigrations()).map((m) => m.name)).toEqual(FROM_IT);
  });

  it('fills the vector of the chunks stored before it; new chunks get theirs at insert; both are searched', async () => {
    await undoIt();
    await kb.create('old', { name: 'Stored before the column' });
    const words = Array.from({ length: 300 }, (_, i) => `lava${i}`).join(' ');
    await kb.addDocument('old', {
      name: 'etna',
      content_type: 'text/plain',
      content: `Mount Etna erupts often. ${words}`,
    });
    await kb.addDocument('old', { name: 'fuji', content_type: 'text/plain', content: 'Fuji is a dormant volcano.' });
    const before = await ds.query<Array<{ n: string }>>(`SELECT count(*) AS n FROM kb_chunks`);
    expect(Number(before[0].n)).toBeGreaterThan(2);

    expect((await ds.runMigrations()).map((m) => m.name)).toEqual(FROM_IT);

    // Every existing row has its vector, the one the expression index had.
    const differing = await ds.query<Array<{ n: string }>>(
      `SELECT count(*) AS n FROM kb_chunks WHERE content_tsv IS DISTINCT FROM to_tsvector('english', content)`,
    );
    expect(Number(differing[0].n)).toBe(0);
    expect(names(await kb.retrieve(CALL, { kb_id: 'old', query_text: 'erupt' }))).toEqual(['etna']);
    expect(names(await kb.retrieve(CALL, { kb_id: 'old', query_text: 'lava299' }))).toEqual(['etna']);

    await kb.addDocument('old', {
      name: 'vesuvius',
      content_type: 'text/plain',
      content: 'Vesuvius erupted in 79 AD.',
    });
    const [fresh] = await ds.query<Array<{ tsv: string }>>(
      `SELECT c.content_tsv::text AS tsv FROM kb_chunks c JOIN kb_documents d USING (document_id) WHERE d.name = 'vesuvius'`,
    );
    expect(fresh.tsv).toContain(`'erupt'`);
    const hits = await kb.retrieve(CALL, { kb_id: 'old', query_text: 'erupting volcano' });
    expect(new Set(names(hits))).toEqual(new Set(['etna', 'vesuvius', 'fuji']));
    expect(hits[0].score).toBe(1);
    await kb.remove('old');
  });

  it('matches on the column through its GIN index', async () => {
    const plan = await ds.transaction(async (m) => {
      await m.query('SET LOCAL enable_seqscan = off');
      return m.query<Array<Record<string, string>>>(
        `EXPLAIN SELECT id FROM kb_chunks WHERE content_tsv @@ to_tsquery('english', 'erupt')`,
      );
    });
    expect(JSON.stringify(plan)).toContain('idx_kb_chunks_tsv');
  });
});
