import type { MigrationInterface, QueryRunner } from 'typeorm';

const SAME_CONVERSATION = `o."agent_id" = r."agent_id" AND o."conversation_id" = r."conversation_id"
  AND COALESCE(o."thread_id", '') = COALESCE(r."thread_id", '')`;
/** Runs that would break "one running run per conversation": all but the newest of each conversation. */
const EXTRA_RUNNING = `r."status" = 'running' AND r."conversation_id" IS NOT NULL AND EXISTS (
  SELECT 1 FROM "runs" o WHERE o."status" = 'running' AND ${SAME_CONVERSATION} AND o."id" > r."id")`;

/**
 * Conversations, concurrency and steering (docs/conversations-and-steering.md):
 * - at most one `running` run per conversation (agent + conversation_id + thread_id), enforced
 *   by a unique partial index, so it holds across concurrent admissions and host processes;
 * - `steering_items`: every follow-up that did not start a run at once — steered into an active
 *   run (kind `steer`, with its position) or waiting to run (kind `queue`) — durable before the
 *   caller is answered, with its transitions' timestamps.
 * Runs a previous version left running twice in one conversation cannot stay so: the older ones
 * are finalised `interrupted` here, with their terminal result, as boot recovery would.
 */
export class ConversationSteering1765000000000 implements MigrationInterface {
  name = 'ConversationSteering1765000000000';

  async up(q: QueryRunner): Promise<void> {
    const pg = q.connection.options.type === 'postgres';
    const serial = pg ? 'SERIAL PRIMARY KEY' : 'INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT';
    const now = Date.now();
    const verdict = JSON.stringify({
      error: 'the host stopped while the run was active',
      code: 'host.interrupted',
      retryable: true,
    });
    const statements = [
      `INSERT INTO "run_results" ("run_id", "sequence", "type", "data", "usage", "source", "timestamp", "created_at")
       SELECT r."run_id", COALESCE((SELECT MAX(x."sequence") FROM "run_results" x WHERE x."run_id" = r."run_id"), 0) + 1,
         'run.failed', '${verdict}', NULL, 'host', ${Math.floor(now / 1000)}, ${now}
       FROM "runs" r WHERE ${EXTRA_RUNNING}`,
      `UPDATE "runs" SET "status" = 'interrupted', "status_reason" = 'the host stopped while the run was active',
         "error_code" = 'host.interrupted', "retryable" = ${pg ? 'TRUE' : '1'}, "finished_at" = ${now}
       WHERE "id" IN (SELECT r."id" FROM "runs" r WHERE ${EXTRA_RUNNING})`,
      `CREATE UNIQUE INDEX "uq_runs_running_conversation" ON "runs" ("agent_id", "conversation_id", (COALESCE("thread_id", '')))
       WHERE "status" = 'running' AND "conversation_id" IS NOT NULL`,
      `CREATE TABLE "steering_items" (
        "id" ${serial},
        "conversation_key" VARCHAR(800) NOT NULL,
        "agent_id" VARCHAR(128) NOT NULL,
        "runner_id" VARCHAR(200) NOT NULL,
        "conversation_id" VARCHAR(255) NOT NULL,
        "thread_id" VARCHAR(255) NULL,
        "event_id" VARCHAR(255) NOT NULL UNIQUE,
        "kind" VARCHAR(16) NOT NULL,
        "state" VARCHAR(16) NOT NULL,
        "run_id" VARCHAR(64) NULL,
        "position" INTEGER NULL,
        "next_run_id" VARCHAR(64) NULL,
        "dispatch" VARCHAR(16) NULL,
        "item" TEXT NOT NULL,
        "submission" TEXT NOT NULL,
        "pull_mode" VARCHAR(16) NULL,
        "created_at" BIGINT NOT NULL,
        "injected_at" BIGINT NULL,
        "dropped_at" BIGINT NULL,
        "redispatched_at" BIGINT NULL,
        "started_at" BIGINT NULL)`,
      `CREATE INDEX "idx_steering_items_run" ON "steering_items" ("run_id", "state", "position")`,
      `CREATE INDEX "idx_steering_items_waiting" ON "steering_items" ("conversation_key", "dispatch", "id")`,
      `CREATE INDEX "idx_steering_items_dispatch" ON "steering_items" ("dispatch")`,
    ];
    for (const sql of statements) {
      await q.query(sql);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "steering_items"`);
    await q.query(`DROP INDEX "uq_runs_running_conversation"`);
  }
}
