import { lockKeys, SQL } from './hot-sql';
import { startWaitingUnit } from './admission-unit';
import { FENCE_RUN } from './run-fence';
import { finishUnit, type NewResult, type NewRun, type RunEnd } from './run-units';
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
  it('lockKeys: the advisory locks of n keys in one statement, taken in the one lock order (by lock id, each once)', () => {
    const s = lockKeys(3);
    expect(s.pg).toBe(
      'SELECT count(pg_advisory_xact_lock(s."h")) AS "k" FROM (SELECT DISTINCT hashtext(k) AS "h" FROM unnest(ARRAY[$1, $2, $3]::text[]) AS k ORDER BY 1 OFFSET 0) AS s',
    );
    expect(s.sqlite).toBe('SELECT ? AS "k0", ? AS "k1", ? AS "k2"');
    expect(lockKeys(3)).toBe(s); // one prepared statement per arity
    expect(s.reads).toEqual([]); // it reads no held rows
    expect(s.advisory).toBe(true); // a group takes its keys with its other locks
  });

  it("a run's end with a transcript row takes its lock in the finish statement, not in a statement of its own", () => {
    const ops = opsOf(finishUnit(terminal, end, null, assistant));
    expect(ops[0]).toMatchObject({ stmt: SQL.finishRunLocking });
    expect(ops[0].params.at(-1)).toBe('transcript:c1');
    expect(ops.map((o) => o.stmt.name)).not.toContain(SQL.lockConversation.name);
    expect(ops.at(-1)).toMatchObject({ stmt: SQL.insertTranscript });
    expect(SQL.finishRunLocking.pg).toContain('RETURNING pg_advisory_xact_lock(hashtext($8))');
  });

  it("a leased end with a transcript row declares its transcript lock on its fence (Op.locks: taken with the group's)", () => {
    const lease = { run_id: 'r1', attempt: 1, owner_process_id: 'p1' };
    const ops = opsOf(finishUnit(terminal, end, null, assistant, [], lease));
    expect(ops[0]).toMatchObject({ stmt: FENCE_RUN, locks: { keys: ['transcript:c1'] } });
    expect(opsOf(finishUnit(terminal, end, null, null, [], lease))[0].locks).toBeUndefined();
    // Unleased, the finish statement itself names its run row and its transcript key.
    expect([SQL.finishRunLocking.lockRun, SQL.finishRunLocking.lockKey]).toEqual([6, 7]);
  });

  it("a waiting run's start takes the conversation's and the workspace's locks as its first statement, declaring its run row", () => {
    const conversation = {
      key: '["a",null,"c",""]',
      agent_id: 'a',
      runner_id: 'x/y/z',
      workspace_id: null,
      conversation_id: 'c',
      thread_id: null,
    };
    const start = { conversation, item_id: 1, run_id: 'r9', run: {} as NewRun };
    const [first] = opsOf(startWaitingUnit({ ...start, active_quota: { workspace_id: 'w', max: 2 } }));
    expect(first).toMatchObject({ stmt: lockKeys(2), locks: { runs: ['r9'] } });
    expect(first.params).toEqual([`conversation:${conversation.key}`, 'workspace-active:w']);
    const [alone] = opsOf(startWaitingUnit(start));
    expect(alone).toMatchObject({ stmt: SQL.lockConversation, params: [`conversation:${conversation.key}`] });
  });

  it('without a transcript row the end runs the plain finish statement', () => {
    const ops = opsOf(finishUnit(terminal, end, null, null));
    expect(ops[0]).toMatchObject({ stmt: SQL.finishRun });
    expect(ops[0].params).toHaveLength(7);
  });
});
