import { lockKeys, SQL } from './hot-sql';
import { finishUnit, type NewResult, type RunEnd } from './run-units';
import type { NewTranscriptRow } from './transcript-row';
import type { Op } from './unit';

/** Steps a unit answering every statement as matched, recording the ops it yielded. */
function opsOf(unit: Generator<Op, unknown, unknown>): Op[] {
  const ops: Op[] = [];
  let r = unit.next();
  while (!r.done) {
    ops.push(r.value);
    r = unit.next(r.value.kind === 'all' ? [] : r.value.kind === 'get' ? { seq: 1 } : { changes: 1 });
  }
  return ops;
}

const end: RunEnd = { status: 'completed', status_reason: null, error_code: null, retryable: null, finished_at: 5 };
const terminal = { run_id: 'r1', sequence: 3, type: 'run.completed', source: 'runner', data: {} } as NewResult;
const assistant = { conversation_id: 'c1' } as NewTranscriptRow;

describe('transaction locks in fewer round trips (PostgreSQL: one statement each)', () => {
  it('lockKeys: the advisory locks of n keys in one statement, taken in the order of its marks', () => {
    const s = lockKeys(3);
    expect(s.pg).toBe(
      'SELECT pg_advisory_xact_lock(hashtext($1)) AS "k0", pg_advisory_xact_lock(hashtext($2)) AS "k1", pg_advisory_xact_lock(hashtext($3)) AS "k2"',
    );
    expect(s.sqlite).toBe('SELECT ? AS "k0", ? AS "k1", ? AS "k2"');
    expect(lockKeys(3)).toBe(s); // one prepared statement per arity
    expect(s.reads).toEqual([]); // it reads no held rows
  });

  it("a run's end with a transcript row takes its lock in the finish statement, not in a statement of its own", () => {
    const ops = opsOf(finishUnit(terminal, end, null, assistant));
    expect(ops[0]).toMatchObject({ stmt: SQL.finishRunLocking });
    expect(ops[0].params.at(-1)).toBe('transcript:c1');
    expect(ops.map((o) => o.stmt.name)).not.toContain(SQL.lockConversation.name);
    expect(ops.at(-1)).toMatchObject({ stmt: SQL.insertTranscript });
    expect(SQL.finishRunLocking.pg).toContain('RETURNING pg_advisory_xact_lock(hashtext($8))');
  });

  it('without a transcript row the end runs the plain finish statement', () => {
    const ops = opsOf(finishUnit(terminal, end, null, null));
    expect(ops[0]).toMatchObject({ stmt: SQL.finishRun });
    expect(ops[0].params).toHaveLength(7);
  });
});
