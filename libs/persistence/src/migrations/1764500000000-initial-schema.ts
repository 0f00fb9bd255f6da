import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Foundation schema: keys, plugins, runners, agents, events, runs and run results. */
export class InitialSchema1764500000000 implements MigrationInterface {
  name = 'InitialSchema1764500000000';

  async up(q: QueryRunner): Promise<void> {
    const pg = q.connection.options.type === 'postgres';
    const serial = pg ? 'SERIAL PRIMARY KEY' : 'INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT';
    const statements = [
      `CREATE TABLE "api_keys" (
        "id" VARCHAR(64) NOT NULL PRIMARY KEY,
        "name" VARCHAR(200) NOT NULL,
        "role" VARCHAR(16) NOT NULL,
        "key_hash" VARCHAR(64) NOT NULL UNIQUE,
        "key_prefix" VARCHAR(16) NOT NULL,
        "created_at" BIGINT NOT NULL,
        "revoked_at" BIGINT NULL)`,
      `CREATE TABLE "plugins" (
        "plugin_id" VARCHAR(130) NOT NULL PRIMARY KEY,
        "author" VARCHAR(64) NOT NULL,
        "name" VARCHAR(64) NOT NULL,
        "token_hash" VARCHAR(64) NOT NULL UNIQUE,
        "token_prefix" VARCHAR(16) NOT NULL,
        "created_at" BIGINT NOT NULL,
        "token_issued_at" BIGINT NOT NULL)`,
      `CREATE TABLE "runners" (
        "runner_id" VARCHAR(200) NOT NULL PRIMARY KEY,
        "plugin_id" VARCHAR(130) NOT NULL,
        "name" VARCHAR(64) NOT NULL,
        "manifest" TEXT NOT NULL,
        "last_seen_at" BIGINT NOT NULL)`,
      `CREATE TABLE "agents" (
        "agent_id" VARCHAR(128) NOT NULL PRIMARY KEY,
        "runner_id" VARCHAR(200) NOT NULL,
        "description" VARCHAR(1000) NOT NULL DEFAULT '',
        "runner_config" TEXT NOT NULL,
        "resource_policy" TEXT NOT NULL,
        "state_policy" TEXT NOT NULL,
        "delivery_policy" TEXT NOT NULL,
        "concurrency_policy" TEXT NOT NULL,
        "version" INTEGER NOT NULL DEFAULT 1,
        "created_at" BIGINT NOT NULL,
        "updated_at" BIGINT NOT NULL)`,
      `CREATE TABLE "events" (
        "event_id" VARCHAR(255) NOT NULL PRIMARY KEY,
        "agent_id" VARCHAR(128) NOT NULL,
        "event_type" VARCHAR(128) NOT NULL,
        "conversation_id" VARCHAR(255) NULL,
        "thread_id" VARCHAR(255) NULL,
        "idempotency_key" VARCHAR(255) NULL UNIQUE,
        "body_hash" VARCHAR(64) NOT NULL,
        "payload" TEXT NOT NULL,
        "disposition" VARCHAR(32) NOT NULL,
        "run_id" VARCHAR(64) NULL,
        "received_at" BIGINT NOT NULL)`,
      `CREATE INDEX "idx_events_conversation" ON "events" ("conversation_id", "received_at")`,
      `CREATE TABLE "runs" (
        "id" ${serial},
        "run_id" VARCHAR(64) NOT NULL UNIQUE,
        "event_id" VARCHAR(255) NOT NULL,
        "agent_id" VARCHAR(128) NOT NULL,
        "runner_id" VARCHAR(200) NOT NULL,
        "conversation_id" VARCHAR(255) NULL,
        "thread_id" VARCHAR(255) NULL,
        "status" VARCHAR(16) NOT NULL,
        "status_reason" TEXT NULL,
        "error_code" VARCHAR(64) NULL,
        "retryable" BOOLEAN NULL,
        "context" TEXT NOT NULL,
        "usage" TEXT NULL,
        "created_at" BIGINT NOT NULL,
        "started_at" BIGINT NULL,
        "finished_at" BIGINT NULL,
        "deadline_at" BIGINT NULL,
        "cancel_requested_at" BIGINT NULL)`,
      `CREATE INDEX "idx_runs_conversation_status" ON "runs" ("conversation_id", "status")`,
      `CREATE INDEX "idx_runs_status" ON "runs" ("status")`,
      `CREATE TABLE "run_results" (
        "id" ${serial},
        "run_id" VARCHAR(64) NOT NULL,
        "sequence" INTEGER NOT NULL,
        "type" VARCHAR(128) NOT NULL,
        "data" TEXT NOT NULL,
        "usage" TEXT NULL,
        "source" VARCHAR(16) NOT NULL,
        "timestamp" BIGINT NULL,
        "created_at" BIGINT NOT NULL)`,
      `CREATE UNIQUE INDEX "uq_run_results_run_sequence" ON "run_results" ("run_id", "sequence")`,
    ];
    for (const sql of statements) {
      await q.query(sql);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of ['run_results', 'runs', 'events', 'agents', 'runners', 'plugins', 'api_keys']) {
      await q.query(`DROP TABLE "${table}"`);
    }
  }
}
