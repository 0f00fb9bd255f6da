import { SQL } from './hot-sql';
import { FENCE_CALL, FENCE_RUN, FenceCache, FencedError, fenceCallUnit, fenceUnit, type RunLease } from './run-fence';
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
});
