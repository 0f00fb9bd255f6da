import type { TestingModule } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import {
  AgentEntity,
  KbChunkEntity,
  KbDocumentEntity,
  KnowledgeBaseEntity,
  KnowledgeRepository,
  Transactions,
} from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import { KB_BATCH, KnowledgeService, KnowledgeUploads, type ResourceCall } from '@libs/resources';
import { DIALECTS, isPostgres, type TestDatabase, storesModule } from './support/databases';

jest.setTimeout(120_000);

const sentence = (i: number) => `Sentence ${i} is about topic ${i % 5} and nothing else.`;
const CALL: ResourceCall = { run_id: 'run-1', signal: new AbortController().signal, deadline_at_ms: null };

/** Counts turns of the event loop (one setImmediate after another) until stopped. */
function eventLoopTurns(): { stop: () => number } {
  let turns = 0;
  let running = true;
  const tick = () => {
    if (running) {
      turns++;
      setImmediate(tick);
    }
  };
  setImmediate(tick);
  return {
    stop: () => {
      running = false;
      return turns;
    },
  };
}

async function domainError(p: Promise<unknown>): Promise<{ code: string; field?: unknown }> {
  const e: unknown = await p.then(
    () => null,
    (err: unknown) => err,
  );
  if (!(e instanceof DomainError)) {
    throw new Error(`expected a DomainError, got ${String(e)}`);
  }
  return { code: e.code, ...(e.details.field !== undefined ? { field: e.details.field } : {}) };
}

describe.each(DIALECTS)('knowledge bases on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let kb: KnowledgeService;
  let repo: KnowledgeRepository;
  let uploads: KnowledgeUploads;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [Transactions, KnowledgeRepository, KnowledgeService, KnowledgeUploads]);
    ds = moduleRef.get(DataSource);
    kb = moduleRef.get(KnowledgeService);
    repo = moduleRef.get(KnowledgeRepository);
    uploads = moduleRef.get(KnowledgeUploads);
  });

  afterAll(async () => {
    await moduleRef?.close();
    await db?.dispose();
  });

  beforeEach(async () => {
    for (const entity of [KbChunkEntity, KbDocumentEntity, KnowledgeBaseEntity, AgentEntity]) {
      await ds.getRepository(entity).clear();
    }
  });

  const chunkRows = async (documentId?: string) =>
    (await ds.getRepository(KbChunkEntity).find({ order: { position: 'ASC' } })).filter(
      (c) => documentId === undefined || c.document_id === documentId,
    );
  /** Ids of the chunks the full-text index itself finds for a word (SQLite: the FTS5 table). */
  const indexed = async (word: string): Promise<number[]> => {
    const rows: Array<{ id: number | string }> = isPostgres(ds)
      ? await ds.query(
          `SELECT id FROM kb_chunks WHERE to_tsvector('simple', content) @@ plainto_tsquery('simple', $1)`,
          [word],
        )
      : await ds.query(`SELECT rowid AS id FROM kb_chunks_fts WHERE kb_chunks_fts MATCH ?`, [`"${word}"`]);
    return rows.map((r) => Number(r.id)).sort((a, b) => a - b);
  };
  const ftsIntact = async () => {
    if (!isPostgres(ds)) {
      await ds.query(`INSERT INTO kb_chunks_fts(kb_chunks_fts) VALUES ('integrity-check')`);
    }
  };

  describe('knowledge bases', () => {
    it('creates with defaults, lists with counts, refuses duplicates and bad settings', async () => {
      const created = await kb.create('docs', { name: 'Docs' });
      expect(created).toMatchObject({
        kb_id: 'docs',
        name: 'Docs',
        description: '',
        kb_type: 'fulltext',
        chunk_size: 1000,
        chunk_overlap: 150,
        document_count: 0,
        chunk_count: 0,
      });
      await kb.create('small', { name: 'Small', description: 'd', chunk_size: 100, chunk_overlap: 50 });
      expect(await domainError(kb.create('docs', { name: 'again' }))).toEqual({ code: 'conflict' });
      expect(await domainError(kb.create('bad id!', { name: 'x' }))).toEqual({
        code: 'invalid_argument',
        field: 'kb_id',
      });
      for (const [size, overlap, field] of [
        [99, 0, 'chunk_size'],
        [10_001, 0, 'chunk_size'],
        [1.5, 0, 'chunk_size'],
        [200, 101, 'chunk_overlap'],
        [200, -1, 'chunk_overlap'],
      ] as const) {
        expect(await domainError(kb.create('k', { name: 'k', chunk_size: size, chunk_overlap: overlap }))).toEqual({
          code: 'invalid_argument',
          field,
        });
      }
      expect(await kb.create('tiny', { name: 'T', chunk_size: 100 })).toMatchObject({ chunk_overlap: 50 });

      await kb.addDocument('docs', { name: 'a.txt', content_type: 'text/plain', content: 'one two three' });
      await kb.addDocument('docs', { name: 'b.txt', content_type: 'text/plain', content: 'four five six' });
      expect(await kb.get('docs')).toMatchObject({ document_count: 2, chunk_count: 2 });
      const page1 = await kb.page(null, 2);
      expect(page1.items.map((k) => [k.kb_id, k.document_count])).toEqual([
        ['docs', 2],
        ['small', 0],
      ]);
      expect(page1.next_cursor).toBe('small');
      expect((await kb.page(page1.next_cursor, 2)).items.map((k) => k.kb_id)).toEqual(['tiny']);
      expect(await kb.catalog()).toEqual([
        { kb_id: 'docs', kb_name: 'Docs', kb_type: 'fulltext', workspace_id: 'default', shared: false },
        { kb_id: 'small', kb_name: 'Small', kb_type: 'fulltext', workspace_id: 'default', shared: false },
        { kb_id: 'tiny', kb_name: 'T', kb_type: 'fulltext', workspace_id: 'default', shared: false },
      ]);
      expect(await domainError(kb.get('nope'))).toEqual({ code: 'not_found' });
    });

    it('deletes a knowledge base with its documents, chunks and index entries; other bases stay', async () => {
      await kb.create('gone', { name: 'Gone' });
      await kb.create('kept', { name: 'Kept' });
      await kb.addDocument('gone', { name: 'g', content_type: 'text/plain', content: 'zeppelin over the harbour' });
      await kb.addDocument('kept', { name: 'k', content_type: 'text/plain', content: 'zeppelin in the hangar' });
      expect(await indexed('zeppelin')).toHaveLength(2);

      await kb.remove('gone');

      expect(await domainError(kb.get('gone'))).toEqual({ code: 'not_found' });
      expect((await ds.getRepository(KbDocumentEntity).find()).map((d) => d.kb_id)).toEqual(['kept']);
      expect((await chunkRows()).map((c) => c.kb_id)).toEqual(['kept']);
      expect(await indexed('harbour')).toEqual([]);
      expect(await indexed('zeppelin')).toHaveLength(1);
      await ftsIntact();
      expect(await kb.search('kept', { query_text: 'zeppelin' })).toHaveLength(1);
      expect(await domainError(kb.remove('gone'))).toEqual({ code: 'not_found' });
    });

    it('refuses to delete a knowledge base an agent is granted', async () => {
      await kb.create('used', { name: 'Used' });
      await kb.create('used-2', { name: 'Prefix of nothing' });
      const agent = (agent_id: string, allowed_kb_ids: string[]) =>
        ds.getRepository(AgentEntity).insert({
          agent_id,
          runner_id: 'plugin:a/b/default',
          description: '',
          runner_config: {},
          resource_policy: { allowed_kb_ids },
          state_policy: {},
          delivery_policy: {},
          concurrency_policy: {},
          version: 1,
          created_at: 1,
          updated_at: 1,
        });
      await agent('bot-1', ['used']);
      await agent('bot-2', ['other', 'used']);
      await agent('bot-3', ['used-2']);

      const refused = await kb.remove('used').catch((e: DomainError) => e);
      expect(refused).toBeInstanceOf(DomainError);
      expect((refused as DomainError).code).toBe('conflict');
      expect((refused as DomainError).details).toEqual({ kb_id: 'used', agent_ids: ['bot-1', 'bot-2'] });
      expect(await kb.get('used')).toMatchObject({ kb_id: 'used' });

      await ds.getRepository(AgentEntity).delete({ agent_id: 'bot-3' });
      await kb.remove('used-2');
    });
  });

  describe('ingestion', () => {
    it('chunks on paragraph and sentence boundaries with overlap, with the chunk metadata', async () => {
      await kb.create('kb', { name: 'KB', chunk_size: 200, chunk_overlap: 60 });
      const text = [
        [0, 1, 2],
        [3, 4, 5, 6, 7, 8, 9],
      ]
        .map((p) => p.map(sentence).join(' '))
        .join('\n\n');
      const doc = await kb.addDocument('kb', {
        name: 'topics.txt',
        content_type: 'text/plain',
        content: text,
        metadata: { lang: 'en', version: 3, public: true, owner: null },
      });
      expect(doc).toMatchObject({
        kb_id: 'kb',
        name: 'topics.txt',
        content_type: 'text/plain',
        size: Buffer.byteLength(text),
        metadata: { lang: 'en', version: 3, public: true, owner: null },
      });
      expect(doc.document_id).toMatch(/^doc_[0-9a-z]{10}[0-9a-f]{16}$/);

      const chunks = await chunkRows(doc.document_id);
      expect(chunks).toHaveLength(doc.chunk_count);
      expect(chunks.map((c) => c.position)).toEqual([...chunks.keys()]);
      // The first paragraph is a chunk of its own; every chunk is whole sentences.
      expect(chunks[0].content).toBe([0, 1, 2].map(sentence).join(' '));
      for (const c of chunks) {
        expect(c.content.length).toBeLessThanOrEqual(200);
        expect(c.content).toMatch(/^Sentence \d+ .*else\.$/s);
        expect(c.metadata).toEqual({
          lang: 'en',
          version: 3,
          public: true,
          owner: null,
          document_id: doc.document_id,
          document_name: 'topics.txt',
          position: c.position,
        });
      }
      // Neighbours share the sentences of the overlap (within 60 characters).
      for (let i = 2; i < chunks.length; i++) {
        const first = chunks[i].content.split('else.')[0] + 'else.';
        expect(first.length).toBeLessThanOrEqual(60);
        expect(chunks[i - 1].content.endsWith(first)).toBe(true);
      }
    });

    it('keeps Markdown headings with their sections and labels chunks with them', async () => {
      await kb.create('md', { name: 'MD', chunk_size: 300, chunk_overlap: 0 });
      const content = '# Setup\n## Linux\nUse apt to install.\n\n## Windows\nRun the MSI installer.\n';
      const doc = await kb.addDocument('md', { name: 'setup.md', content_type: 'text/markdown', content });
      const chunks = await chunkRows(doc.document_id);
      expect(chunks.map((c) => [c.content, c.metadata.heading])).toEqual([
        ['# Setup\n## Linux\nUse apt to install.', 'Linux'],
        ['## Windows\nRun the MSI installer.', 'Windows'],
      ]);
      const hits = await kb.search('md', { query_text: 'installer', filters: { heading: 'Windows' } });
      expect(hits.map((h) => h.metadata.heading)).toEqual(['Windows']);
    });

    it('validates documents before writing anything', async () => {
      await kb.create('kb', { name: 'KB' });
      const doc = { name: 'n', content_type: 'text/plain', content: 'text' };
      const cases: Array<[Record<string, unknown>, string, string]> = [
        [{ name: '' }, 'invalid_argument', 'name'],
        [{ content_type: 'text/html' }, 'invalid_argument', 'content_type'],
        [{ content: '   \n' }, 'invalid_argument', 'content'],
        [{ content: 'a\u0000b' }, 'invalid_argument', 'content'],
        [{ metadata: { document_id: 'x' } }, 'invalid_argument', 'metadata.document_id'],
        [{ metadata: { nested: { a: 1 } } }, 'invalid_argument', 'metadata.nested'],
        [{ metadata: { list: [1] } }, 'invalid_argument', 'metadata.list'],
        [{ metadata: { 'bad key': 1 } }, 'invalid_argument', 'metadata.bad key'],
        [{ metadata: [] }, 'invalid_argument', 'metadata'],
      ];
      for (const [patch, code, field] of cases) {
        expect(await domainError(kb.addDocument('kb', { ...doc, ...patch }))).toEqual({ code, field });
      }
      const big = await kb
        .addDocument('kb', { ...doc, content: `${'é'.repeat(5 * 512 * 1024)}!` })
        .catch((e: DomainError) => e);
      expect(big).toMatchObject({ code: 'payload_too_large' });
      expect(await domainError(kb.addDocument('missing', doc))).toEqual({ code: 'not_found' });
      expect(await ds.getRepository(KbDocumentEntity).count()).toBe(0);
      expect(await ds.getRepository(KbChunkEntity).count()).toBe(0);
    });

    const newDoc = (document_id: string): KbDocumentEntity => ({
      document_id,
      kb_id: 'kb',
      name: document_id,
      content_type: 'text/plain',
      metadata: {},
      size: 1,
      chunk_count: 0,
      created_at: 1,
      status: 'writing',
      updated_at: 1,
    });
    const newChunks = (n: number, word: string) =>
      Array.from({ length: n }, (_, position) => ({ position, content: `${word} chunk ${position}`, metadata: {} }));
    /** What searches, listings and counts show of knowledge base `kb`. */
    const visible = async (word: string) => ({
      search: (await kb.search('kb', { query_text: word, top_k: 50 })).length,
      documents: (await kb.documents('kb', null, 10)).items.length,
      counts: await kb.get('kb').then((k) => [k.document_count, k.chunk_count]),
    });

    it('shows a document written in batches only once its last batch is written', async () => {
      await kb.create('kb', { name: 'KB' });
      await uploads.sweep(); // none running: an upload begun here by hand is not given up meanwhile
      const doc = newDoc('doc_batches');
      expect(await repo.beginDocument(doc)).toBe(true);
      expect(await repo.appendChunks(doc, newChunks(300, 'batchword'))).toBe(true);
      expect(
        await repo.appendChunks(
          doc,
          newChunks(300, 'batchword').map((c) => ({ ...c, position: c.position + 300 })),
        ),
      ).toBe(true);
      // Written and indexed, not visible: not searched, listed, counted or found.
      expect(await indexed('batchword')).toHaveLength(600);
      expect(await visible('batchword')).toEqual({ search: 0, documents: 0, counts: [0, 0] });
      expect(await domainError(kb.document('kb', 'doc_batches'))).toEqual({ code: 'not_found' });

      expect(await repo.completeDocument('doc_batches', 600)).toBe(true);
      expect(await visible('batchword')).toEqual({ search: 50, documents: 1, counts: [1, 600] });
      expect(await kb.document('kb', 'doc_batches')).toMatchObject({ chunk_count: 600 });
      // A ready document takes no more batches.
      expect(await repo.appendChunks(doc, newChunks(1, 'late'))).toBe(false);
      expect(await indexed('late')).toEqual([]);
    });

    it('a failing upload leaves nothing behind: the batches it wrote are removed', async () => {
      await kb.create('kb', { name: 'KB' });
      // Two batches go in; the third fails (NOT NULL) in the database.
      const chunks = newChunks(KB_BATCH.rows * 2 + 50, 'atomicword');
      chunks[KB_BATCH.rows * 2 + 10].content = null as unknown as string;
      await expect(uploads.write(newDoc('doc_atomic'), chunks[Symbol.iterator]())).rejects.toThrow();
      await uploads.sweep();
      expect(await ds.getRepository(KbDocumentEntity).count()).toBe(0);
      expect(await ds.getRepository(KbChunkEntity).count()).toBe(0);
      expect(await indexed('atomicword')).toEqual([]);
      await ftsIntact();

      const ok = await uploads.write(
        newDoc('doc_ok'),
        newChunks(KB_BATCH.rows * 2 + 50, 'atomicword')[Symbol.iterator](),
      );
      expect(ok).toBe(KB_BATCH.rows * 2 + 50);
      expect(await indexed('atomicword')).toHaveLength(KB_BATCH.rows * 2 + 50);
      expect(await visible('atomicword')).toEqual({ search: 50, documents: 1, counts: [1, KB_BATCH.rows * 2 + 50] });
    });

    it('gives up and removes an upload a stopped process left unfinished', async () => {
      await kb.create('kb', { name: 'KB' });
      await uploads.sweep();
      // A process began this upload and stopped after one batch (it is not one of this process's).
      const left = newDoc('doc_left');
      expect(await repo.beginDocument(left)).toBe(true);
      expect(await repo.appendChunks(left, newChunks(40, 'leftword'))).toBe(true);
      if (isPostgres(ds)) {
        // Another process of a cluster may still be writing it: left alone until no batch came for
        // the abandon age.
        await uploads.sweep();
        expect(await ds.getRepository(KbDocumentEntity).count()).toBe(1);
        await ds.query(`UPDATE kb_documents SET updated_at = $1`, [Date.now() - KB_BATCH.abandonAfterMs - 1]);
      }
      await uploads.sweep();
      expect(await ds.getRepository(KbDocumentEntity).count()).toBe(0);
      expect(await ds.getRepository(KbChunkEntity).count()).toBe(0);
      expect(await indexed('leftword')).toEqual([]);
      await ftsIntact();
      // Its batches are refused from then on.
      expect(await repo.appendChunks(left, newChunks(1, 'leftword'))).toBe(false);
      expect(await repo.completeDocument('doc_left', 41)).toBe(false);
      expect(await ds.getRepository(KbChunkEntity).count()).toBe(0);
    });

    it('uploads a large document in many batches, chunked as before', async () => {
      await kb.create('kb', { name: 'KB', chunk_size: 100 });
      const content = [...Array(1200).keys()].map(sentence).join(' ');
      // Event-loop turns while the upload runs: one at least per batch (on SQLite the one
      // transaction of before held the loop from its BEGIN to its COMMIT: no turn at all).
      const turns = eventLoopTurns();
      const doc = await kb.addDocument('kb', { name: 'big', content_type: 'text/plain', content });
      expect(turns.stop()).toBeGreaterThanOrEqual(Math.floor(doc.chunk_count / KB_BATCH.rows));
      expect(doc.chunk_count).toBeGreaterThan(KB_BATCH.rows * 2);
      const rows = await chunkRows(doc.document_id);
      expect(rows).toHaveLength(doc.chunk_count);
      expect(rows.map((c) => c.metadata.position)).toEqual(rows.map((_, i) => i));
      // In order, every sentence whole in some chunk.
      const text = rows.map((c) => c.content).join(' ');
      expect([...Array(1200).keys()].every((i) => text.includes(sentence(i)))).toBe(true);
      expect(text.indexOf(sentence(1199))).toBeGreaterThan(text.indexOf(sentence(0)));
      expect(await kb.get('kb')).toMatchObject({ document_count: 1, chunk_count: doc.chunk_count });
    });

    it('deletes a document with its chunks and their index entries', async () => {
      await kb.create('kb', { name: 'KB', chunk_size: 100, chunk_overlap: 0 });
      const gone = await kb.addDocument('kb', {
        name: 'gone',
        content_type: 'text/plain',
        content: [0, 1, 2, 3, 4].map((i) => `Walrus fact ${i} is uniquely walrus related.`).join(' '),
      });
      const kept = await kb.addDocument('kb', { name: 'kept', content_type: 'text/plain', content: 'A walrus swims.' });
      expect(gone.chunk_count).toBeGreaterThan(1);
      expect(await indexed('walrus')).toHaveLength(gone.chunk_count + 1);

      await kb.removeDocument('kb', gone.document_id);

      expect((await chunkRows()).map((c) => c.document_id)).toEqual([kept.document_id]);
      expect(await indexed('uniquely')).toEqual([]);
      expect(await indexed('walrus')).toHaveLength(1);
      await ftsIntact();
      expect((await kb.search('kb', { query_text: 'walrus' })).map((h) => h.metadata.document_id)).toEqual([
        kept.document_id,
      ]);
      expect(await kb.get('kb')).toMatchObject({ document_count: 1, chunk_count: 1 });
      expect(await domainError(kb.removeDocument('kb', gone.document_id))).toEqual({ code: 'not_found' });
      expect((await kb.documents('kb', null, 10)).items.map((d) => d.document_id)).toEqual([kept.document_id]);
    });

    it('survives concurrent uploads and a concurrent delete without orphans', async () => {
      await kb.create('busy', { name: 'Busy', chunk_size: 100, chunk_overlap: 20 });
      const content = [...Array(30).keys()].map(sentence).join(' ');
      const upload = (i: number) =>
        kb.addDocument('busy', { name: `d${i}`, content_type: 'text/plain', content }).then(
          () => 'ok',
          (e: DomainError) => e.code,
        );
      const outcomes = await Promise.all([upload(1), upload(2), upload(3), kb.remove('busy').then(() => 'deleted')]);
      expect(outcomes.at(-1)).toBe('deleted');
      expect(outcomes.slice(0, 3).every((o) => o === 'ok' || o === 'not_found')).toBe(true);
      expect(await ds.getRepository(KbDocumentEntity).count()).toBe(0);
      expect(await ds.getRepository(KbChunkEntity).count()).toBe(0);
      await ftsIntact();

      await kb.create('busy', { name: 'Busy', chunk_size: 100, chunk_overlap: 20 });
      expect(await Promise.all([upload(4), upload(5), upload(6)])).toEqual(['ok', 'ok', 'ok']);
      const docs = (await kb.documents('busy', null, 10)).items;
      expect(docs).toHaveLength(3);
      expect(await ds.getRepository(KbChunkEntity).count()).toBe(docs.reduce((n, d) => n + d.chunk_count, 0));
    });
  });

  describe('retrieval', () => {
    let docs: Record<string, string>;

    beforeEach(async () => {
      await kb.create('zoo', { name: 'Zoo', chunk_size: 300, chunk_overlap: 0 });
      await kb.create('other', { name: 'Other' });
      docs = {};
      const add = async (name: string, content: string, metadata: Record<string, unknown> = {}) => {
        docs[name] = (await kb.addDocument('zoo', { name, content_type: 'text/plain', content, metadata })).document_id;
      };
      await add('both', 'The penguin colony lives next to the polar bear enclosure.', { team: 'birds', floor: 1 });
      await add('penguins', 'Penguin penguin penguin: the penguin house has many penguin chicks.', {
        team: 'birds',
        floor: 2,
        open: true,
      });
      await add('penguin-once', 'A long text that mentions a penguin only once among many other words here.', {
        team: 'birds',
        floor: 1,
        open: false,
      });
      await add('bears', 'The polar bear eats fish and sleeps for most of the afternoon in the shade.', {
        team: 'mammals',
        floor: '1',
      });
      await add('unrelated', 'Opening hours and ticket prices.', { team: 'office' });
      await kb.addDocument('other', { name: 'x', content_type: 'text/plain', content: 'penguin penguin elsewhere' });
      // Unrelated text, so that the words above are rare enough for bm25 to weigh them (its IDF).
      for (const filler of [
        'Gift shop sells souvenirs.',
        'Parking is free on Sundays.',
        'Lost children meet at the gate.',
      ]) {
        await kb.addDocument('other', { name: 'filler', content_type: 'text/plain', content: filler });
      }
    });

    const names = (hits: Array<{ metadata: Record<string, unknown> }>) => hits.map((h) => h.metadata.document_name);

    it('ranks chunks matching more query words, and more often, first; entries are Protocol v1', async () => {
      const hits = await kb.retrieve(CALL, { kb_id: 'zoo', query_text: 'penguin polar bear' });
      expect(names(hits)[0]).toBe('both');
      expect(new Set(names(hits))).toEqual(new Set(['both', 'penguins', 'penguin-once', 'bears']));
      for (let i = 1; i < hits.length; i++) {
        expect(hits[i - 1].score).toBeGreaterThanOrEqual(hits[i].score);
      }
      for (const h of hits) {
        expect(h).toEqual({
          id: expect.stringMatching(/^\d+$/),
          content: [{ type: 'text', text: expect.any(String) }],
          metadata: expect.objectContaining({ document_id: docs[h.metadata.document_name as string], position: 0 }),
          distance: expect.any(Number),
          score: expect.any(Number),
        });
        expect(h.score).toBeGreaterThan(0);
        expect(h.score).toBeLessThanOrEqual(1);
        expect(h.distance).toBeCloseTo(1 - h.score, 10);
      }
      // Scores are relative to the best hit of the search.
      expect(hits[0].score).toBe(1);
      const single = await kb.retrieve(CALL, { kb_id: 'zoo', query_text: 'penguin' });
      expect(names(single)).toEqual(['penguins', 'both', 'penguin-once']);
      // Only this knowledge base's chunks.
      expect(names(single)).not.toContain('x');
      // Stop words do not count when there are other words; top_k caps the results.
      expect(names(await kb.retrieve(CALL, { kb_id: 'zoo', query_text: 'what are the ticket prices?' }))).toEqual([
        'unrelated',
      ]);
      expect(await kb.retrieve(CALL, { kb_id: 'zoo', query_text: 'penguin bear', top_k: 2 })).toHaveLength(2);
      expect(await kb.retrieve(CALL, { kb_id: 'zoo', query_text: 'kangaroo' })).toEqual([]);
    });

    it('never lets full-text syntax in the query break it', async () => {
      const queries = [
        '"penguin',
        'penguin AND OR NOT',
        'penguin*',
        'NEAR(penguin bear)',
        'content:penguin',
        "penguin'; DROP TABLE kb_chunks; --",
        'penguin & !bear | (fish',
        '-penguin +bear ^fish',
        'penguin:* <-> bear',
        '{penguin} [bear] \\fish',
      ];
      for (const query_text of queries) {
        const hits = await kb.search('zoo', { query_text });
        expect(names(hits)).toContain('penguins');
      }
      expect(await kb.search('zoo', { query_text: '*** "" ()' })).toEqual([]);
      expect(await kb.search('zoo', { query_text: 'NOT' })).toEqual([]);
      expect(await ds.getRepository(KbChunkEntity).count()).toBeGreaterThan(0);
    });

    it('filters by equality on chunk metadata, exactly typed', async () => {
      const search = (filters: Record<string, unknown>) =>
        kb.search('zoo', { query_text: 'penguin bear', filters }).then(names);
      expect(await search({ document_id: docs.bears })).toEqual(['bears']);
      expect(new Set(await search({ team: 'birds' }))).toEqual(new Set(['both', 'penguins', 'penguin-once']));
      expect(new Set(await search({ team: 'birds', floor: 1 }))).toEqual(new Set(['both', 'penguin-once']));
      expect(await search({ floor: '1' })).toEqual(['bears']);
      expect(await search({ floor: 2.0 })).toEqual(['penguins']);
      expect(await search({ open: true })).toEqual(['penguins']);
      expect(await search({ open: false })).toEqual(['penguin-once']);
      expect(await search({ document_name: 'both', position: 0 })).toEqual(['both']);
      expect(await search({ missing: 'x' })).toEqual([]);
      expect(await search({})).toHaveLength(4);
    });

    it('rejects bad queries, top_k and filter shapes with invalid_argument', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ query_text: '' }, 'query_text'],
        [{ query_text: '   ' }, 'query_text'],
        [{ query_text: 'x'.repeat(1001) }, 'query_text'],
        [{ query_text: 'penguin', top_k: 0 }, 'top_k'],
        [{ query_text: 'penguin', top_k: 51 }, 'top_k'],
        [{ query_text: 'penguin', top_k: 2.5 }, 'top_k'],
        [{ query_text: 'penguin', filters: { team: { $eq: 'birds' } } }, 'filters.team'],
        [{ query_text: 'penguin', filters: { team: ['birds'] } }, 'filters.team'],
        [{ query_text: 'penguin', filters: { 'a"b': 1 } }, 'filters.a"b'],
        [{ query_text: 'penguin', filters: ['team'] }, 'filters'],
      ];
      for (const [req, field] of cases) {
        expect(await domainError(kb.retrieve(CALL, { kb_id: 'zoo', ...req } as never))).toEqual({
          code: 'invalid_argument',
          field,
        });
      }
      expect(await kb.retrieve(CALL, { kb_id: 'zoo', query_text: 'penguin', top_k: 50 })).toHaveLength(3);
      expect(await domainError(kb.retrieve(CALL, { kb_id: 'gone', query_text: 'penguin' }))).toEqual({
        code: 'not_found',
      });
    });

    it('finds non-ASCII words case-insensitively', async () => {
      await kb.addDocument('zoo', { name: 'de', content_type: 'text/plain', content: 'Grüße aus KÖLN und Zürich.' });
      expect(names(await kb.search('zoo', { query_text: 'köln' }))).toEqual(['de']);
      expect(names(await kb.search('zoo', { query_text: 'GRÜSSE grüße' }))).toEqual(['de']);
    });
  });
});
