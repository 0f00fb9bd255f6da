import type { TestingModule } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { KnowledgeRepository, MIGRATIONS, Transactions } from '@libs/persistence';
import { KnowledgeService, KnowledgeUploads, type ResourceCall } from '@libs/resources';
import { DIALECTS, isPostgres, type TestDatabase, storesModule } from './support/databases';

jest.setTimeout(120_000);

const CALL: ResourceCall = { run_id: 'run-1', signal: new AbortController().signal, deadline_at_ms: null };

/*
 * Knowledge search stems (migration KbStemming1764800000000): "erupt" finds "erupts", chunks
 * stored before the migration are indexed again by it, and scores are relative to the best hit.
 */
describe.each(DIALECTS)('knowledge search with stemming on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let kb: KnowledgeService;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [Transactions, KnowledgeRepository, KnowledgeService, KnowledgeUploads]);
    ds = moduleRef.get(DataSource);
    kb = moduleRef.get(KnowledgeService);
  });

  afterAll(async () => {
    await moduleRef?.close();
    await db?.dispose();
  });

  const names = (hits: Array<{ metadata: Record<string, unknown> }>) => hits.map((h) => h.metadata.document_name);

  it('indexes chunks stored before the migration again, with stemming', async () => {
    // This migration and the ones after it are undone (newest first), then applied again.
    const fromStemming = MIGRATIONS.map((m) => m.name).slice(
      MIGRATIONS.findIndex((m) => m.name === 'KbStemming1764800000000'),
    );
    expect(fromStemming[0]).toBe('KbStemming1764800000000');
    for (let i = 0; i < fromStemming.length; i++) {
      await ds.undoLastMigration();
    }
    // The service writes today's knowledge_bases row (the workspaces migration, after this one,
    // added two columns): give the old table those columns while it is used, and take them away before migrating.
    const tenancyColumns = [
      `"workspace_id" VARCHAR(64) NOT NULL DEFAULT 'default'`,
      `"shared" BOOLEAN NOT NULL DEFAULT false`,
    ];
    for (const column of tenancyColumns) {
      await ds.query(`ALTER TABLE "knowledge_bases" ADD COLUMN ${column}`);
    }
    // And the document status (KbDocumentStatus, after this one too).
    const statusColumns = [`"status" VARCHAR(16) NOT NULL DEFAULT 'ready'`, `"updated_at" BIGINT NOT NULL DEFAULT 0`];
    for (const column of statusColumns) {
      await ds.query(`ALTER TABLE "kb_documents" ADD COLUMN ${column}`);
    }
    await kb.create('old', { name: 'Stored before stemming' });
    await kb.addDocument('old', { name: 'etna', content_type: 'text/plain', content: 'Mount Etna erupts often.' });
    const indexDef = async (name = 'idx_kb_chunks_fts') =>
      (await ds.query<{ indexdef: string }[]>(`SELECT indexdef FROM pg_indexes WHERE indexname = $1`, [name]))[0]
        ?.indexdef;
    if (isPostgres(ds)) {
      // The query names its configuration itself; the migration moves the index to the same one.
      expect(await indexDef()).toContain(`to_tsvector('simple'::regconfig, content)`);
    } else {
      // The FTS5 table decides: without porter, the word has to be the same.
      expect(names(await kb.retrieve(CALL, { kb_id: 'old', query_text: 'erupt' }))).toEqual([]);
    }

    for (const column of ['workspace_id', 'shared']) {
      await ds.query(`ALTER TABLE "knowledge_bases" DROP COLUMN "${column}"`);
    }
    for (const column of ['status', 'updated_at']) {
      await ds.query(`ALTER TABLE "kb_documents" DROP COLUMN "${column}"`);
    }
    expect((await ds.runMigrations()).map((m) => m.name)).toEqual(fromStemming);
    expect(names(await kb.retrieve(CALL, { kb_id: 'old', query_text: 'erupt' }))).toEqual(['etna']);
    if (isPostgres(ds)) {
      // KbStoredTsvector (later) stores the `english` vector and indexes it in place of the expression.
      expect(await indexDef()).toBeUndefined();
      expect(await indexDef('idx_kb_chunks_tsv')).toContain('USING gin (content_tsv)');
      const [column] = await ds.query<Array<{ def: string }>>(
        `SELECT pg_get_expr(d.adbin, d.adrelid) AS def FROM pg_attrdef d
           JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
          WHERE d.adrelid = 'kb_chunks'::regclass AND a.attname = 'content_tsv'`,
      );
      expect(column.def).toBe(`to_tsvector('english'::regconfig, content)`);
      // The search can use the index (it matches on the column); one connection for SET LOCAL.
      const plan = await ds.transaction(async (m) => {
        await m.query('SET LOCAL enable_seqscan = off');
        return m.query<Array<Record<string, string>>>(
          `EXPLAIN SELECT id FROM kb_chunks WHERE content_tsv @@ to_tsquery('english', 'erupt')`,
        );
      });
      expect(JSON.stringify(plan)).toContain('idx_kb_chunks_tsv');
    } else {
      await ds.query(`INSERT INTO kb_chunks_fts(kb_chunks_fts) VALUES ('integrity-check')`);
    }
    await kb.remove('old');
  });

  it('finds inflected forms both ways and scores hits relative to the best one', async () => {
    await kb.create('volcanoes', { name: 'Volcanoes' });
    const docs: Array<[string, string]> = [
      ['etna', 'Mount Etna erupts several times a year; its eruptions are watched closely.'],
      ['vesuvius', 'Vesuvius erupted in 79 AD.'],
      ['fuji', 'Fuji is a dormant volcano, quiet since 1707.'],
    ];
    for (const [name, content] of docs) {
      await kb.addDocument('volcanoes', { name, content_type: 'text/plain', content });
    }
    expect(new Set(names(await kb.retrieve(CALL, { kb_id: 'volcanoes', query_text: 'erupt' })))).toEqual(
      new Set(['etna', 'vesuvius']),
    );
    expect(names(await kb.retrieve(CALL, { kb_id: 'volcanoes', query_text: 'volcanoes' }))).toEqual(['fuji']);

    const hits = await kb.retrieve(CALL, { kb_id: 'volcanoes', query_text: 'erupting volcano' });
    expect(hits.length).toBe(3);
    expect(hits[0].score).toBe(1);
    for (let i = 1; i < hits.length; i++) {
      expect(hits[i].score).toBeGreaterThan(0);
      expect(hits[i].score).toBeLessThanOrEqual(hits[i - 1].score);
    }
    for (const h of hits) {
      expect(h.distance).toBeCloseTo(1 - h.score, 10);
    }
  });
});
