import { lockKeys, SQL } from './hot-sql';
import { startWaitingUnit } from './admission-unit';
import { FENCE_RUN, FencedError, finishRunFenced } from './run-fence';
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

  it("a leased end is its own fence: one statement naming its run row, its transcript key and its lease (taken with the group's)", () => {
    const lease = { run_id: 'r1', attempt: 1, owner_process_id: 'p1' };
    const ops = opsOf(finishUnit(terminal, end, null, assistant, [], lease));
    const locking = finishRunFenced(true);
    expect(ops[0]).toMatchObject({ stmt: locking });
    expect(ops.map((o) => o.stmt)).not.toContain(FENCE_RUN);
    expect([locking.lockRun, locking.lockKey, locking.lease]).toEqual([6, 7, [6, 8, 9]]);
    expect([6, 7, 8, 9].map((i) => ops[0].params[i])).toEqual(['r1', 'transcript:c1', 1, 'p1']);
    // The key's lock is taken before the scan locks the row (the one lock order).
    expect(locking.pg).toContain(
      '"run_id" = (SELECT CAST($7 AS text) FROM (SELECT pg_advisory_xact_lock(hashtext($8))) AS "l")',
    );
    const [plain] = opsOf(finishUnit(terminal, end, null, null, [], lease));
    expect(plain).toMatchObject({
      stmt: finishRunFenced(false),
      params: [...ops[0].params.slice(0, 7), 1, 'p1', 'p1'],
    });
    expect(plain.locks).toBeUndefined();
    // Unleased, the finish statement itself names its run row and its transcript key.
    expect([SQL.finishRunLocking.lockRun, SQL.finishRunLocking.lockKey]).toEqual([6, 7]);
  });

  it('a leased end that changed nothing runs the fence to tell fenced (FencedError) from already ended (false)', () => {
    const lease = { run_id: 'r1', attempt: 1, owner_process_id: 'p1' };
    const answer = (fence: number) => (op: Op) => ({ changes: op.stmt === FENCE_RUN ? fence : 0 });
    const ended = finishUnit(terminal, end, null, assistant, [], lease);
    const ops: Op[] = [];
    let r = ended.next();
    while (!r.done) {
      ops.push(r.value);
      r = ended.next(answer(1)(r.value));
    }
    expect(r.value).toBe(false);
    expect(ops.map((o) => o.stmt)).toEqual([finishRunFenced(true), FENCE_RUN]);
    const fenced = finishUnit(terminal, end, null, assistant, [], lease);
    expect(() => {
      let f = fenced.next();
      while (!f.done) {
        f = fenced.next(answer(0)(f.value));
      }
    }).toThrow(FencedError);
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
