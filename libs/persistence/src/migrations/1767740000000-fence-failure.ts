import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * PostgreSQL: `rh_fenced(matched, run_id)`, which fails with SQLSTATE `RH409` when a run's fence
 * matched no row and answers `matched` otherwise — so that a fence written on the pipelined writer
 * without waiting for its answer fails its transaction instead of answering "nothing changed"
 * (run-fence.ts ridingFence, docs/durability.md#the-writers-transactions-on-postgresql). SQLite
 * runs its fences as statements in process and needs nothing.
 */
export class FenceFailure1767740000000 implements MigrationInterface {
  name = 'FenceFailure1767740000000';

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.options.type !== 'postgres') {
      return;
    }
    await q.query(`CREATE FUNCTION "rh_fenced"("matched" bigint, "run_id" text) RETURNS bigint LANGUAGE plpgsql AS $$
      BEGIN
        IF "matched" = 0 THEN
          RAISE EXCEPTION 'run %: write fenced (the lease it names no longer owns the run)', "run_id"
            USING ERRCODE = 'RH409';
        END IF;
        RETURN "matched";
      END $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === 'postgres') {
      await q.query(`DROP FUNCTION IF EXISTS "rh_fenced"(bigint, text)`);
    }
  }
}
