import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The running runs of a workspace, counted over the database by the admission unit for the
 * workspace's `max_active_runs` (docs/tenancy.md#quotas): a partial index over running runs only,
 * so the count reads a workspace's running runs and never its history. Same SQL on both dialects.
 */
export class RunningRunsByWorkspace1767650000000 implements MigrationInterface {
  name = 'RunningRunsByWorkspace1767650000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX "idx_runs_running_workspace" ON "runs" ("workspace_id") WHERE "status" = 'running'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "idx_runs_running_workspace"`);
  }
}
