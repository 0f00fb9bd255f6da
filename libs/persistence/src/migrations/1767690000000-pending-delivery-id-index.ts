import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The outbox's `delivery_id` index over pending webhook ops only (docs/benchmarks.md, "Fewer SQLite
 * pages per commit"). A delivery id is a hash of the op's run and sequence (`deliveryId`,
 * libs/delivery/src/ops.ts), so every op landed on a random page of the full unique index: one
 * page more written per op of every run, webhook or not. Its only readers are the webhook
 * worker's updates (`OUTBOX_SQL.delivered`, `retry`, `failed`: `WHERE "delivery_id" = ? AND
 * "webhook_state" = 'pending'`), which the partial index serves as before. The id stays unique:
 * `uq_delivery_outbox_run_seq` keeps (run, sequence) unique, of which the id is a hash; the
 * partial index is unique too. Same SQL on both dialects; `down` builds the full index again.
 */
export class PendingDeliveryIdIndex1767690000000 implements MigrationInterface {
  name = 'PendingDeliveryIdIndex1767690000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE UNIQUE INDEX "uq_delivery_outbox_pending_id" ON "delivery_outbox" ("delivery_id") WHERE "webhook_state" = 'pending'`,
    );
    await q.query(`DROP INDEX "uq_delivery_outbox_id"`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`CREATE UNIQUE INDEX "uq_delivery_outbox_id" ON "delivery_outbox" ("delivery_id")`);
    await q.query(`DROP INDEX "uq_delivery_outbox_pending_id"`);
  }
}
