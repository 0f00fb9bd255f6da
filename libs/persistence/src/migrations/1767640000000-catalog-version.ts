import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What admission caches in memory (agents, runners, the resource catalogue) is versioned by one
 * database row (docs/scale-out.md#admin-writes): `catalog_version`, bumped by a trigger on every
 * write of a catalogue table, so the bump commits in the same transaction as the admin write
 * whichever process made it, and admission at any process compares the row with its cache.
 */
export const CATALOG_TABLES = ['agents', 'models', 'tools', 'tool_sources', 'knowledge_bases', 'plugins', 'runners'];

export class CatalogVersion1767640000000 implements MigrationInterface {
  name = 'CatalogVersion1767640000000';

  async up(q: QueryRunner): Promise<void> {
    const pg = q.connection.options.type === 'postgres';
    await q.query(`CREATE TABLE "catalog_version" (
      "id" INTEGER PRIMARY KEY NOT NULL,
      "version" BIGINT NOT NULL)`);
    await q.query(`INSERT INTO "catalog_version" ("id", "version") VALUES (1, 0)`);
    if (pg) {
      await q.query(`CREATE FUNCTION "rh_bump_catalog_version"() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          UPDATE "catalog_version" SET "version" = "version" + 1 WHERE "id" = 1;
          RETURN NULL;
        END $$`);
      for (const t of CATALOG_TABLES) {
        // Per statement: a bulk write (a tool source's whole tool list) bumps once, not per row.
        await q.query(`CREATE TRIGGER "catalog_version_${t}" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "${t}"
          FOR EACH STATEMENT EXECUTE FUNCTION "rh_bump_catalog_version"()`);
      }
      return;
    }
    // SQLite has row triggers only; one process per SQLite file, so a bulk write bumping per row costs little.
    for (const t of CATALOG_TABLES) {
      for (const op of ['INSERT', 'UPDATE', 'DELETE']) {
        await q.query(`CREATE TRIGGER "catalog_version_${t}_${op.toLowerCase()}" AFTER ${op} ON "${t}"
          BEGIN UPDATE "catalog_version" SET "version" = "version" + 1 WHERE "id" = 1; END`);
      }
    }
  }

  async down(q: QueryRunner): Promise<void> {
    const pg = q.connection.options.type === 'postgres';
    for (const t of CATALOG_TABLES) {
      if (pg) {
        await q.query(`DROP TRIGGER IF EXISTS "catalog_version_${t}" ON "${t}"`);
      } else {
        for (const op of ['insert', 'update', 'delete']) {
          await q.query(`DROP TRIGGER IF EXISTS "catalog_version_${t}_${op}"`);
        }
      }
    }
    if (pg) {
      await q.query(`DROP FUNCTION IF EXISTS "rh_bump_catalog_version"()`);
    }
    await q.query(`DROP TABLE "catalog_version"`);
  }
}
