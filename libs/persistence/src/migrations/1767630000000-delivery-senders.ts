import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The webhook outbox lease (docs/scale-out.md#webhook-outbox-lease): one row per run whose
 * webhook ops a process is sending — the run's sender. A lease is held while the sender's
 * `host_processes` row exists (renewed with the process heartbeat, in bulk; the deleted row is the
 * death certificate), so a row here needs no expiry of its own. One row per run, not columns on
 * `delivery_outbox`: ops appended to a run after it was claimed are covered by the same lease, and
 * handing a run over is one row. No foreign keys (runs and process rows are deleted on their own
 * schedules); the index serves "every lease of this process" (release at shutdown, the cleanup).
 * Same SQL on both dialects.
 */
export class DeliverySenders1767630000000 implements MigrationInterface {
  name = 'DeliverySenders1767630000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE "delivery_senders" (
      "run_id" VARCHAR(64) PRIMARY KEY NOT NULL,
      "process_id" VARCHAR(64) NOT NULL,
      "claimed_at" BIGINT NOT NULL)`);
    await q.query(`CREATE INDEX "idx_delivery_senders_process" ON "delivery_senders" ("process_id")`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "delivery_senders"`);
  }
}
