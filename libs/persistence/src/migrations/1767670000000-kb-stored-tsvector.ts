import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * PostgreSQL knowledge search on a stored tsvector (docs/models-tools-knowledge.md#searching): a
 * generated column `content_tsv` = `to_tsvector('english', "content")` (the configuration is the
 * same for every chunk: migration KbStemming) with a GIN index on it replaces the GIN expression
 * index, so a search ranks each matching chunk on its stored vector instead of parsing its text
 * again. Existing rows are filled by the ADD COLUMN itself.
 *
 * Cost on a big table: ADD COLUMN ... STORED rewrites `kb_chunks` (every row's vector is computed,
 * as the expression index did at its build) under an ACCESS EXCLUSIVE lock — reads and writes of
 * knowledge wait for the whole migration, which runs at boot before the host serves; the GIN build
 * reads the vectors again. The table grows by the vectors (about the text's size). `down` drops the
 * column (no rewrite) and builds the expression index again (parses every chunk). SQLite: nothing
 * (FTS5 keeps its own index).
 */
export class KbStoredTsvector1767670000000 implements MigrationInterface {
  name = 'KbStoredTsvector1767670000000';

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.options.type !== 'postgres') {
      return;
    }
    await q.query(
      `ALTER TABLE "kb_chunks" ADD COLUMN "content_tsv" tsvector GENERATED ALWAYS AS (to_tsvector('english', "content")) STORED`,
    );
    await q.query(`CREATE INDEX "idx_kb_chunks_tsv" ON "kb_chunks" USING GIN ("content_tsv")`);
    await q.query(`DROP INDEX "idx_kb_chunks_fts"`);
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.options.type !== 'postgres') {
      return;
    }
    await q.query(`CREATE INDEX "idx_kb_chunks_fts" ON "kb_chunks" USING GIN (to_tsvector('english', "content"))`);
    await q.query(`DROP INDEX "idx_kb_chunks_tsv"`);
    await q.query(`ALTER TABLE "kb_chunks" DROP COLUMN "content_tsv"`);
  }
}
