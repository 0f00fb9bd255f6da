import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The runs of a conversation by `(conversation_id, id)` instead of `(conversation_id, status)`
 * (docs/benchmarks.md, "The runs status indexes off the per-run write path"). The status in the key
 * moved the run's entry at its end (one more B-tree page written per run on SQLite); the id is
 * written once, at admission. Its readers: the run list and the conversation timeline by
 * conversation (`conversation_id = ?`, newest or oldest first: the index order is the id order),
 * and no longer the admission's situation read, which seeks uq_runs_running_conversation
 * (hot/steering-sql.ts). Partial over runs with a conversation (`conversation_id = ?` implies it on
 * both dialects): a run without one writes no entry. Same SQL on both dialects; `down` restores the
 * old index.
 */
export class RunsConversationIndex1767720000000 implements MigrationInterface {
  name = 'RunsConversationIndex1767720000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "idx_runs_conversation_status"`);
    await q.query(
      `CREATE INDEX "idx_runs_conversation" ON "runs" ("conversation_id", "id") WHERE "conversation_id" IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "idx_runs_conversation"`);
    await q.query(`CREATE INDEX "idx_runs_conversation_status" ON "runs" ("conversation_id", "status")`);
  }
}
