import type { MigrationInterface, QueryRunner } from 'typeorm';
import { conversationKey } from '../hot/steering-rows';

/** The workspace every row written before tenancy moves into (docs/tenancy.md). */
export const DEFAULT_WORKSPACE = 'default';

/**
 * Workspaces own agents, resources, keys and data (docs/tenancy.md):
 * - `workspaces` (with the `default` workspace, quotas as JSON);
 * - `workspace_id` on the rows a workspace owns directly: agents, models, tool sources, knowledge
 *   bases (these three with `shared`: visible to every workspace's runs); api keys get
 *   `workspace_ids` (JSON list; null = every workspace, only for admin keys);
 * - runs, steering items, the event log and the transcript already carry the conversation's
 *   workspace: every row moves into `default` (steering keys recomputed), since a run's workspace is
 *   now its agent's. Rows reached through a run (results, deliveries, audit, interactions, model
 *   usage) or an agent derive theirs.
 * Both dialects; only the boolean default differs.
 */
export class Workspaces1767200000000 implements MigrationInterface {
  name = 'Workspaces1767200000000';

  async up(q: QueryRunner): Promise<void> {
    const pg = q.connection.options.type === 'postgres';
    const no = pg ? 'false' : '0';
    await q.query(`CREATE TABLE "workspaces" (
      "workspace_id" VARCHAR(64) PRIMARY KEY NOT NULL,
      "name" VARCHAR(200) NOT NULL,
      "quotas" TEXT NOT NULL,
      "created_at" BIGINT NOT NULL,
      "updated_at" BIGINT NOT NULL)`);
    const now = Date.now();
    await q.query(
      `INSERT INTO "workspaces" ("workspace_id", "name", "quotas", "created_at", "updated_at") VALUES
        ('${DEFAULT_WORKSPACE}', 'Default workspace', '{}', ${now}, ${now})`,
    );
    for (const table of ['agents', 'models', 'tool_sources', 'knowledge_bases']) {
      await q.query(
        `ALTER TABLE "${table}" ADD COLUMN "workspace_id" VARCHAR(64) NOT NULL DEFAULT '${DEFAULT_WORKSPACE}'`,
      );
      await q.query(`CREATE INDEX "idx_${table}_workspace" ON "${table}" ("workspace_id")`);
    }
    for (const table of ['models', 'tool_sources', 'knowledge_bases']) {
      await q.query(`ALTER TABLE "${table}" ADD COLUMN "shared" BOOLEAN NOT NULL DEFAULT ${no}`);
    }
    await q.query(`ALTER TABLE "api_keys" ADD COLUMN "workspace_ids" TEXT NULL`);
    await q.query(`UPDATE "api_keys" SET "workspace_ids" = '["${DEFAULT_WORKSPACE}"]' WHERE "role" = 'platform'`);
    for (const table of ['runs', 'steering_items', 'event_log', 'transcript']) {
      await q.query(`UPDATE "${table}" SET "workspace_id" = '${DEFAULT_WORKSPACE}'`);
    }
    await q.query(`CREATE INDEX "idx_runs_workspace" ON "runs" ("workspace_id", "id")`);
    const items = (await q.query(
      `SELECT "id", "agent_id", "workspace_id", "conversation_id", "thread_id" FROM "steering_items"`,
    )) as {
      id: number;
      agent_id: string;
      workspace_id: string | null;
      conversation_id: string;
      thread_id: string | null;
    }[];
    for (const r of items) {
      await q.query(
        `UPDATE "steering_items" SET "conversation_key" = ${pg ? '$1' : '?'} WHERE "id" = ${pg ? '$2' : '?'}`,
        [conversationKey(r.agent_id, r.workspace_id, r.conversation_id, r.thread_id), r.id],
      );
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "idx_runs_workspace"`);
    await q.query(`ALTER TABLE "api_keys" DROP COLUMN "workspace_ids"`);
    for (const table of ['models', 'tool_sources', 'knowledge_bases']) {
      await q.query(`ALTER TABLE "${table}" DROP COLUMN "shared"`);
    }
    for (const table of ['agents', 'models', 'tool_sources', 'knowledge_bases']) {
      await q.query(`DROP INDEX "idx_${table}_workspace"`);
      await q.query(`ALTER TABLE "${table}" DROP COLUMN "workspace_id"`);
    }
    await q.query(`DROP TABLE "workspaces"`);
  }
}
