/**
 * Transcript full-text indexing off the admission commit (docs/durability.md#transcript-search),
 * SQLite only: the FTS5 index over `transcript.content` is no longer written by a trigger in every
 * commit that appends a transcript row (each such commit wrote a new FTS segment). Rows are indexed
 * in id order up to a watermark (`fts_watermarks`): in the background about once a second, many
 * rows per statement, and always before a search — which therefore sees every row committed before
 * it, as with the trigger. PostgreSQL keeps its expression GIN index (its pending list already
 * defers the index work). Rows are appended only (ids `max + 1`, in commit order: one writer; a
 * delete of the newest rows lowers the watermark with them, migration RowidIds1767700000000).
 */
import { stmt } from './hot-sql';
import { exec, one, type Unit } from './unit';

export const TRANSCRIPT_INDEX_SQL = {
  /** The last indexed id and the last id. */
  pending: stmt(
    'fts_pending',
    `SELECT w."indexed_id" AS "indexed", (SELECT MAX("id") FROM "transcript") AS "last"
     FROM "fts_watermarks" AS w WHERE w."name" = 'transcript'`,
  ),
  index: stmt(
    'fts_index',
    `INSERT INTO "transcript_fts"(rowid, content) SELECT "id", "content" FROM "transcript" WHERE "id" > ? AND "id" <= ? ORDER BY "id"`,
  ),
  advance: stmt('fts_advance', `UPDATE "fts_watermarks" SET "indexed_id" = ? WHERE "name" = 'transcript'`),
} as const;

/** Rows appended since the last indexing: [indexed up to, last id]; null when none. */
export function* pendingTranscriptUnit(): Unit<[number, number] | null> {
  const r = yield* one<{ indexed: number | null; last: number | null }>(TRANSCRIPT_INDEX_SQL.pending, []);
  const indexed = Number(r?.indexed ?? 0);
  const last = Number(r?.last ?? 0);
  return last > indexed ? [indexed, last] : null;
}

/** Indexes up to `maxRows` rows appended since the last indexing, in one statement; how many. */
export function* indexTranscriptUnit(maxRows = Number.MAX_SAFE_INTEGER): Unit<number> {
  const pending = yield* pendingTranscriptUnit();
  if (!pending) {
    return 0;
  }
  const [from, last] = pending;
  const to = Math.min(last, from + maxRows);
  yield* exec(TRANSCRIPT_INDEX_SQL.index, [from, to]);
  yield* exec(TRANSCRIPT_INDEX_SQL.advance, [to]);
  return to - from;
}
