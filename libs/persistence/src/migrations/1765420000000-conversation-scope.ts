import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A conversation is agent + workspace + conversation id + thread (docs: conversations): the
 * transcript records its row's workspace, so history reads can be scoped by all four. Rows written
 * before take the workspace of their event (a user row's own event; an assistant row's run's
 * event). Indexes lead with the agent for the scoped reads of the transcript and the event log.
 * Same SQL on both dialects.
 */
export class ConversationScope1765420000000 implements MigrationInterface {
  name = 'ConversationScope1765420000000';

  async up(q: QueryRunner): Promise<void> {
    for (const sql of [
      `ALTER TABLE "transcript" ADD COLUMN "workspace_id" VARCHAR(255) NULL`,
      `UPDATE "transcript" SET "workspace_id" = COALESCE(
        (SELECT l."workspace_id" FROM "event_log" l
          WHERE l."event_id" = "transcript"."event_id" AND l."agent_id" = "transcript"."agent_id"
          ORDER BY l."id" LIMIT 1),
        (SELECT l."workspace_id" FROM "runs" r JOIN "event_log" l ON l."event_id" = r."event_id"
          WHERE r."run_id" = "transcript"."run_id" ORDER BY l."id" LIMIT 1))`,
      `CREATE INDEX "idx_transcript_scope" ON "transcript" ("agent_id", "conversation_id", "seq")`,
      `CREATE INDEX "idx_event_log_scope" ON "event_log" ("agent_id", "conversation_id", "id")`,
    ]) {
      await q.query(sql);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "idx_event_log_scope"`);
    await q.query(`DROP INDEX "idx_transcript_scope"`);
    await q.query(`ALTER TABLE "transcript" DROP COLUMN "workspace_id"`);
  }
}
