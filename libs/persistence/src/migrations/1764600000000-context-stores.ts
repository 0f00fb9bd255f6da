import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Authorization snapshots on runs; transcript (with full-text search), event log, state, storage, audit. */
export class ContextStores1764600000000 implements MigrationInterface {
  name = 'ContextStores1764600000000';

  async up(q: QueryRunner): Promise<void> {
    const pg = q.connection.options.type === 'postgres';
    const serial = pg ? 'SERIAL PRIMARY KEY' : 'INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT';
    const statements = [
      `ALTER TABLE "runs" ADD COLUMN "authorization" TEXT NULL`,
      `ALTER TABLE "runs" ADD COLUMN "authorization_hash" VARCHAR(64) NULL`,
      `CREATE TABLE "transcript" (
        "id" ${serial},
        "conversation_id" VARCHAR(255) NOT NULL,
        "thread_id" VARCHAR(255) NULL,
        "seq" INTEGER NOT NULL,
        "role" VARCHAR(16) NOT NULL,
        "item_type" VARCHAR(16) NOT NULL,
        "content" TEXT NOT NULL,
        "content_json" TEXT NOT NULL,
        "attachment_refs" TEXT NOT NULL,
        "event_id" VARCHAR(255) NULL,
        "run_id" VARCHAR(64) NULL,
        "agent_id" VARCHAR(128) NOT NULL,
        "metadata" TEXT NOT NULL,
        "created_at" BIGINT NOT NULL)`,
      `CREATE UNIQUE INDEX "uq_transcript_conversation_seq" ON "transcript" ("conversation_id", "seq")`,
      `CREATE TABLE "event_log" (
        "id" ${serial},
        "event_id" VARCHAR(255) NOT NULL,
        "event_type" VARCHAR(128) NOT NULL,
        "event_time" BIGINT NULL,
        "source" VARCHAR(32) NOT NULL,
        "agent_id" VARCHAR(128) NOT NULL,
        "conversation_id" VARCHAR(255) NULL,
        "thread_id" VARCHAR(255) NULL,
        "bot_id" VARCHAR(255) NULL,
        "workspace_id" VARCHAR(255) NULL,
        "actor_type" VARCHAR(64) NULL,
        "actor_id" VARCHAR(255) NULL,
        "actor_name" VARCHAR(255) NULL,
        "subject_type" VARCHAR(64) NULL,
        "subject_id" VARCHAR(255) NULL,
        "input_summary" TEXT NOT NULL,
        "run_id" VARCHAR(64) NULL,
        "runner_id" VARCHAR(200) NULL,
        "metadata" TEXT NOT NULL,
        "created_at" BIGINT NOT NULL)`,
      `CREATE INDEX "idx_event_log_conversation" ON "event_log" ("conversation_id", "id")`,
      `CREATE INDEX "idx_event_log_event" ON "event_log" ("event_id")`,
      `CREATE TABLE "state_entries" (
        "id" ${serial},
        "scope_key" VARCHAR(128) NOT NULL,
        "state_key" VARCHAR(255) NOT NULL,
        "value" TEXT NOT NULL,
        "updated_at" BIGINT NOT NULL)`,
      `CREATE UNIQUE INDEX "uq_state_scope_key" ON "state_entries" ("scope_key", "state_key")`,
      `CREATE TABLE "storage_entries" (
        "id" ${serial},
        "owner_key" VARCHAR(400) NOT NULL,
        "key" VARCHAR(255) NOT NULL,
        "value_base64" TEXT NOT NULL,
        "size" INTEGER NOT NULL,
        "updated_at" BIGINT NOT NULL)`,
      `CREATE UNIQUE INDEX "uq_storage_owner_key" ON "storage_entries" ("owner_key", "key")`,
      `CREATE TABLE "audit_log" (
        "id" ${serial},
        "run_id" VARCHAR(64) NOT NULL,
        "runner_id" VARCHAR(200) NULL,
        "plugin_id" VARCHAR(130) NULL,
        "action" VARCHAR(64) NOT NULL,
        "resource" VARCHAR(300) NULL,
        "scope" VARCHAR(300) NULL,
        "outcome" VARCHAR(16) NOT NULL,
        "error_code" VARCHAR(64) NULL,
        "duration_us" INTEGER NOT NULL,
        "created_at" BIGINT NOT NULL)`,
      `CREATE INDEX "idx_audit_run" ON "audit_log" ("run_id", "id")`,
      ...(pg
        ? [`CREATE INDEX "idx_transcript_fts" ON "transcript" USING GIN (to_tsvector('simple', "content"))`]
        : [
            `CREATE VIRTUAL TABLE "transcript_fts" USING fts5(content, content='transcript', content_rowid='id')`,
            `CREATE TRIGGER "transcript_fts_ai" AFTER INSERT ON "transcript" BEGIN
               INSERT INTO "transcript_fts"(rowid, content) VALUES (new.id, new.content); END`,
            `CREATE TRIGGER "transcript_fts_ad" AFTER DELETE ON "transcript" BEGIN
               INSERT INTO "transcript_fts"("transcript_fts", rowid, content) VALUES ('delete', old.id, old.content); END`,
          ]),
    ];
    for (const sql of statements) {
      await q.query(sql);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    const pg = q.connection.options.type === 'postgres';
    if (!pg) {
      await q.query(`DROP TRIGGER "transcript_fts_ad"`);
      await q.query(`DROP TRIGGER "transcript_fts_ai"`);
      await q.query(`DROP TABLE "transcript_fts"`);
    }
    for (const table of ['audit_log', 'storage_entries', 'state_entries', 'event_log', 'transcript']) {
      await q.query(`DROP TABLE "${table}"`);
    }
    await q.query(`ALTER TABLE "runs" DROP COLUMN "authorization_hash"`);
    await q.query(`ALTER TABLE "runs" DROP COLUMN "authorization"`);
  }
}
