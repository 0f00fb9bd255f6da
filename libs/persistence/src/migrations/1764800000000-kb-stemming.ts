import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Knowledge search with stemming ("erupt" finds "erupts"): the chunk index is rebuilt with the
 * stemming tokenizer each database ships — FTS5 `porter` over `unicode61` on SQLite, the `english`
 * text search configuration on PostgreSQL (was `simple`). Existing chunks are indexed again here.
 * `down` restores the unstemmed index.
 */
export class KbStemming1764800000000 implements MigrationInterface {
  name = 'KbStemming1764800000000';

  async up(q: QueryRunner): Promise<void> {
    await rebuild(q, { pg: 'english', sqlite: `, tokenize='porter unicode61'` });
  }

  async down(q: QueryRunner): Promise<void> {
    await rebuild(q, { pg: 'simple', sqlite: '' });
  }
}

async function rebuild(q: QueryRunner, with_: { pg: string; sqlite: string }): Promise<void> {
  if (q.connection.options.type === 'postgres') {
    // Building the expression index reads every existing chunk.
    await q.query(`DROP INDEX "idx_kb_chunks_fts"`);
    await q.query(`CREATE INDEX "idx_kb_chunks_fts" ON "kb_chunks" USING GIN (to_tsvector('${with_.pg}', "content"))`);
    return;
  }
  for (const sql of [
    `DROP TRIGGER "kb_chunks_fts_ad"`,
    `DROP TRIGGER "kb_chunks_fts_ai"`,
    `DROP TABLE "kb_chunks_fts"`,
    `CREATE VIRTUAL TABLE "kb_chunks_fts" USING fts5(content, content='kb_chunks', content_rowid='id'${with_.sqlite})`,
    `CREATE TRIGGER "kb_chunks_fts_ai" AFTER INSERT ON "kb_chunks" BEGIN
       INSERT INTO "kb_chunks_fts"(rowid, content) VALUES (new.id, new.content); END`,
    `CREATE TRIGGER "kb_chunks_fts_ad" AFTER DELETE ON "kb_chunks" BEGIN
       INSERT INTO "kb_chunks_fts"("kb_chunks_fts", rowid, content) VALUES ('delete', old.id, old.content); END`,
    // An external-content FTS5 table is filled from its content table by 'rebuild'.
    `INSERT INTO "kb_chunks_fts"("kb_chunks_fts") VALUES ('rebuild')`,
  ]) {
    await q.query(sql);
  }
}
