import { lockKeys, SQL } from './hot-sql';
import { LEASE_SQL } from './run-takeover';
import { STEERING_SQL } from './steering-sql';
import {
  FENCE_CALL,
  FENCE_RUN,
  FENCE_RUNS,
  FenceCache,
  GROUP_KEYS,
  GROUP_LOCKS,
  FencedError,
  fenceCallUnit,
  fenceUnit,
  finishRunFenced,
  type RunLease,
} from './run-fence';
import type { Op } from './unit';

const lease: RunLease = { run_id: 'r1', attempt: 2, owner_process_id: 'p1' };
const fenceOp = (l: RunLease): Op => ({
  kind: 'run',
  stmt: FENCE_RUN,
  params: [l.run_id, l.attempt, l.owner_process_id, l.owner_process_id],
});

/** Steps a unit with the answers a driver would give, recording the ops it yielded. */
function drive(unit: Generator<Op, unknown, unknown>, answer: (op: Op) => unknown): { ops: Op[]; out: unknown } {
  const ops: Op[] = [];
  let r = unit.next();
  while (!r.done) {
    ops.push(r.value);
    r = unit.next(answer(r.value));
  }
  return { ops, out: r.value };
}

describe('the fence of a run write (docs/scale-out.md#fenced-writes)', () => {
  it('a unit without a lease yields nothing (unfenced); with one, the fence names run, attempt and owner', () => {
    expect(drive(fenceUnit(null), () => ({ changes: 1 })).ops).toEqual([]);
    expect(drive(fenceUnit(lease), () => ({ changes: 1 })).ops).toEqual([fenceOp(lease)]);
  });

  it('a fence that matches no row fails the unit with FencedError naming the lease', () => {
    expect(() => drive(fenceUnit(lease), () => ({ changes: 0 }))).toThrow(FencedError);
    try {
      drive(fenceUnit(lease), () => ({ changes: 0 }));
    } catch (e) {
      expect(e).toMatchObject({ code: 'host.fenced', lease });
    }
  });

  it('the cache answers a fence already matched in this transaction; a miss, another lease or a new transaction runs it', () => {
    const cache = new FenceCache();
    expect(cache.answer(fenceOp(lease))).toBeUndefined();
    cache.ran(fenceOp(lease), { changes: 0 });
    expect(cache.answer(fenceOp(lease))).toBeUndefined();
    cache.ran(fenceOp(lease), { changes: 1 });
    expect(cache.answer(fenceOp(lease))).toEqual({ changes: 1 });
    expect(cache.answer(fenceOp({ ...lease, attempt: 3 }))).toBeUndefined();
    // Only fences are cached.
    const other: Op = { kind: 'run', stmt: SQL.finishRun, params: ['r1'] };
    cache.ran(other, { changes: 1 });
    expect(cache.answer(other)).toBeUndefined();
    cache.reset();
    expect(cache.answer(fenceOp(lease))).toBeUndefined();
  });

  it('a host API write is fenced by FENCE_CALL (the lease and a running run); refused, it throws FencedError', () => {
    const callOp: Op = { ...fenceOp(lease), stmt: FENCE_CALL };
    expect(drive(fenceCallUnit(undefined), () => ({ changes: 1 })).ops).toEqual([]);
    expect(drive(fenceCallUnit(lease), () => ({ changes: 1 })).ops).toEqual([callOp]);
    expect(FENCE_CALL.pg).toContain(`"status" = 'running'`);
    expect(FENCE_CALL.sqlite).toContain(`"status" = 'running'`);
    expect(() => drive(fenceCallUnit(lease), () => ({ changes: 0 }))).toThrow(FencedError);
  });

  it('the cache keeps fences per statement: a matched FENCE_RUN does not answer FENCE_CALL (it checks the status too)', () => {
    const cache = new FenceCache();
    const callOp: Op = { ...fenceOp(lease), stmt: FENCE_CALL };
    cache.ran(fenceOp(lease), { changes: 1 });
    expect(cache.answer(callOp)).toBeUndefined();
    cache.ran(callOp, { changes: 1 });
    expect(cache.answer(callOp)).toEqual({ changes: 1 });
  });

  it('the fences opening a group are one statement (FENCE_RUNS) for two or more distinct leases and no other lock', () => {
    const cache = new FenceCache();
    const b: RunLease = { run_id: 'r2', attempt: 1, owner_process_id: 'p1' };
    const read: Op = { kind: 'get', stmt: SQL.runStatus, params: ['r3'] };
    expect(cache.prefetch([fenceOp(lease), fenceOp(lease), read])).toBeNull();
    const op = cache.prefetch([fenceOp(lease), read, fenceOp(b), fenceOp(lease)])!;
    expect(op).toMatchObject({ kind: 'all', stmt: FENCE_RUNS });
    expect(JSON.parse(op.params[0] as string)).toEqual([lease, b]);
  });

  it('with other locks, the group takes every lock its units open with or declare as one statement (GROUP_LOCKS)', () => {
    const cache = new FenceCache();
    const finish: Op = { kind: 'run', stmt: SQL.finishRun, params: [1, 2, 3, 4, 5, 6, 'r3'] };
    const call: Op = { ...fenceOp({ ...lease, run_id: 'r4' }), stmt: FENCE_CALL };
    const conv: Op = { kind: 'get', stmt: SQL.lockConversation, params: ['conversation:c'] };
    const declared: Op = { ...fenceOp(lease), locks: { keys: ['transcript:c'], runs: ['r5'] } };
    // One lock alone is its own statement.
    expect(cache.prefetch([call])).toBeNull();
    expect(cache.prefetch([conv])).toBeNull();
    const op = cache.prefetch([declared, finish, call, conv])!;
    expect(op).toMatchObject({ kind: 'all', stmt: GROUP_LOCKS });
    const [runs, leases, keys] = op.params.map((p) => JSON.parse(p as string) as unknown);
    expect(runs).toEqual(['r1', 'r5', 'r3', 'r4']);
    expect(leases).toEqual([lease]);
    expect(keys).toEqual(['transcript:c', 'conversation:c']);
    // Its answer: the leases matched are held, the keys taken answer their lock ops; FENCE_CALL still runs.
    expect(cache.answer(conv)).toBeUndefined();
    cache.prefetched([{ keys: 2, rows: 4, fenced: [lease] }]);
    expect(cache.answer(fenceOp(lease))).toEqual({ changes: 1 });
    expect(cache.answer(conv)).toEqual({ changes: 1 });
    expect(cache.answer({ ...conv, params: ['conversation:other'] })).toBeUndefined();
    expect(cache.answer(call)).toBeUndefined();
    cache.reset();
    expect(cache.answer(conv)).toBeUndefined();
  });

  it('a group whose units take advisory keys and no run row takes them alone (GROUP_KEYS), by lock id', () => {
    const cache = new FenceCache();
    const conv: Op = { kind: 'get', stmt: SQL.lockConversation, params: ['conversation:c'] };
    const admission: Op = { kind: 'get', stmt: lockKeys(2), params: ['conversation:d', 'transcript:d'] };
    const declared: Op = { kind: 'get', stmt: SQL.eventById, params: ['e'], locks: { keys: ['transcript:e'] } };
    // One key alone is its own statement.
    expect(cache.prefetch([conv])).toBeNull();
    const op = cache.prefetch([admission, conv, declared])!;
    expect(op).toMatchObject({ kind: 'get', stmt: GROUP_KEYS });
    expect(JSON.parse(op.params[0] as string)).toEqual([
      'conversation:d',
      'transcript:d',
      'conversation:c',
      'transcript:e',
    ]);
    expect(GROUP_KEYS.pg).toContain('ORDER BY 1 OFFSET 0');
    expect(GROUP_KEYS.pg).not.toContain('"runs"');
    // Its one row: every key taken answers its lock op; another key still runs.
    expect(cache.answer(admission)).toBeUndefined();
    cache.prefetched({ keys: 4 });
    expect(cache.answer(admission)).toEqual({ changes: 1 });
    expect(cache.answer(conv)).toEqual({ changes: 1 });
    expect(cache.answer({ ...conv, params: ['conversation:other'] })).toBeUndefined();
    expect(cache.answer(fenceOp(lease))).toBeUndefined();
    cache.reset();
    expect(cache.answer(conv)).toBeUndefined();
    // A run row among the locks (a fence, a declared row): GROUP_LOCKS as before.
    expect(cache.prefetch([admission, fenceOp(lease)])).toMatchObject({ stmt: GROUP_LOCKS });
    cache.reset();
    expect(cache.prefetch([{ ...admission, locks: { runs: ['r9'] } }])).toMatchObject({ stmt: GROUP_LOCKS });
  });

  it("a run's end that is its own fence is the group's lock statement when the group's other units only fence its lease", () => {
    const endOp = (l: RunLease, locks?: Op['locks']): Op => ({
      kind: 'run',
      stmt: finishRunFenced(true),
      params: [1, 2, 3, 4, 5, 6, l.run_id, 'transcript:c', l.attempt, l.owner_process_id, l.owner_process_id],
      ...(locks ? { locks } : {}),
    });
    const cache = new FenceCache();
    const end = endOp(lease);
    // Alone, or after its run's last results: run first, its answer kept for its unit.
    expect(cache.prefetch([end])).toBe(end);
    cache.reset();
    expect(cache.prefetch([fenceOp(lease), fenceOp(lease), end])).toBe(end);
    cache.prefetched({ changes: 1 });
    expect(cache.answer(fenceOp(lease))).toEqual({ changes: 1 });
    expect(cache.answer(end)).toEqual({ changes: 1 });
    // Answered once: the same op again runs.
    expect(cache.answer(end)).toBeUndefined();
    // Nothing changed (fenced, or ended): its unit gets 0, the results' fences run themselves.
    cache.reset();
    expect(cache.prefetch([fenceOp(lease), end])).toBe(end);
    cache.prefetched({ changes: 0 });
    expect(cache.answer(fenceOp(lease))).toBeUndefined();
    expect(cache.answer(end)).toEqual({ changes: 0 });
    // Another lease, another lock, a declared lock, or two ends: the group's locks as before.
    const other: RunLease = { ...lease, run_id: 'r2' };
    const conv: Op = { kind: 'get', stmt: SQL.lockConversation, params: ['conversation:c'] };
    for (const group of [
      [fenceOp(other), end],
      [end, conv],
      [endOp(lease, { runs: ['r9'] })],
      [end, endOp(other)],
      [{ ...fenceOp(lease), locks: { keys: ['k'] } }, end],
    ]) {
      cache.reset();
      expect(cache.prefetch(group)).toMatchObject({ stmt: GROUP_LOCKS });
    }
  });

  it('GROUP_LOCKS takes the advisory locks (by lock id) before the run rows (by run id), then fences the leases', () => {
    const pg = GROUP_LOCKS.pg;
    expect(pg.indexOf('"keys"')).toBeLessThan(pg.indexOf('AS "rows"'));
    expect(pg).toContain('ORDER BY 1 OFFSET 0');
  });

  it.each([
    ['GROUP_LOCKS', GROUP_LOCKS],
    ['FENCE_RUNS', FENCE_RUNS],
  ])(
    '%s locks each run by its run id, over the distinct run ids in order, before its fence (test/integration/fence-plan.int-spec.ts proves the plan)',
    (_n, s) => {
      const pg = s.pg.replace(/\s+/g, ' ');
      expect(pg).toMatch(/\(SELECT DISTINCT .*? ORDER BY 1\) AS "ids" CROSS JOIN LATERAL \(SELECT /);
      expect(pg).toContain('WHERE r."run_id" = "ids"."id" FOR UPDATE OF r) AS "l"');
      expect(pg.indexOf('FOR UPDATE OF r')).toBeLessThan(pg.indexOf('UPDATE "runs" AS r SET'));
      // Each lease tested on the row as locked (the "locked" CTE), not on the row its snapshot saw.
      expect(pg).toContain('FROM "locked" l JOIN');
      expect(pg).toContain('l."attempt" = f."attempt" AND l."owner_process_id" = f."owner_process_id"');
    },
  );

  it('a lease the group fence matched is held (its unit runs no fence); one it missed runs its own FENCE_RUN', () => {
    const cache = new FenceCache();
    const b: RunLease = { run_id: 'r2', attempt: 1, owner_process_id: 'p1' };
    // PostgreSQL returns the attempt as a number, SQLite too; a bigint would come as text.
    cache.prefetched([{ ...lease, attempt: String(lease.attempt) }]);
    expect(cache.answer(fenceOp(lease))).toEqual({ changes: 1 });
    expect(cache.answer(fenceOp(b))).toBeUndefined();
    expect(cache.answer({ ...fenceOp(lease), stmt: FENCE_CALL })).toBeUndefined();
    // Held already: not fenced again by the next group statement.
    expect(cache.prefetch([fenceOp(lease), fenceOp(b)])).toBeNull();
  });

  it('a statement moving a lease (a claim, a takeover) drops the fences held: the next runs again', () => {
    expect(STEERING_SQL.startQueuedRun.relets).toBe(true);
    expect(LEASE_SQL.bumpAttempt.relets).toBe(true);
    const cache = new FenceCache();
    cache.prefetched([lease]);
    cache.ran({ kind: 'get', stmt: STEERING_SQL.startQueuedRun, params: [] }, { attempt: 3 });
    expect(cache.answer(fenceOp(lease))).toBeUndefined();
    cache.ran(fenceOp(lease), { changes: 1 });
    cache.ran({ kind: 'run', stmt: LEASE_SQL.bumpAttempt, params: ['r1'] }, { changes: 1 });
    expect(cache.answer(fenceOp(lease))).toBeUndefined();
  });
});
