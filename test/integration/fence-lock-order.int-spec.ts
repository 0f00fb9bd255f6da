import type { TestingModule } from '@nestjs/testing';
import { Client, DatabaseError } from 'pg';
import { DataSource } from 'typeorm';
import { ENTITIES, FENCE_RUNS, HostProcessesRepository, HotStore, RunEntity, type RunLease } from '@libs/persistence';
import { postgresDatabase, storesModule, type TestDatabase } from './support/databases';
import { newRun } from './support/run-rows';

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
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let leases: RunLease[];

  beforeAll(async () => {
    db = await postgresDatabase();
    moduleRef = await storesModule(db, [HostProcessesRepository]);
    ds = moduleRef.get(DataSource);
    await moduleRef.get(HotStore).drain();
    for (const entity of ENTITIES) {
      await ds.getRepository(entity).clear();
    }
    const processes = moduleRef.get(HostProcessesRepository);
    for (const id of ['p1', 'p2']) {
      await processes.register({ id, instance: id, http_address: 'h:1', grpc_address: 'h:2' });
    }
    leases = [];
    for (let i = 0; i < RUNS; i++) {
      const owner = i % 2 === 0 ? 'p1' : 'p2';
      const run = { ...newRun({ conversation_id: `conv-${i}` }), owner_process_id: owner, attempt: 1 };
      await ds.getRepository(RunEntity).insert(run);
      leases.push({ run_id: run.run_id, attempt: 1, owner_process_id: owner });
    }
  });

  afterAll(async () => {
    await moduleRef?.close();
    await db?.dispose();
  });

  it('two connections fencing the same runs in opposite orders, concurrently: no deadlock, every lease matched', async () => {
    const url = (db.config as { url: string }).url;
    const a = new Client({ connectionString: url });
    const b = new Client({ connectionString: url });
    await Promise.all([a.connect(), b.connect()]);
    const deadlocks: string[] = [];
    const matched: number[] = [];
    /** One group's fence in its own transaction; a deadlock is recorded (and rolled back), not thrown. */
    const fence = async (c: Client, order: RunLease[]): Promise<void> => {
      await c.query('BEGIN');
      try {
        const r = await c.query(FENCE_RUNS.pg, [JSON.stringify(order)]);
        matched.push(r.rowCount ?? 0);
        await c.query('COMMIT');
      } catch (e) {
        await c.query('ROLLBACK');
        if (e instanceof DatabaseError && e.code === '40P01') {
          deadlocks.push(e.message);
          return;
        }
        throw e;
      }
    };
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
