import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Indexes for the retention job (libs/persistence/src/retention): each batch takes the oldest
 * rows by `created_at`, a range scan instead of a scan of the whole table.
 */
export class RetentionIndexes1765400000000 implements MigrationInterface {
  name = 'RetentionIndexes1765400000000';

  async up(q: QueryRunner): Promise<void> {
    for (const sql of [
      `CREATE INDEX "idx_delivery_outbox_created" ON "delivery_outbox" ("created_at")`,
      `CREATE INDEX "idx_run_results_created" ON "run_results" ("created_at")`,
      `CREATE INDEX "idx_event_log_created" ON "event_log" ("created_at")`,
    ]) {
      await q.query(sql);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const name of ['idx_event_log_created', 'idx_run_results_created', 'idx_delivery_outbox_created']) {
      await q.query(`DROP INDEX "${name}"`);
    }
  }
}
