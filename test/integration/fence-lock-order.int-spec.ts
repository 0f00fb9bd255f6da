import { Client } from 'pg';
import { FENCE_RUNS, type RunLease } from '@libs/persistence';
import { leasedRuns, leaseStores, unlessDeadlock, type LeaseStores } from './support/leased-runs';

jest.setTimeout(120_000);

/**
 * The lock order of the group fence (FENCE_RUNS, docs/scale-out.md#fenced-writes) on PostgreSQL:
 * two processes whose group commits fence each other's runs (host API writes at a non-owner) must
 * lock those run rows in one fixed order, whatever order their groups list the runs in — or they
 * deadlock (40P01), PostgreSQL aborts one and its writer replays the group unit by unit. Two
 * connections run the statement itself over the same runs in opposite input orders, concurrently,
 * many rounds, each in a transaction that holds the locks until COMMIT, as the writer's does.
 */
describe('the group fence on postgres: one lock order', () => {
  const RUNS = 64;
  const ROUNDS = 150;
  let stores: LeaseStores;
  let leases: RunLease[];

  beforeAll(async () => {
    stores = await leaseStores(['p1', 'p2']);
    leases = await leasedRuns(stores.ds, RUNS, ['p1', 'p2']);
  });

  afterAll(async () => {
    await stores?.dispose();
  });

  it('two connections fencing the same runs in opposite orders, concurrently: no deadlock, every lease matched', async () => {
    const url = (stores.db.config as { url: string }).url;
    const a = new Client({ connectionString: url });
    const b = new Client({ connectionString: url });
    await Promise.all([a.connect(), b.connect()]);
    const deadlocks: string[] = [];
    const matched: number[] = [];
    /** One group's fence in its own transaction; a deadlock is recorded (and rolled back), not thrown. */
    const fence = (c: Client, order: RunLease[]): Promise<boolean> =>
      unlessDeadlock(deadlocks, async () => {
        await c.query('BEGIN');
        try {
          const r = await c.query(FENCE_RUNS.pg, [JSON.stringify(order)]);
          matched.push(r.rowCount ?? 0);
          await c.query('COMMIT');
        } catch (e) {
          await c.query('ROLLBACK');
          throw e;
        }
      });
    try {
      const reversed = [...leases].reverse();
      for (let round = 0; round < ROUNDS; round++) {
        // Overlapping halves too: a group rarely carries exactly the other's runs.
        const mine = round % 2 === 0 ? leases : leases.slice(RUNS / 4);
        const theirs = round % 2 === 0 ? reversed : reversed.slice(RUNS / 4);
        await Promise.all([fence(a, mine), fence(b, theirs)]);
      }
    } finally {
      await Promise.allSettled([a.end(), b.end()]);
    }
    expect(deadlocks).toEqual([]);
    expect(matched).toHaveLength(ROUNDS * 2);
    expect(new Set(matched)).toEqual(new Set([RUNS, RUNS - RUNS / 4]));
  });
});
