import type { MigrationInterface, QueryRunner } from 'typeorm';

const DELETE_TRIGGER = `CREATE TRIGGER "transcript_fts_ad" AFTER DELETE ON "transcript" BEGIN
  INSERT INTO "transcript_fts"("transcript_fts", rowid, content) VALUES ('delete', old.id, old.content); END`;

/**
 * Transcript full-text indexing off the admission commit (hot/transcript-index.ts,
 * docs/durability.md#transcript-search). SQLite: the insert trigger of `transcript_fts` goes; a
 * watermark (`fts_watermarks`) says which rows are indexed — every existing row is; the delete
 * trigger removes only indexed rows from the index. PostgreSQL: nothing changes (its expression
 * GIN index stays). `down` indexes the pending rows and puts the trigger back.
 */
export class TranscriptIndexDeferred1767410000000 implements MigrationInterface {
  name = 'TranscriptIndexDeferred1767410000000';

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === 'postgres') {
      return;
    }
    await q.query(
      `CREATE TABLE "fts_watermarks" ("name" VARCHAR(64) PRIMARY KEY NOT NULL, "indexed_id" INTEGER NOT NULL)`,
    );
    await q.query(
      `INSERT INTO "fts_watermarks" ("name", "indexed_id") VALUES ('transcript', COALESCE((SELECT MAX("id") FROM "transcript"), 0))`,
    );
    await q.query(`DROP TRIGGER "transcript_fts_ai"`);
    await q.query(`DROP TRIGGER "transcript_fts_ad"`);
    await q.query(
      DELETE_TRIGGER.replace(
        'BEGIN',
        `WHEN old.id <= (SELECT "indexed_id" FROM "fts_watermarks" WHERE "name" = 'transcript') BEGIN`,
      ),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === 'postgres') {
      return;
    }
    await q.query(
      `INSERT INTO "transcript_fts"(rowid, content) SELECT "id", "content" FROM "transcript"
       WHERE "id" > (SELECT "indexed_id" FROM "fts_watermarks" WHERE "name" = 'transcript') ORDER BY "id"`,
    );
    await q.query(`DROP TRIGGER "transcript_fts_ad"`);
    await q.query(DELETE_TRIGGER);
    await q.query(`CREATE TRIGGER "transcript_fts_ai" AFTER INSERT ON "transcript" BEGIN
      INSERT INTO "transcript_fts"(rowid, content) VALUES (new.id, new.content); END`);
    await q.query(`DROP TABLE "fts_watermarks"`);
  }
}
