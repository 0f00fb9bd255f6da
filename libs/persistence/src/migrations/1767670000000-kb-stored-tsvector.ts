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
 * (FTS5 keeps its own index). The column's expression is also recorded in TypeORM's
 * `typeorm_metadata` table (created here when absent, dropped by `down` when left empty).
 */
const EXPRESSION = `to_tsvector('english', "content")`;

export class KbStoredTsvector1767670000000 implements MigrationInterface {
  name = 'KbStoredTsvector1767670000000';

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.options.type !== 'postgres') {
      return;
    }
    await q.query(
      `ALTER TABLE "kb_chunks" ADD COLUMN "content_tsv" tsvector GENERATED ALWAYS AS (${EXPRESSION}) STORED`,
    );
    await q.query(`CREATE INDEX "idx_kb_chunks_tsv" ON "kb_chunks" USING GIN ("content_tsv")`);
    await q.query(`DROP INDEX "idx_kb_chunks_fts"`);
    // TypeORM reads a generated column's expression from its `typeorm_metadata` table when it loads
    // the table's shape (schema builder, migration tooling) and fails without the table: the row
    // TypeORM itself writes for a generated column it creates.
    await q.query(`CREATE TABLE IF NOT EXISTS "typeorm_metadata" ("type" varchar NOT NULL, "database" varchar,
      "schema" varchar, "table" varchar, "name" varchar, "value" text)`);
    await q.query(
      `INSERT INTO "typeorm_metadata" ("type", "database", "schema", "table", "name", "value")
       VALUES ('GENERATED_COLUMN', current_database(), current_schema(), 'kb_chunks', 'content_tsv', $1)`,
      [EXPRESSION],
    );
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.options.type !== 'postgres') {
      return;
    }
    await q.query(`CREATE INDEX "idx_kb_chunks_fts" ON "kb_chunks" USING GIN (to_tsvector('english', "content"))`);
    await q.query(`DROP INDEX "idx_kb_chunks_tsv"`);
    await q.query(`ALTER TABLE "kb_chunks" DROP COLUMN "content_tsv"`);
    await q.query(
      `DELETE FROM "typeorm_metadata" WHERE "type" = 'GENERATED_COLUMN' AND "table" = 'kb_chunks' AND "name" = 'content_tsv'`,
    );
    const [left] = (await q.query(`SELECT count(*) AS "n" FROM "typeorm_metadata"`)) as Array<{ n: string }>;
    if (Number(left.n) === 0) {
      await q.query(`DROP TABLE "typeorm_metadata"`);
    }
  }
}
