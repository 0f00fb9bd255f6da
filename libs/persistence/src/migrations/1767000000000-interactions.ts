import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Structured interactions (docs/interactions.md): one row per request a run made, the hash of its
 * one-time callback token (unique), its expiry and outcome. The (status, expires_at) index keeps
 * the expiry sweep bounded. Same SQL on both dialects.
 */
export class Interactions1767000000000 implements MigrationInterface {
  name = 'Interactions1767000000000';

  async up(q: QueryRunner): Promise<void> {
    for (const sql of [
      `CREATE TABLE "interactions" (
        "id" VARCHAR(64) NOT NULL PRIMARY KEY,
        "interaction_id" VARCHAR(255) NOT NULL,
        "run_id" VARCHAR(64) NOT NULL,
        "agent_id" VARCHAR(128) NOT NULL,
        "runner_id" VARCHAR(200) NOT NULL,
        "conversation_id" VARCHAR(255) NULL,
        "thread_id" VARCHAR(255) NULL,
        "actor_id" VARCHAR(255) NULL,
        "kind" VARCHAR(16) NOT NULL,
        "status" VARCHAR(16) NOT NULL,
        "status_reason" VARCHAR(1000) NULL,
        "request" TEXT NOT NULL,
        "delivery_target" TEXT NOT NULL,
        "callback_token_hash" VARCHAR(64) NOT NULL,
        "replaces_id" VARCHAR(64) NULL,
        "expires_at" BIGINT NOT NULL,
        "submission" TEXT NULL,
        "submitted_at" BIGINT NULL,
        "submission_event_id" VARCHAR(255) NULL,
        "created_at" BIGINT NOT NULL,
        "updated_at" BIGINT NOT NULL)`,
      `CREATE UNIQUE INDEX "uq_interactions_run_interaction" ON "interactions" ("run_id", "interaction_id")`,
      `CREATE UNIQUE INDEX "uq_interactions_token" ON "interactions" ("callback_token_hash")`,
      `CREATE INDEX "idx_interactions_status_expiry" ON "interactions" ("status", "expires_at")`,
    ]) {
      await q.query(sql);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "interactions"`);
  }
}
