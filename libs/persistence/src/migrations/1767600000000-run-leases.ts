import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Run leases and fencing (docs/scale-out.md#leases-and-fencing): a running run's owner process
 * (a `host_processes.id`, no foreign key: the row is deleted when the process is declared dead),
 * its attempt (bumped by every claim and every takeover: the fence token) and the time of its last
 * fenced write. The index serves the dead-owner sweep. `cancel_requested_at` exists already
 * (initial schema). Same SQL on both dialects.
 */
export class RunLeases1767600000000 implements MigrationInterface {
  name = 'RunLeases1767600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "runs" ADD COLUMN "owner_process_id" VARCHAR(64) NULL`);
    await q.query(`ALTER TABLE "runs" ADD COLUMN "attempt" INTEGER NOT NULL DEFAULT 0`);
    await q.query(`ALTER TABLE "runs" ADD COLUMN "last_write_at" BIGINT NULL`);
    await q.query(`CREATE INDEX "idx_runs_owner_process" ON "runs" ("owner_process_id")`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "idx_runs_owner_process"`);
    await q.query(`ALTER TABLE "runs" DROP COLUMN "last_write_at"`);
    await q.query(`ALTER TABLE "runs" DROP COLUMN "attempt"`);
    await q.query(`ALTER TABLE "runs" DROP COLUMN "owner_process_id"`);
  }
}
