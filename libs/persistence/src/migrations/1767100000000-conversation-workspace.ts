import type { MigrationInterface, QueryRunner } from 'typeorm';
import { conversationKey } from '../hot/steering-rows';

/** The workspace of an event, from its first event-log row. */
const EVENT_WORKSPACE = (table: string) => `(SELECT l."workspace_id" FROM "event_log" l
  WHERE l."event_id" = "${table}"."event_id" ORDER BY l."id" LIMIT 1)`;

/**
 * Concurrency and steering are per conversation = agent + workspace + conversation id + thread
 * (docs/conversations-and-steering.md), as history reads are: one agent serving two workspaces
 * with the same conversation id runs, steers and queues them apart.
 * - `runs.workspace_id`, from the run's event; the one-running-run index includes it (a missing
 *   workspace is its own value, distinct from every named one, the empty name included);
 * - `steering_items.workspace_id`, from the item's event, and `conversation_key` recomputed with
 *   the workspace (the key the dispatcher and the conversation lock use).
 * Runs and items written before keep their conversation: rows of one event share its workspace.
 */
export class ConversationWorkspace1767100000000 implements MigrationInterface {
  name = 'ConversationWorkspace1767100000000';

  async up(q: QueryRunner): Promise<void> {
    for (const sql of [
      `ALTER TABLE "runs" ADD COLUMN "workspace_id" VARCHAR(255) NULL`,
      `UPDATE "runs" SET "workspace_id" = ${EVENT_WORKSPACE('runs')} WHERE "conversation_id" IS NOT NULL`,
      `DROP INDEX "uq_runs_running_conversation"`,
      `CREATE UNIQUE INDEX "uq_runs_running_conversation" ON "runs"
        ("agent_id", (COALESCE('w:' || "workspace_id", '')), "conversation_id", (COALESCE("thread_id", '')))
        WHERE "status" = 'running' AND "conversation_id" IS NOT NULL`,
      `ALTER TABLE "steering_items" ADD COLUMN "workspace_id" VARCHAR(255) NULL`,
      `UPDATE "steering_items" SET "workspace_id" = ${EVENT_WORKSPACE('steering_items')}`,
    ]) {
      await q.query(sql);
    }
    await this.rekey(q, (r) => conversationKey(r.agent_id, r.workspace_id, r.conversation_id, r.thread_id));
  }

  async down(q: QueryRunner): Promise<void> {
    await this.rekey(q, (r) => JSON.stringify([r.agent_id, r.conversation_id, r.thread_id ?? '']));
    for (const sql of [
      `ALTER TABLE "steering_items" DROP COLUMN "workspace_id"`,
      `DROP INDEX "uq_runs_running_conversation"`,
      `CREATE UNIQUE INDEX "uq_runs_running_conversation" ON "runs" ("agent_id", "conversation_id", (COALESCE("thread_id", '')))
        WHERE "status" = 'running' AND "conversation_id" IS NOT NULL`,
      `ALTER TABLE "runs" DROP COLUMN "workspace_id"`,
    ]) {
      await q.query(sql);
    }
  }

  /** Recomputes every item's conversation key (in the canonical form of conversationKey). */
  private async rekey(q: QueryRunner, key: (r: ItemIds) => string): Promise<void> {
    const pg = q.connection.options.type === 'postgres';
    const items = (await q.query(
      `SELECT "id", "agent_id", "workspace_id", "conversation_id", "thread_id" FROM "steering_items"`,
    )) as ItemIds[];
    for (const r of items) {
      await q.query(
        `UPDATE "steering_items" SET "conversation_key" = ${pg ? '$1' : '?'} WHERE "id" = ${pg ? '$2' : '?'}`,
        [key(r), r.id],
      );
    }
  }
}

interface ItemIds {
  id: number;
  agent_id: string;
  workspace_id: string | null;
  conversation_id: string;
  thread_id: string | null;
}
