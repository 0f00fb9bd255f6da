import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Resources: models and host-side model metering, tool sources and tools, knowledge bases. */
export class Resources1764700000000 implements MigrationInterface {
  name = 'Resources1764700000000';

  async up(q: QueryRunner): Promise<void> {
    const pg = q.connection.options.type === 'postgres';
    const serial = pg ? 'SERIAL PRIMARY KEY' : 'INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT';
    const statements = [
      `CREATE TABLE "models" (
        "model_id" VARCHAR(128) NOT NULL PRIMARY KEY,
        "kind" VARCHAR(16) NOT NULL,
        "provider" VARCHAR(64) NOT NULL,
        "base_url" VARCHAR(1000) NOT NULL,
        "api_key_env" VARCHAR(128) NULL,
        "model_name" VARCHAR(255) NOT NULL,
        "context_window" INTEGER NULL,
        "max_output_tokens" INTEGER NULL,
        "abilities" TEXT NOT NULL,
        "tokenizer" VARCHAR(64) NULL,
        "extra_args" TEXT NOT NULL,
        "created_at" BIGINT NOT NULL,
        "updated_at" BIGINT NOT NULL)`,
      `CREATE TABLE "model_usage" (
        "id" ${serial},
        "run_id" VARCHAR(64) NOT NULL,
        "model_id" VARCHAR(128) NOT NULL,
        "operation" VARCHAR(32) NOT NULL,
        "prompt_tokens" INTEGER NULL,
        "completion_tokens" INTEGER NULL,
        "total_tokens" INTEGER NULL,
        "complete" BOOLEAN NOT NULL,
        "created_at" BIGINT NOT NULL)`,
      `CREATE INDEX "idx_model_usage_run" ON "model_usage" ("run_id")`,
      `CREATE TABLE "tool_sources" (
        "source_id" VARCHAR(128) NOT NULL PRIMARY KEY,
        "kind" VARCHAR(16) NOT NULL,
        "config" TEXT NOT NULL,
        "enabled" BOOLEAN NOT NULL,
        "created_at" BIGINT NOT NULL,
        "updated_at" BIGINT NOT NULL)`,
      `CREATE TABLE "tools" (
        "id" ${serial},
        "tool_name" VARCHAR(255) NOT NULL,
        "source_tool_name" VARCHAR(255) NOT NULL,
        "source" VARCHAR(16) NOT NULL,
        "source_id" VARCHAR(128) NOT NULL,
        "description" TEXT NOT NULL,
        "parameters" TEXT NOT NULL,
        "updated_at" BIGINT NOT NULL)`,
      `CREATE UNIQUE INDEX "uq_tools_name" ON "tools" ("tool_name")`,
      `CREATE TABLE "knowledge_bases" (
        "kb_id" VARCHAR(128) NOT NULL PRIMARY KEY,
        "name" VARCHAR(255) NOT NULL,
        "description" TEXT NOT NULL,
        "chunk_size" INTEGER NOT NULL,
        "chunk_overlap" INTEGER NOT NULL,
        "created_at" BIGINT NOT NULL,
        "updated_at" BIGINT NOT NULL)`,
      `CREATE TABLE "kb_documents" (
        "document_id" VARCHAR(64) NOT NULL PRIMARY KEY,
        "kb_id" VARCHAR(128) NOT NULL,
        "name" VARCHAR(255) NOT NULL,
        "content_type" VARCHAR(64) NOT NULL,
        "metadata" TEXT NOT NULL,
        "size" INTEGER NOT NULL,
        "chunk_count" INTEGER NOT NULL,
        "created_at" BIGINT NOT NULL)`,
      `CREATE INDEX "idx_kb_documents_kb" ON "kb_documents" ("kb_id")`,
      `CREATE TABLE "kb_chunks" (
        "id" ${serial},
        "kb_id" VARCHAR(128) NOT NULL,
        "document_id" VARCHAR(64) NOT NULL,
        "position" INTEGER NOT NULL,
        "content" TEXT NOT NULL,
        "metadata" TEXT NOT NULL)`,
      `CREATE INDEX "idx_kb_chunks_doc" ON "kb_chunks" ("document_id", "position")`,
      ...(pg
        ? [`CREATE INDEX "idx_kb_chunks_fts" ON "kb_chunks" USING GIN (to_tsvector('simple', "content"))`]
        : [
            `CREATE VIRTUAL TABLE "kb_chunks_fts" USING fts5(content, content='kb_chunks', content_rowid='id')`,
            `CREATE TRIGGER "kb_chunks_fts_ai" AFTER INSERT ON "kb_chunks" BEGIN
               INSERT INTO "kb_chunks_fts"(rowid, content) VALUES (new.id, new.content); END`,
            `CREATE TRIGGER "kb_chunks_fts_ad" AFTER DELETE ON "kb_chunks" BEGIN
               INSERT INTO "kb_chunks_fts"("kb_chunks_fts", rowid, content) VALUES ('delete', old.id, old.content); END`,
          ]),
    ];
    for (const sql of statements) {
      await q.query(sql);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.options.type !== 'postgres') {
      await q.query(`DROP TRIGGER "kb_chunks_fts_ad"`);
      await q.query(`DROP TRIGGER "kb_chunks_fts_ai"`);
      await q.query(`DROP TABLE "kb_chunks_fts"`);
    }
    for (const table of [
      'kb_chunks',
      'kb_documents',
      'knowledge_bases',
      'tools',
      'tool_sources',
      'model_usage',
      'models',
    ]) {
      await q.query(`DROP TABLE "${table}"`);
    }
  }
}
