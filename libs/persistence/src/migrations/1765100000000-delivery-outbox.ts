import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The delivery outbox (issue 10): every delivery op of a run, in order — the SSE of a run's
 * deliveries reads it, the webhook worker pushes from it. `webhook_state` is `none` (no webhook),
 * `pending`, `delivered` or `failed`; the partial index keeps the worker's "head op of each run
 * still pending" lookup cheap however large the delivered history grows.
 */
export class DeliveryOutbox1765100000000 implements MigrationInterface {
  name = 'DeliveryOutbox1765100000000';

  async up(q: QueryRunner): Promise<void> {
    const pg = q.connection.options.type === 'postgres';
    const serial = pg ? 'SERIAL PRIMARY KEY' : 'INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT';
    for (const sql of [
      `CREATE TABLE "delivery_outbox" (
        "id" ${serial},
        "delivery_id" VARCHAR(64) NOT NULL,
        "run_id" VARCHAR(64) NOT NULL,
        "agent_id" VARCHAR(128) NOT NULL,
        "sequence" INTEGER NOT NULL,
        "op" VARCHAR(32) NOT NULL,
        "idempotency_key" VARCHAR(128) NOT NULL,
        "reply_target" TEXT NULL,
        "target_delivery_id" VARCHAR(64) NULL,
        "result_sequence" INTEGER NULL,
        "payload" TEXT NOT NULL,
        "created_at" BIGINT NOT NULL,
        "webhook_url" VARCHAR(2000) NULL,
        "webhook_secret_env" VARCHAR(128) NULL,
        "webhook_state" VARCHAR(16) NOT NULL,
        "attempts" INTEGER NOT NULL DEFAULT 0,
        "next_attempt_at" BIGINT NULL,
        "last_error" TEXT NULL,
        "delivered_at" BIGINT NULL)`,
      `CREATE UNIQUE INDEX "uq_delivery_outbox_id" ON "delivery_outbox" ("delivery_id")`,
      `CREATE UNIQUE INDEX "uq_delivery_outbox_run_seq" ON "delivery_outbox" ("run_id", "sequence")`,
      `CREATE INDEX "idx_delivery_outbox_pending" ON "delivery_outbox" ("run_id", "sequence") WHERE "webhook_state" = 'pending'`,
      `CREATE INDEX "idx_delivery_outbox_failed" ON "delivery_outbox" ("id") WHERE "webhook_state" = 'failed'`,
    ]) {
      await q.query(sql);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "delivery_outbox"`);
  }
}
