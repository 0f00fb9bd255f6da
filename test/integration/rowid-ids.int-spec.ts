import { DataSource } from 'typeorm';
import { dataSourceOptions } from '@libs/persistence';
import { DIALECTS, isPostgres, listIndexes, undoMigrationsFrom, type TestDatabase } from './support/databases';

jest.setTimeout(60_000);

const ROWID = 'RowidIds1767700000000';
const EVENTS = 'EventsIdempotencyPartial1767710000000';
const TABLES = ['runs', 'run_results', 'transcript', 'event_log', 'delivery_outbox'];

/** Each table's schema objects (the table, its indexes and triggers) as SQLite stores them, minus `AUTOINCREMENT`. */
async function schemaOf(ds: DataSource, table: string): Promise<string[]> {
  const rows = await ds.query<Array<{ type: string; name: string; sql: string | null }>>(
    `SELECT "type", "name", "sql" FROM "sqlite_schema" WHERE "tbl_name" = ? ORDER BY "type", "name"`,
    [table],
  );
  return rows.map((r) => `${r.type} ${r.name}: ${(r.sql ?? '').replace(' AUTOINCREMENT', '')}`);
}

async function sequenceOf(ds: DataSource): Promise<Record<string, number>> {
  const rows = await ds.query<Array<{ name: string; seq: number }>>(`SELECT "name", "seq" FROM "sqlite_sequence"`);
  return Object.fromEntries(rows.filter((r) => TABLES.includes(r.name)).map((r) => [r.name, r.seq]));
}

async function ids(ds: DataSource, table: string): Promise<number[]> {
  const rows = await ds.query<Array<{ id: number | string }>>(`SELECT "id" FROM "${table}" ORDER BY "id"`);
  return rows.map((r) => Number(r.id));
}

/** One row of each of the five tables (the columns without a default). */
async function insertRows(ds: DataSource, n: number): Promise<void> {
  await ds.query(
    `INSERT INTO "runs" ("run_id", "event_id", "agent_id", "runner_id", "conversation_id", "status", "context", "created_at")
     VALUES ('run-${n}', 'evt-${n}', 'agent-1', 'acme/echo/echo', 'conv-1', 'completed', '{}', ${n})`,
  );
  await ds.query(
    `INSERT INTO "run_results" ("run_id", "sequence", "type", "data", "source", "created_at")
     VALUES ('run-${n}', 1, 'run.completed', '{}', 'runner', ${n})`,
  );
  await ds.query(
    `INSERT INTO "transcript" ("conversation_id", "seq", "role", "item_type", "content", "content_json", "attachment_refs",
       "agent_id", "metadata", "created_at")
     VALUES ('conv-1', ${n}, 'user', 'message', 'volcano number ${n}', '{}', '[]', 'agent-1', '{}', ${n})`,
  );
  await ds.query(
    `INSERT INTO "event_log" ("event_id", "event_type", "source", "agent_id", "conversation_id", "input_summary", "metadata", "created_at")
     VALUES ('evt-${n}', 'message.received', 'api', 'agent-1', 'conv-1', '', '{}', ${n})`,
  );
  await ds.query(
    `INSERT INTO "delivery_outbox" ("delivery_id", "run_id", "agent_id", "sequence", "op", "idempotency_key", "payload",
       "created_at", "webhook_state")
     VALUES ('d-${n}', 'run-${n}', 'agent-1', 1, 'message.send', 'k-${n}', '{}', ${n}, 'none')`,
  );
}

describe.each(DIALECTS)('row ids and the events key index on %s', (_name, factory) => {
  let db: TestDatabase;
  let ds: DataSource;

  beforeEach(async () => {
    db = await factory();
    ds = await new DataSource(dataSourceOptions(db.config)).initialize();
  });

  afterEach(async () => {
    if (ds?.isInitialized) {
      await ds.destroy();
    }
    await db?.dispose();
  });

  it('SQLite: the five run-path tables lose AUTOINCREMENT with their rows, ids, indexes and triggers; down puts it back', async () => {
    if (isPostgres(ds)) {
      // PostgreSQL: the migration changes nothing (SERIAL ids come from sequences).
      const defaults = await ds.query<Array<{ table_name: string; column_default: string }>>(
        `SELECT table_name, column_default FROM information_schema.columns
          WHERE column_name = 'id' AND table_name = ANY($1) AND table_schema = current_schema() ORDER BY table_name`,
        [TABLES],
      );
      expect(defaults.map((d) => d.column_default)).toEqual(TABLES.map(() => expect.stringMatching(/^nextval\(/)));
      return;
    }
    const undone = await undoMigrationsFrom(ds, ROWID);
    expect(undone.slice(0, 2)).toEqual([ROWID, EVENTS]);
    for (const t of TABLES) {
      const [create] = await ds.query<Array<{ sql: string }>>(`SELECT "sql" FROM "sqlite_schema" WHERE "name" = ?`, [
        t,
      ]);
      expect(create.sql).toContain('AUTOINCREMENT');
    }
    await insertRows(ds, 1);
    await insertRows(ds, 2);
    await insertRows(ds, 3);
    // The newest result row was deleted before the migration: its id (3) is above the largest kept.
    await ds.query(`DELETE FROM "run_results" WHERE "id" = 3`);
    // Index the transcript's rows (the deferred indexer's statement), so the FTS rows name their ids.
    await ds.query(`INSERT INTO "transcript_fts"(rowid, content) SELECT "id", "content" FROM "transcript"`);
    await ds.query(`UPDATE "fts_watermarks" SET "indexed_id" = 3 WHERE "name" = 'transcript'`);
    const before = Object.fromEntries(await Promise.all(TABLES.map(async (t) => [t, await schemaOf(ds, t)] as const)));
    const beforeIds = Object.fromEntries(await Promise.all(TABLES.map(async (t) => [t, await ids(ds, t)] as const)));
    expect(await sequenceOf(ds)).toEqual({ runs: 3, run_results: 3, transcript: 3, event_log: 3, delivery_outbox: 3 });

    expect((await ds.runMigrations()).map((m) => m.name)).toEqual(undone);

    for (const t of TABLES) {
      const [create] = await ds.query<Array<{ sql: string }>>(`SELECT "sql" FROM "sqlite_schema" WHERE "name" = ?`, [
        t,
      ]);
      expect(create.sql).not.toContain('AUTOINCREMENT');
      expect(create.sql).toContain('"id" INTEGER NOT NULL PRIMARY KEY,');
      // Same indexes (partial and expression ones included) and triggers (the FTS delete trigger
      // aside: it now also keeps the watermark at most the largest id), same rows, same ids.
      // RunsConversationIndex1767720000000, re-run after it, replaces the runs' conversation index
      // (runs-conversation-index.int-spec.ts).
      const notFtsDelete = (o: string) =>
        !o.startsWith('trigger transcript_fts_ad') && !o.startsWith('index idx_runs_conversation');
      expect((await schemaOf(ds, t)).filter(notFtsDelete)).toEqual(before[t].filter(notFtsDelete));
      expect(await ids(ds, t)).toEqual(beforeIds[t]);
    }
    expect(await sequenceOf(ds)).toEqual({});
    // The FTS rows still name their transcript rows; the delete trigger still takes an indexed row out.
    const hits = async (word: string) =>
      (
        await ds.query<Array<{ id: number }>>(
          `SELECT t."id" FROM "transcript_fts" f JOIN "transcript" t ON t."id" = f.rowid WHERE "transcript_fts" MATCH ? ORDER BY t."id"`,
          [word],
        )
      ).map((r) => r.id);
    expect(await hits('volcano')).toEqual([1, 2, 3]);
    await ds.query(`DELETE FROM "transcript" WHERE "id" = 2`);
    expect(await hits('volcano')).toEqual([1, 3]);
    // Deleting the newest row lowers the watermark with it: the id given again (3) is indexed anew
    // (not taken for indexed), and deleting it again takes it out of the index cleanly.
    const watermark = async () =>
      (await ds.query<Array<{ w: number }>>(`SELECT "indexed_id" AS "w" FROM "fts_watermarks"`))[0].w;
    await ds.query(`DELETE FROM "transcript" WHERE "id" = 3`);
    expect(await watermark()).toBe(1);
    expect(await hits('volcano')).toEqual([1]);
    await ds.query(`INSERT INTO "transcript" ("conversation_id", "seq", "role", "item_type", "content", "content_json",
      "attachment_refs", "agent_id", "metadata", "created_at")
      VALUES ('conv-1', 3, 'user', 'message', 'volcano again', '{}', '[]', 'agent-1', '{}', 3)`);
    expect(await ids(ds, 'transcript')).toEqual([1, 2]);
    await ds.query(
      `INSERT INTO "transcript_fts"(rowid, content) SELECT "id", "content" FROM "transcript" WHERE "id" > 1`,
    );
    await ds.query(`UPDATE "fts_watermarks" SET "indexed_id" = 2 WHERE "name" = 'transcript'`);
    expect(await hits('volcano')).toEqual([1, 2]);
    expect(await hits('again')).toEqual([2]);
    await ds.query(`DELETE FROM "transcript" WHERE "id" = 2`);
    expect(await hits('volcano')).toEqual([1]);
    expect(await ds.query(`INSERT INTO "transcript_fts"("transcript_fts") VALUES ('integrity-check')`)).toBeDefined();
    // New rows: max(id) + 1, no sqlite_sequence row (the frame per commit this removes).
    await insertRows(ds, 4);
    expect(await ids(ds, 'runs')).toEqual([1, 2, 3, 4]);
    expect(await ids(ds, 'run_results')).toEqual([1, 2, 3]); // 3 again: retention deleted it before the migration
    expect(await sequenceOf(ds)).toEqual({});
    // The partial unique index over running runs is still unique.
    await ds.query(`UPDATE "runs" SET "status" = 'running' WHERE "id" = 4`);
    await expect(ds.query(`UPDATE "runs" SET "status" = 'running' WHERE "id" = 3`)).rejects.toThrow(/UNIQUE/);

    const again = await undoMigrationsFrom(ds, ROWID);
    expect(again).toEqual(undone);
    for (const t of TABLES) {
      const [create] = await ds.query<Array<{ sql: string }>>(`SELECT "sql" FROM "sqlite_schema" WHERE "name" = ?`, [
        t,
      ]);
      expect(create.sql).toContain('"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT');
      expect(await schemaOf(ds, t)).toEqual(before[t]);
    }
    // SQLite sets each table's sequence to the largest id copied back.
    expect(await sequenceOf(ds)).toEqual({ runs: 4, run_results: 3, transcript: 2, event_log: 4, delivery_outbox: 4 });
    expect(await ids(ds, 'event_log')).toEqual([1, 2, 3, 4]);
    expect((await ds.runMigrations()).map((m) => m.name)).toEqual(undone);
  });

  it("the events' idempotency key is unique over keyed events only, with the rows kept; down puts the inline UNIQUE back", async () => {
    const undone = await undoMigrationsFrom(ds, EVENTS);
    const event = (id: string, key: string | null) =>
      ds.query(
        `INSERT INTO "events" ("event_id", "agent_id", "event_type", "idempotency_key", "body_hash", "payload",
           "disposition", "received_at")
         VALUES ('${id}', 'agent-1', 'message.received', ${key === null ? 'NULL' : `'${key}'`}, 'h', '{}', 'accepted', 1)`,
      );
    await event('e-1', null);
    await event('e-2', 'key-2');
    await event('e-3', null);
    const keyIndexes = async () =>
      (await listIndexes(ds, 'events')).filter((i) => i.columns.length === 1 && i.columns[0] === 'idempotency_key');
    expect(await keyIndexes()).toEqual([{ name: expect.any(String), unique: true, columns: ['idempotency_key'] }]);
    expect((await keyIndexes())[0].name).not.toBe('uq_events_idempotency_key');

    expect((await ds.runMigrations()).map((m) => m.name)).toEqual(undone);

    expect(await keyIndexes()).toEqual([
      { name: 'uq_events_idempotency_key', unique: true, columns: ['idempotency_key'] },
    ]);
    const rows = await ds.query<Array<{ event_id: string; idempotency_key: string | null }>>(
      `SELECT "event_id", "idempotency_key" FROM "events" ORDER BY "event_id"`,
    );
    expect(rows).toEqual([
      { event_id: 'e-1', idempotency_key: null },
      { event_id: 'e-2', idempotency_key: 'key-2' },
      { event_id: 'e-3', idempotency_key: null },
    ]);
    await expect(event('e-4', 'key-2')).rejects.toThrow(/unique|UNIQUE/);
    await event('e-5', null); // NULL keys never conflicted and still do not
    // The one reader by key seeks the partial index (no scan of events).
    if (isPostgres(ds)) {
      const runner = ds.createQueryRunner();
      try {
        await runner.query('SET enable_seqscan = off');
        const plan = (await runner.query(`EXPLAIN SELECT * FROM "events" WHERE "idempotency_key" = $1`, [
          'key-2',
        ])) as Array<{ 'QUERY PLAN': string }>;
        expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toMatch(/Index Scan using uq_events_idempotency_key/);
        await runner.query('RESET enable_seqscan');
      } finally {
        await runner.release();
      }
    } else {
      const plan = await ds.query<Array<{ detail: string }>>(
        `EXPLAIN QUERY PLAN SELECT * FROM "events" WHERE "idempotency_key" = ?`,
        ['key-2'],
      );
      expect(plan.map((r) => r.detail).join('; ')).toMatch(
        /USING INDEX uq_events_idempotency_key \(idempotency_key=\?\)/,
      );
      // The admission's insert skips a keyed duplicate (ON CONFLICT DO NOTHING: any unique index).
      await ds.query(
        `INSERT INTO "events" ("event_id", "agent_id", "event_type", "idempotency_key", "body_hash", "payload",
           "disposition", "received_at")
         VALUES ('e-6', 'agent-1', 'message.received', 'key-2', 'h', '{}', 'accepted', 1) ON CONFLICT DO NOTHING`,
      );
      expect(await ds.query(`SELECT COUNT(*) AS "n" FROM "events" WHERE "event_id" = 'e-6'`)).toEqual([{ n: 0 }]);
    }

    expect(await undoMigrationsFrom(ds, EVENTS)).toEqual(undone);
    expect((await keyIndexes())[0]).toMatchObject({ unique: true, columns: ['idempotency_key'] });
    expect((await keyIndexes()).map((i) => i.name)).not.toContain('uq_events_idempotency_key');
    expect(await ds.query(`SELECT COUNT(*) AS "n" FROM "events"`)).toEqual([{ n: isPostgres(ds) ? '4' : 4 }]);
    await expect(event('e-7', 'key-2')).rejects.toThrow(/unique|UNIQUE/);
    expect((await ds.runMigrations()).map((m) => m.name)).toEqual(undone);
  });
});
