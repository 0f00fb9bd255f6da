import { DataSource } from 'typeorm';
import { dataSourceOptions } from '@libs/persistence';
import { STEERING_SQL } from '../../libs/persistence/src/hot/steering-sql';
import { DIALECTS, isPostgres, listIndexes, undoMigrationsFrom, type TestDatabase } from './support/databases';

jest.setTimeout(60_000);

const NAME = 'RunsConversationIndex1767720000000';

async function plan(ds: DataSource, sql: string, params: unknown[]): Promise<string> {
  if (!isPostgres(ds)) {
    const rows = await ds.query<Array<{ detail: string }>>(`EXPLAIN QUERY PLAN ${sql}`, params);
    return rows.map((r) => r.detail).join('; ');
  }
  const runner = ds.createQueryRunner();
  try {
    await runner.query('SET enable_seqscan = off');
    let n = 0;
    const rows = (await runner.query(`EXPLAIN ${sql.replace(/\?/g, () => `$${++n}`)}`, params)) as Array<{
      'QUERY PLAN': string;
    }>;
    await runner.query('RESET enable_seqscan');
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  } finally {
    await runner.release();
  }
}

describe.each(DIALECTS)('the runs of a conversation by (conversation_id, id) on %s', (_name, factory) => {
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

  it('replaces (conversation_id, status) with a partial (conversation_id, id), keeps the rows, and down restores it', async () => {
    const undone = await undoMigrationsFrom(ds, NAME);
    expect(undone[0]).toBe(NAME);
    const run = (n: number, conversation: string | null, status: string) =>
      ds.query(
        `INSERT INTO "runs" ("run_id", "event_id", "agent_id", "runner_id", "conversation_id", "workspace_id", "status", "context", "created_at")
         VALUES ('run-${n}', 'evt-${n}', 'agent-1', 'acme/echo/echo', ${conversation === null ? 'NULL' : `'${conversation}'`}, 'default', '${status}', '{}', ${n})`,
      );
    await run(1, 'conv-1', 'completed');
    await run(2, null, 'completed');
    await run(3, 'conv-1', 'running');
    const old = { name: 'idx_runs_conversation_status', unique: false, columns: ['conversation_id', 'status'] };
    expect(await listIndexes(ds, 'runs')).toContainEqual(old);

    expect((await ds.runMigrations()).map((m) => m.name)).toEqual(undone);

    const names = (await listIndexes(ds, 'runs')).map((i) => i.name);
    expect(names).not.toContain('idx_runs_conversation_status');
    expect(await listIndexes(ds, 'runs')).toContainEqual({
      name: 'idx_runs_conversation',
      unique: false,
      columns: ['conversation_id', 'id'],
    });
    const ids = await ds.query<Array<{ run_id: string }>>(
      `SELECT "run_id" FROM "runs" WHERE "conversation_id" = ? ORDER BY "id" DESC`.replace(
        '?',
        isPostgres(ds) ? '$1' : '?',
      ),
      ['conv-1'],
    );
    expect(ids.map((r) => r.run_id)).toEqual(['run-3', 'run-1']);
    expect((await ds.query<unknown[]>(`SELECT "run_id" FROM "runs"`)).length).toBe(3);

    // The run list by conversation seeks the new index, in its id order (SQLite: no temp B-tree).
    const byConversation = await plan(
      ds,
      `SELECT * FROM "runs" WHERE "conversation_id" = ? ORDER BY "id" DESC LIMIT 20`,
      ['conv-1'],
    );
    if (isPostgres(ds)) {
      expect(byConversation).toMatch(/Index Scan Backward using idx_runs_conversation/);
    } else {
      expect(byConversation).toBe('SEARCH runs USING INDEX idx_runs_conversation (conversation_id=?)');
    }
    // With a status too (the run list's filter tests it as an expression: runs.repository.ts `page`),
    // still the conversation's index, not a walk of every run of that status.
    const withStatus = await plan(
      ds,
      `SELECT * FROM "runs" WHERE "conversation_id" = ? AND COALESCE("status", '') IN (?) ORDER BY "id" DESC LIMIT 20`,
      ['conv-1', 'completed'],
    );
    expect(withStatus).toMatch(
      isPostgres(ds)
        ? /Index Scan Backward using idx_runs_conversation/
        : /^SEARCH runs USING INDEX idx_runs_conversation \(conversation_id=\?\)$/,
    );
    // The admission's situation read seeks the partial unique index of the running run.
    const ref = ['agent-1', 'default', 'conv-1', ''];
    const situation = await plan(ds, STEERING_SQL.situation.sqlite, [...ref, ...ref, 'k']);
    if (isPostgres(ds)) {
      // A seek either way (the planner picks by its costs on a small table), never a scan of runs.
      expect(situation).toMatch(
        /Index (Only )?Scan using (uq_runs_running_conversation|idx_runs_conversation) on runs r\b/,
      );
      expect(situation).not.toMatch(/Seq Scan on runs/);
    } else {
      expect(situation).toMatch(
        /SEARCH r USING INDEX uq_runs_running_conversation \(agent_id=\? AND <expr>=\? AND conversation_id=\? AND <expr>=\?\)/,
      );
      expect(situation).not.toMatch(/SCAN r\b/);
    }

    expect(await undoMigrationsFrom(ds, NAME)).toEqual(undone);
    expect(await listIndexes(ds, 'runs')).toContainEqual(old);
    expect((await listIndexes(ds, 'runs')).map((i) => i.name)).not.toContain('idx_runs_conversation');
    expect((await ds.query<unknown[]>(`SELECT "run_id" FROM "runs"`)).length).toBe(3);
    expect((await ds.runMigrations()).map((m) => m.name)).toEqual(undone);
  });
});
