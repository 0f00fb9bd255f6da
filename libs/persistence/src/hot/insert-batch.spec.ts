import { lockKeys, SQL } from './hot-sql';
import { STEERING_SQL } from './steering-sql';
import { InsertBatch, MAX_CARRIED_ROWS, MAX_ROWS_PER_INSERT, PgInsertCombiner, withInserts } from './insert-batch';
import { FENCE_CALL, FENCE_RUN, FENCE_RUNS, finishRunFenced, GROUP_KEYS } from './run-fence';
import { OUTBOX_SQL } from './outbox-units';
import type { Op, SqlValue } from './unit';

const run = (stmt: Op['stmt'], params: SqlValue[]): Op => ({ kind: 'run', stmt, params });
const resultRow = (runId: string, seq: number): SqlValue[] => [runId, seq, 'delta', '{}', null, 'runner', null, 1];

describe('InsertBatch', () => {
  it('holds batchable inserts and answers one changed row for each', () => {
    const b = new InsertBatch();
    expect(b.hold(run(SQL.insertResult, resultRow('r1', 1)))).toEqual({ changes: 1 });
    expect(b.empty).toBe(false);
  });

  it('does not hold reads, updates, or inserts whose result a unit reads', () => {
    const b = new InsertBatch();
    expect(b.hold({ kind: 'get', stmt: SQL.eventById, params: ['e'] })).toBeUndefined();
    expect(b.hold(run(SQL.finishRun, ['completed', null, null, null, null, 1, 'r1']))).toBeUndefined();
    expect(b.hold(run(SQL.insertEvent, []))).toBeUndefined();
    expect(b.hold(run(SQL.stateUpsert, ['s', 'k', '1', 1]))).toBeUndefined();
    expect(b.empty).toBe(true);
  });

  it('writes the rows of one statement as one multi-row INSERT, rows in the order they came', () => {
    const b = new InsertBatch();
    for (let seq = 1; seq <= 5; seq++) {
      b.hold(run(SQL.insertResult, resultRow('r1', seq)));
    }
    const [only, ...rest] = b.take();
    expect(rest).toEqual([]);
    expect(only.rows).toBe(5);
    expect(only.stmt.sqlite.match(/\(\?, \?, \?, \?, \?, \?, \?, \?\)/g)).toHaveLength(5);
    expect(only.stmt.pg).toContain('$40)');
    expect(only.stmt.pg).not.toContain('$41');
    expect(only.params.filter((_, i) => i % 8 === 1)).toEqual([1, 2, 3, 4, 5]);
    expect(b.empty).toBe(true);
  });

  it('keeps a single row on the single-row statement', () => {
    const b = new InsertBatch();
    b.hold(run(SQL.insertResult, resultRow('r1', 1)));
    expect(b.take()).toEqual([{ stmt: SQL.insertResult, params: resultRow('r1', 1), rows: 1, table: 'run_results' }]);
  });

  it('one statement per table, in the order the tables were first held', () => {
    const b = new InsertBatch();
    b.hold(run(SQL.insertResult, resultRow('r1', 1)));
    b.hold(run(OUTBOX_SQL.insert, new Array<SqlValue>(14).fill('x')));
    b.hold(run(SQL.insertResult, resultRow('r2', 1)));
    const taken = b.take();
    expect(taken.map((t) => [/INSERT INTO "(\w+)"/.exec(t.stmt.sqlite)?.[1], t.rows])).toEqual([
      ['run_results', 2],
      ['delivery_outbox', 1],
    ]);
  });

  it(`splits more than ${MAX_ROWS_PER_INSERT} rows into several statements, reusing their shapes`, () => {
    const b = new InsertBatch();
    for (let seq = 1; seq <= MAX_ROWS_PER_INSERT * 2 + 3; seq++) {
      b.hold(run(SQL.insertResult, resultRow('r1', seq)));
    }
    const taken = b.take();
    expect(taken.map((t) => t.rows)).toEqual([MAX_ROWS_PER_INSERT, MAX_ROWS_PER_INSERT, 3]);
    expect(taken[0].stmt).toBe(taken[1].stmt);
    expect(taken[0].stmt.name).toBe(`hot_insert_result_x${MAX_ROWS_PER_INSERT}`);
    expect(taken.flatMap((t) => t.params.filter((_, i) => i % 8 === 1))).toEqual(
      Array.from({ length: MAX_ROWS_PER_INSERT * 2 + 3 }, (_, i) => i + 1),
    );
  });

  it('forgets held rows on clear (a rolled-back group)', () => {
    const b = new InsertBatch();
    b.hold(run(SQL.insertResult, resultRow('r1', 1)));
    b.clear();
    expect(b.take()).toEqual([]);
  });
});

describe('InsertBatch.mustFlush', () => {
  it('writes held rows first for a statement that may read them, not for one that declares other tables', () => {
    const b = new InsertBatch();
    expect(b.mustFlush(SQL.eventById)).toBe(false); // nothing held
    b.hold(run(SQL.insertResult, resultRow('r1', 1)));
    expect(b.mustFlush(SQL.eventById)).toBe(true); // declares nothing: may read anything
    expect(b.mustFlush(SQL.lockConversation)).toBe(false); // reads no table
    expect(b.mustFlush(SQL.finishRun)).toBe(false); // reads runs only
    expect(b.mustFlush(FENCE_RUN)).toBe(false);
    expect(b.mustFlush(SQL.insertTranscript)).toBe(false);
    b.hold(run(SQL.insertRun, []));
    expect(b.mustFlush(SQL.finishRun)).toBe(true); // the run's own row is held
    expect(b.mustFlush(FENCE_RUN)).toBe(true);
  });
});

describe('PgInsertCombiner', () => {
  it('writes the held inserts of several tables as one statement of data-modifying CTEs, parameters renumbered in order', () => {
    const combined = withInserts([
      { name: 'a', sqlite: '', pg: 'INSERT INTO "x" ("p", "q") VALUES ($1, $2), ($3, $4)' },
      { name: 'b', sqlite: '', pg: 'INSERT INTO "y" ("p") VALUES ($1) ON CONFLICT DO NOTHING' },
      { name: 'c', sqlite: '', pg: 'INSERT INTO "z" ("p", "q") VALUES ($1, $2)' },
    ]);
    expect(combined.pg).toBe(
      'WITH w1 AS (INSERT INTO "x" ("p", "q") VALUES ($1, $2), ($3, $4)), ' +
        'w2 AS (INSERT INTO "y" ("p") VALUES ($5) ON CONFLICT DO NOTHING) ' +
        'INSERT INTO "z" ("p", "q") VALUES ($6, $7)',
    );
    expect(combined.name).toMatch(/^hot_w_[0-9a-f]{24}$/);
  });

  it('keeps one statement as it is and the parameters of combined ones in statement order', () => {
    const b = new InsertBatch();
    b.hold(run(SQL.insertResult, resultRow('r1', 1)));
    b.hold(run(SQL.insertResult, resultRow('r1', 2)));
    const c = new PgInsertCombiner();
    const [single] = c.combine(b.take());
    expect(single.stmt.name).toBe('hot_insert_result_x2');
    b.hold(run(SQL.insertResult, resultRow('r1', 3)));
    b.hold(run(OUTBOX_SQL.insert, ['o1']));
    const out = c.combine(b.take());
    expect(out).toHaveLength(1);
    expect(out[0].params).toEqual([...resultRow('r1', 3), 'o1']);
    expect(out[0].rows).toBe(2);
    expect(out[0].stmt.pg.startsWith('WITH w1 AS (INSERT INTO "run_results"')).toBe(true);
    // A table's chunks stay separate statements (ids in order); other tables join the last one.
    for (let seq = 10; seq < 10 + MAX_ROWS_PER_INSERT + 1; seq++) {
      b.hold(run(SQL.insertResult, resultRow('r2', seq)));
    }
    b.hold(run(OUTBOX_SQL.insert, ['o3']));
    const chunked = c.combine(b.take());
    expect(chunked.map((h) => h.rows)).toEqual([MAX_ROWS_PER_INSERT, 2]);
    expect(chunked[0].stmt.name).toBe(`hot_insert_result_x${MAX_ROWS_PER_INSERT}`);
    // The same shape again: the same prepared statement.
    b.hold(run(SQL.insertResult, resultRow('r1', 4)));
    b.hold(run(OUTBOX_SQL.insert, ['o2']));
    expect(c.combine(b.take())[0].stmt).toBe(out[0].stmt);
  });
});

describe('PgInsertCombiner.carrier: held inserts riding on the next statement', () => {
  const held = (...ops: Op[]) => {
    const b = new InsertBatch();
    ops.forEach((op) => b.hold(op));
    return b.pending();
  };

  it('puts the held inserts as CTEs before the statement, its parameters last; the same shape is the same statement', () => {
    const c = new PgInsertCombiner();
    const h = held(run(SQL.insertResult, resultRow('r1', 1)), run(OUTBOX_SQL.insert, ['o1']));
    const s = c.carrier(h, SQL.insertTranscript)!;
    expect(s.pg.startsWith('WITH w1 AS (INSERT INTO "run_results"')).toBe(true);
    expect(s.pg).toContain('w2 AS (INSERT INTO "delivery_outbox"');
    // The carrier is the main statement: its RETURNING is the statement's answer.
    const main = s.pg.slice(s.pg.lastIndexOf(') INSERT INTO "transcript"') + 2);
    expect(main.startsWith('INSERT INTO "transcript"')).toBe(true);
    expect(main).toContain('RETURNING "seq"');
    // Parameters: the held rows' first, then the carrier's, renumbered after them.
    const marks = (pg: string) => [...pg.matchAll(/\$(\d+)/g)].map((m) => Number(m[1]));
    const before = h.reduce((n, x) => n + Math.max(...marks(x.stmt.pg)), 0);
    expect(Math.min(...marks(main))).toBe(before + 1);
    expect(Math.max(...marks(s.pg))).toBe(before + Math.max(...marks(SQL.insertTranscript.pg)));
    expect(c.carrier(h, SQL.insertTranscript)).toBe(s);
    // A read (SELECT) carries them too.
    expect(c.carrier(h, STEERING_SQL.queuedOfRunAndWaiting)!.pg).toMatch(/\) SELECT /);
  });

  it('is null without held rows, and for statements that must stay alone', () => {
    const c = new PgInsertCombiner();
    expect(c.carrier([], SQL.insertTranscript)).toBeNull();
    const h = held(run(SQL.insertResult, resultRow('r1', 1)));
    for (const s of [
      FENCE_RUN, // a fence
      FENCE_CALL, // a fence, its run row in the lock order
      FENCE_RUNS, // locks run rows, has a WITH of its own
      GROUP_KEYS, // advisory keys
      lockKeys(2),
      SQL.lockConversation,
      finishRunFenced(true), // its key and run row, a lease
      SQL.finishRunLocking, // a run row and a key (lockRun)
      STEERING_SQL.startQueuedRun, // moves a lease
      SQL.insertResult, // a batchable insert (held itself)
      SQL.finishRun, // declares no tables it reads: may read any held row
    ]) {
      expect([s.name, c.carrier(h, s)]).toEqual([s.name, null]);
    }
  });

  it('is null for more than MAX_CARRIED_ROWS held rows (a large group writes them as before)', () => {
    const c = new PgInsertCombiner();
    const rows = (n: number) => Array.from({ length: n }, (_, i) => run(SQL.insertResult, resultRow('r1', i)));
    expect(c.carrier(held(...rows(MAX_CARRIED_ROWS)), SQL.insertTranscript)).not.toBeNull();
    expect(
      c.carrier(held(...rows(MAX_CARRIED_ROWS - 1), run(OUTBOX_SQL.insert, ['o1'])), SQL.insertTranscript),
    ).not.toBeNull();
    expect(c.carrier(held(...rows(MAX_CARRIED_ROWS + 1)), SQL.insertTranscript)).toBeNull();
    expect(c.carrier(held(...rows(MAX_CARRIED_ROWS), run(OUTBOX_SQL.insert, ['o1'])), SQL.insertTranscript)).toBeNull();
  });

  it('is null when a table has two chunks (their order needs statements of their own)', () => {
    const c = new PgInsertCombiner();
    const ops = Array.from({ length: MAX_ROWS_PER_INSERT + 1 }, (_, i) => run(SQL.insertResult, resultRow('r1', i)));
    const h = held(...ops);
    expect(h).toHaveLength(2);
    expect(c.carrier(h, SQL.insertTranscript)).toBeNull();
  });
});
