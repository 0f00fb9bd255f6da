import type { MigrationInterface, QueryRunner } from 'typeorm';
import { rebuildSqliteTable } from './sqlite-rebuild';

/** The five tables the run path appends to, each with `INTEGER PRIMARY KEY AUTOINCREMENT` until now. */
export const ROWID_ID_TABLES = ['runs', 'run_results', 'transcript', 'event_log', 'delivery_outbox'] as const;

const AUTOINCREMENT = '"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT';
const WATERMARK = `(SELECT "indexed_id" FROM "fts_watermarks" WHERE "name" = 'transcript')`;
const LAST_ID = `COALESCE((SELECT MAX("id") FROM "transcript"), 0)`;
/** The FTS delete trigger before this migration (TranscriptIndexDeferred1767410000000). */
const OLD_DELETE_TRIGGER = `CREATE TRIGGER "transcript_fts_ad" AFTER DELETE ON "transcript" WHEN old.id <= ${WATERMARK} BEGIN
  INSERT INTO "transcript_fts"("transcript_fts", rowid, content) VALUES ('delete', old.id, old.content); END`;
/**
 * The FTS delete trigger with ids that can come again: an indexed row leaves the index, and the
 * watermark never stays above the table's largest id, so an id given again after the newest rows
 * were deleted is above the watermark and gets indexed (hot/transcript-index.ts). One trigger, the
 * index delete first: it must compare with the watermark before the watermark moves.
 */
const DELETE_TRIGGER = `CREATE TRIGGER "transcript_fts_ad" AFTER DELETE ON "transcript" BEGIN
  INSERT INTO "transcript_fts"("transcript_fts", rowid, content) SELECT 'delete', old.id, old.content WHERE old.id <= ${WATERMARK};
  UPDATE "fts_watermarks" SET "indexed_id" = ${LAST_ID} WHERE "name" = 'transcript' AND "indexed_id" > ${LAST_ID}; END`;
const ROWID = '"id" INTEGER NOT NULL PRIMARY KEY';

/**
 * SQLite: the run path's five tables keep their ids without `AUTOINCREMENT` (docs/durability.md,
 * "Row ids"; docs/benchmarks.md, "Fewer SQLite B-trees written per run"). With `AUTOINCREMENT`
 * every commit that inserts into one of them rewrites `sqlite_sequence` (one WAL frame per commit,
 * two pwrite64); without it SQLite gives `max(id) + 1`, so an id can come again only if the row
 * holding the largest id is deleted. Why no reader can see an id given twice:
 * - `runs` and `transcript`: no path deletes a row (the largest id never goes).
 * - `run_results`, `event_log`, `delivery_outbox`: only retention deletes (retention-units.ts),
 *   and it now keeps each table's newest row (`"id" < MAX("id")`), so the largest id ever
 *   committed stays and every new id is above every id ever given. A rolled-back insert's id was
 *   never seen by anyone (and `AUTOINCREMENT` rolled back `sqlite_sequence` with it).
 * - The one id range the migration itself can give again: ids above a table's largest surviving
 *   id that retention had already deleted (the table's newest rows were older than the retention
 *   horizon). Their readers: `run_results.id` has none (results are read by run and sequence);
 *   `delivery_outbox.id` is the cursor of the failed-op list only, and failed ops are never
 *   deleted, so a failed-list cursor is at most the largest surviving id; `event_log.id` (the
 *   EventPage cursor) — a cursor naming a row retention deleted is older than the horizon, and
 *   its page (rows below it) was deleted already; new rows of its conversation may appear below it
 *   once. docs/durability.md states this.
 * The rebuild copies every row with its id (the transcript's FTS rows keep their rowids) and
 * recreates each table's indexes and triggers from their stored SQL. PostgreSQL: nothing (SERIAL
 * sequences never give an id twice and cost no page of their own). `down` puts `AUTOINCREMENT`
 * back; SQLite sets `sqlite_sequence` to each table's largest copied id.
 */
export class RowidIds1767700000000 implements MigrationInterface {
  name = 'RowidIds1767700000000';

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === 'postgres') {
      return;
    }
    for (const table of ROWID_ID_TABLES) {
      await rebuildSqliteTable(q, table, (sql) => sql.replace(AUTOINCREMENT, ROWID));
    }
    await q.query(`DROP TRIGGER "transcript_fts_ad"`);
    await q.query(DELETE_TRIGGER);
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === 'postgres') {
      return;
    }
    await q.query(`DROP TRIGGER "transcript_fts_ad"`);
    await q.query(OLD_DELETE_TRIGGER);
    for (const table of ROWID_ID_TABLES) {
      await rebuildSqliteTable(q, table, (sql) => sql.replace(ROWID, AUTOINCREMENT));
    }
  }
}
