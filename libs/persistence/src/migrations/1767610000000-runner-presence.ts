import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Runner presence (docs/scale-out.md#runner-presence): which live host process holds a Connect
 * stream of which runner, so that a run admitted at one process is dispatched by the process
 * holding its runner. One row per (runner, process): written when a plugin's session attaches,
 * deleted when it detaches, with its process at a clean stop, and by the sweep that declares the
 * process dead; a row of a process that has no `host_processes` row is ignored by every read (the
 * reads join on the live processes). Same SQL on both dialects.
 */
export class RunnerPresence1767610000000 implements MigrationInterface {
  name = 'RunnerPresence1767610000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE "runner_presence" (
      "runner_id" VARCHAR(255) NOT NULL,
      "process_id" VARCHAR(64) NOT NULL,
      "plugin_id" VARCHAR(255) NOT NULL,
      "session_id" VARCHAR(64) NOT NULL,
      "connected_at" BIGINT NOT NULL,
      PRIMARY KEY ("runner_id", "process_id"))`);
    await q.query(`CREATE INDEX "idx_runner_presence_process" ON "runner_presence" ("process_id")`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "idx_runner_presence_process"`);
    await q.query(`DROP TABLE "runner_presence"`);
  }
}
