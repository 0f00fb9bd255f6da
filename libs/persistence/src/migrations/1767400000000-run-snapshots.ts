import type { MigrationInterface, QueryRunner } from 'typeorm';
import { joinSnapshot, splitSnapshot } from '../hot/snapshot-rows';
import type { JsonObject } from '../entities';

const BATCH = 500;

/**
 * Authorization snapshots stored once by their hash (hot/snapshot-rows.ts,
 * docs/durability.md#what-a-run-row-holds): the `snapshots` table (content-addressed, SHA-256 of
 * the JSON text of a snapshot's shared part); runs get `snapshot_hash` and `authorization_run`
 * (the run's own keys) in place of `authorization` (the whole snapshot as JSON text per run).
 * Existing rows move: each snapshot is split, its shared part written once, its run row pointed
 * at it; `authorization_hash` stays as it was, so every moved snapshot still verifies. Both
 * dialects; `down` joins them back.
 */
export class RunSnapshots1767400000000 implements MigrationInterface {
  name = 'RunSnapshots1767400000000';

  async up(q: QueryRunner): Promise<void> {
    const pg = q.connection.options.type === 'postgres';
    const p = (n: number): string => (pg ? `$${n}` : '?');
    await q.query(`CREATE TABLE "snapshots" (
      "hash" VARCHAR(64) PRIMARY KEY NOT NULL,
      "content" TEXT NOT NULL,
      "created_at" BIGINT NOT NULL)`);
    await q.query(`ALTER TABLE "runs" ADD COLUMN "snapshot_hash" VARCHAR(64) NULL`);
    await q.query(`ALTER TABLE "runs" ADD COLUMN "authorization_run" TEXT NULL`);
    let after = 0;
    for (;;) {
      const rows = (await q.query(
        `SELECT "id", "authorization", "created_at" FROM "runs" WHERE "id" > ${p(1)} AND "authorization" IS NOT NULL
         ORDER BY "id" ASC LIMIT ${BATCH}`,
        [after],
      )) as { id: number | string; authorization: string; created_at: number | string }[];
      for (const r of rows) {
        const s = splitSnapshot(JSON.parse(r.authorization) as JsonObject);
        await q.query(
          `INSERT INTO "snapshots" ("hash", "content", "created_at") VALUES (${p(1)}, ${p(2)}, ${p(3)}) ON CONFLICT DO NOTHING`,
          [s.hash, s.content, Number(r.created_at)],
        );
        await q.query(
          `UPDATE "runs" SET "snapshot_hash" = ${p(1)}, "authorization_run" = ${p(2)} WHERE "id" = ${p(3)}`,
          [s.hash, s.run, Number(r.id)],
        );
      }
      if (rows.length < BATCH) {
        break;
      }
      after = Number(rows[rows.length - 1].id);
    }
    await q.query(`ALTER TABLE "runs" DROP COLUMN "authorization"`);
  }

  async down(q: QueryRunner): Promise<void> {
    const pg = q.connection.options.type === 'postgres';
    const p = (n: number): string => (pg ? `$${n}` : '?');
    await q.query(`ALTER TABLE "runs" ADD COLUMN "authorization" TEXT NULL`);
    const rows = (await q.query(
      `SELECT r."id", r."authorization_run", s."content" FROM "runs" AS r
       JOIN "snapshots" AS s ON s."hash" = r."snapshot_hash"`,
    )) as { id: number | string; authorization_run: string | null; content: string }[];
    for (const r of rows) {
      await q.query(`UPDATE "runs" SET "authorization" = ${p(1)} WHERE "id" = ${p(2)}`, [
        JSON.stringify(joinSnapshot(r.content, r.authorization_run)),
        Number(r.id),
      ]);
    }
    await q.query(`ALTER TABLE "runs" DROP COLUMN "authorization_run"`);
    await q.query(`ALTER TABLE "runs" DROP COLUMN "snapshot_hash"`);
    await q.query(`DROP TABLE "snapshots"`);
  }
}
