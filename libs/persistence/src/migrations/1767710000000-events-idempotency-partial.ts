import type { MigrationInterface, QueryRunner } from 'typeorm';
import { rebuildSqliteTable } from './sqlite-rebuild';

const INLINE = '"idempotency_key" VARCHAR(255) NULL UNIQUE';
const PLAIN = '"idempotency_key" VARCHAR(255) NULL';
const PARTIAL = `CREATE UNIQUE INDEX "uq_events_idempotency_key" ON "events" ("idempotency_key") WHERE "idempotency_key" IS NOT NULL`;

/**
 * The events' idempotency key unique over keyed events only (docs/benchmarks.md, "Fewer SQLite
 * B-trees written per run"). The key is NULL for most events, but the inline UNIQUE's index took
 * an entry for every event (one more B-tree written per admission). A partial unique index keeps
 * the same rule (two events never share a key; NULLs were never compared) and serves the one
 * reader, `eventByKey` (`WHERE "idempotency_key" = ?`, which implies the key is not NULL; both
 * planners use the partial index), and `insertEvent`'s `ON CONFLICT DO NOTHING` (no conflict
 * target: any unique index). SQLite cannot drop an inline UNIQUE: the table is rebuilt
 * (sqlite-rebuild.ts; rows, the primary key and `idx_events_conversation` kept). PostgreSQL drops
 * the constraint (`events_idempotency_key_key`, its default name) and builds the same partial
 * index. `down` puts the inline UNIQUE back on both.
 */
export class EventsIdempotencyPartial1767710000000 implements MigrationInterface {
  name = 'EventsIdempotencyPartial1767710000000';

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === 'postgres') {
      await q.query(`ALTER TABLE "events" DROP CONSTRAINT "events_idempotency_key_key"`);
    } else {
      await rebuildSqliteTable(q, 'events', (sql) => sql.replace(INLINE, PLAIN));
    }
    await q.query(PARTIAL);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "uq_events_idempotency_key"`);
    if (q.connection.options.type === 'postgres') {
      await q.query(`ALTER TABLE "events" ADD CONSTRAINT "events_idempotency_key_key" UNIQUE ("idempotency_key")`);
    } else {
      await rebuildSqliteTable(q, 'events', (sql) => sql.replace(PLAIN, INLINE));
    }
  }
}
