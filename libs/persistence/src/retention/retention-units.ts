/**
 * Batched deletes of old rows (docs/durability.md, "Retention"), SQL of both dialects. Each unit
 * deletes at most `limit` rows, oldest first, so one batch is one short transaction on the one
 * writer — never a huge DELETE holding it. The `created_at` indexes of the retention migration
 * keep each batch a range scan. Each unit keeps its table's newest row (`keepsNewest`): SQLite
 * gives these tables' ids as `max(id) + 1` (no AUTOINCREMENT, docs/durability.md "Row ids"), so
 * the largest id must never be deleted for an id never to be given twice.
 */
import { stmt } from '../hot/hot-sql';
import { exec, type Unit } from '../hot/unit';

/** A run that ended before the cutoff (no row of a run still going is ever deleted). */
const RUN_ENDED_BEFORE = `EXISTS (SELECT 1 FROM "runs" AS r WHERE r."run_id" = x."run_id" AND r."finished_at" IS NOT NULL AND r."finished_at" < ?)`;

/** Never the table's newest row (its id is the high-water mark new ids start above). */
const keepsNewest = (table: string): string => `x."id" < (SELECT MAX("id") FROM "${table}")`;

export const RETENTION_SQL = {
  /**
   * Settled delivery ops: delivered to their webhook, or never meant for one (`none`). Pending
   * ops (the outbox is the webhook queue) and failed ones (listed for the admin) are kept.
   */
  deliveredOps: stmt(
    'retention_delivered_ops',
    `DELETE FROM "delivery_outbox" WHERE "id" IN (
       SELECT x."id" FROM "delivery_outbox" AS x
       WHERE x."created_at" < ? AND x."webhook_state" IN ('delivered', 'none') AND ${RUN_ENDED_BEFORE}
         AND ${keepsNewest('delivery_outbox')}
       ORDER BY x."created_at" ASC LIMIT ?)`,
  ),
  /** Results of runs that ended before the cutoff (the run row and its status stay). */
  results: stmt(
    'retention_results',
    `DELETE FROM "run_results" WHERE "id" IN (
       SELECT x."id" FROM "run_results" AS x
       WHERE x."created_at" < ? AND ${RUN_ENDED_BEFORE} AND ${keepsNewest('run_results')}
       ORDER BY x."created_at" ASC LIMIT ?)`,
  ),
  /** Event-log rows (the conversation's event history runners page through) older than the cutoff. */
  eventLog: stmt(
    'retention_event_log',
    `DELETE FROM "event_log" WHERE "id" IN (
       SELECT x."id" FROM "event_log" AS x WHERE x."created_at" < ? AND ${keepsNewest('event_log')} ORDER BY x."created_at" ASC LIMIT ?)`,
  ),
} as const;

export type RetentionTable = 'delivered_ops' | 'results' | 'event_log';

/** Deletes up to `limit` rows of `table` older than `cutoff`; returns how many it deleted. */
export function* retentionBatchUnit(table: RetentionTable, cutoff: number, limit: number): Unit<number> {
  switch (table) {
    case 'delivered_ops':
      return yield* exec(RETENTION_SQL.deliveredOps, [cutoff, cutoff, limit]);
    case 'results':
      return yield* exec(RETENTION_SQL.results, [cutoff, cutoff, limit]);
    case 'event_log':
      return yield* exec(RETENTION_SQL.eventLog, [cutoff, limit]);
  }
}
