import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * PostgreSQL: `rh_expected(value, expected, what)`, which fails with SQLSTATE `RH412` when `value`
 * is not `expected` and answers `value` otherwise — so that a statement the pipelined writer sends
 * without waiting for its answer, on the guess that the answer is `expected` (a run's end that
 * matched its row; no steering item queued on the run at its end), fails its transaction instead
 * of answering otherwise; the writer then runs the group again, awaiting each answer
 * (hot/speculation.ts, docs/durability.md#the-writers-transactions-on-postgresql). SQLite runs its
 * statements in process and needs nothing.
 */
export class SpeculationCheck1767750000000 implements MigrationInterface {
  name = 'SpeculationCheck1767750000000';

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.options.type !== 'postgres') {
      return;
    }
    await q.query(`CREATE FUNCTION "rh_expected"("value" bigint, "expected" bigint, "what" text) RETURNS bigint LANGUAGE plpgsql AS $$
      BEGIN
        IF "value" IS DISTINCT FROM "expected" THEN
          RAISE EXCEPTION 'speculation missed: % was %, not %', "what", "value", "expected"
            USING ERRCODE = 'RH412';
        END IF;
        RETURN "value";
      END $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === 'postgres') {
      await q.query(`DROP FUNCTION IF EXISTS "rh_expected"(bigint, bigint, text)`);
    }
  }
}
