import { Client } from 'pg';
import type { DataSource } from 'typeorm';
import { FENCE_CALL, FENCE_RUN, finishRunFenced, RunEntity } from '@libs/persistence';
import { leaseStores, type LeaseStores } from './support/leased-runs';
import { newRun } from './support/run-rows';

jest.setTimeout(120_000);

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

/**
 * How PostgreSQL finds the row of a single-run fence (run-fence.ts, docs/scale-out.md#fenced-writes):
 * by the run id, whatever the statistics say. On a `runs` table never analysed (a fresh database,
 * as every bench and a new deployment's first minutes) with many runs of one process, the planner
 * took the owner index and read every run of the process on each fence
 * (docs/benchmarks.md#postgresql-c1-the-anatomy-of-one-run). Both the custom plan of the first
 * executions and the generic plan a prepared statement keeps later are checked.
 */
describe('the single-run fences on postgres: found by run id', () => {
  const OWNED = 300;
  let stores: LeaseStores;
  let ds: DataSource;
  let client: Client;
  let running: { run_id: string; attempt: number; owner_process_id: string };

  beforeAll(async () => {
    stores = await leaseStores(['p1']);
    ds = stores.ds;
    const ended = Array.from({ length: OWNED }, (_, i) => ({
      ...newRun({ conversation_id: `conv-${i}`, status: 'completed' }),
      owner_process_id: 'p1',
      attempt: 1,
    }));
    await ds.getRepository(RunEntity).insert(ended);
    const run = { ...newRun({ conversation_id: 'conv-live' }), owner_process_id: 'p1', attempt: 2 };
    await ds.getRepository(RunEntity).insert(run);
    running = { run_id: run.run_id, attempt: 2, owner_process_id: 'p1' };
    client = new Client({ connectionString: (stores.db.config as { url: string }).url });
    await client.connect();
  });

  afterAll(async () => {
    await client?.end();
    await stores?.dispose();
  });

  const params = (l: typeof running): unknown[] => [l.run_id, l.attempt, l.owner_process_id, l.owner_process_id];

  /** The scans of the `runs` table in the plan of `sql` with `values` (EXPLAIN does not run the UPDATE). */
  async function runsScans(sql: string, values: unknown[], mode: 'auto' | 'force_generic_plan'): Promise<string[]> {
    await client.query(`SET plan_cache_mode = ${mode}`);
    const r = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (FORMAT JSON) ${sql}`, values);
    const scans: string[] = [];
    const walk = (n: PlanNode): void => {
      if (n['Relation Name'] === 'runs' && n['Node Type'] !== 'ModifyTable') {
        scans.push(`${n['Node Type']}${n['Index Name'] ? ` ${n['Index Name']}` : ''}`);
      }
      n.Plans?.forEach(walk);
    };
    walk(r.rows[0]['QUERY PLAN'][0].Plan);
    return scans;
  }

  it.each([
    ['FENCE_RUN', FENCE_RUN.pg],
    ['FENCE_CALL', FENCE_CALL.pg],
  ])(
    '%s: the runs row by runs_run_id_key, never a scan of the owner index (custom and generic plan)',
    async (_n, sql) => {
      for (const mode of ['auto', 'force_generic_plan'] as const) {
        expect(await runsScans(sql, params(running), mode)).toEqual(['Index Scan runs_run_id_key']);
      }
    },
  );

  /** finishRunFenced's parameters: the end's six columns, the run id, [the transcript key,] the lease. */
  const endParams = (l: typeof running, key?: string): unknown[] => [
    'completed',
    null,
    null,
    null,
    null,
    1,
    l.run_id,
    ...(key === undefined ? [] : [key]),
    l.attempt,
    l.owner_process_id,
    l.owner_process_id,
  ];

  it.each([true, false])(
    'the end that is its own fence (locking: %s): the runs row by runs_run_id_key (custom and generic plan)',
    async (locking) => {
      for (const mode of ['auto', 'force_generic_plan'] as const) {
        const values = endParams(running, locking ? 'transcript:conv-live' : undefined);
        expect(await runsScans(finishRunFenced(locking).pg, values, mode)).toEqual(['Index Scan runs_run_id_key']);
      }
    },
  );

  it("the end that is its own fence takes its transcript key before the run's row (the one lock order), and tests the lease", async () => {
    const holder = new Client({ connectionString: (stores.db.config as { url: string }).url });
    await holder.connect();
    try {
      await client.query('SET plan_cache_mode = auto');
      // Another transaction holds the run's row: the end waits for it, holding the key already.
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM "runs" WHERE "run_id" = $1 FOR UPDATE', [running.run_id]);
      await client.query('BEGIN');
      const pid = Number((await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid);
      const ending = client.query(finishRunFenced(true).pg, endParams(running, 'transcript:conv-live'));
      let locks: { locktype: string; granted: boolean }[] = [];
      for (let i = 0; i < 200 && !locks.some((l) => l.locktype === 'tuple' || !l.granted); i++) {
        locks = (await holder.query('SELECT "locktype", "granted" FROM pg_locks WHERE "pid" = $1', [pid])).rows as {
          locktype: string;
          granted: boolean;
        }[];
      }
      expect(locks).toContainEqual({ locktype: 'advisory', granted: true });
      expect(locks.some((l) => !l.granted)).toBe(true);
      await holder.query('ROLLBACK');
      expect((await ending).rowCount).toBe(1);
      await client.query('ROLLBACK');
      // The lease test: another attempt or owner changes nothing; an ended run neither.
      for (const l of [
        { ...running, attempt: 1 },
        { ...running, owner_process_id: 'p2' },
      ]) {
        await client.query('BEGIN');
        expect((await client.query(finishRunFenced(false).pg, endParams(l))).rowCount).toBe(0);
        await client.query('ROLLBACK');
      }
      const ended = await ds.getRepository(RunEntity).findOneByOrFail({ conversation_id: 'conv-1' });
      await client.query('BEGIN');
      const endedLease = { run_id: ended.run_id, attempt: 1, owner_process_id: 'p1' };
      expect((await client.query(finishRunFenced(false).pg, endParams(endedLease))).rowCount).toBe(0);
      await client.query('ROLLBACK');
    } finally {
      await holder.end();
    }
  });

  it('the same lease test: the lease matches; another attempt, another owner, or an ended run (FENCE_CALL) does not', async () => {
    const matched = async (sql: string, l: typeof running): Promise<number> => {
      await client.query('BEGIN');
      try {
        return (await client.query(sql, params(l))).rowCount ?? 0;
      } finally {
        await client.query('ROLLBACK');
      }
    };
    expect(await matched(FENCE_RUN.pg, running)).toBe(1);
    expect(await matched(FENCE_CALL.pg, running)).toBe(1);
    expect(await matched(FENCE_RUN.pg, { ...running, attempt: 1 })).toBe(0);
    expect(await matched(FENCE_RUN.pg, { ...running, owner_process_id: 'p2' })).toBe(0);
    const ended = await ds.getRepository(RunEntity).findOneByOrFail({ conversation_id: 'conv-0' });
    const endedLease = { run_id: ended.run_id, attempt: 1, owner_process_id: 'p1' };
    expect(await matched(FENCE_RUN.pg, endedLease)).toBe(1);
    expect(await matched(FENCE_CALL.pg, endedLease)).toBe(0);
    await ds.getRepository(RunEntity).update({ run_id: ended.run_id }, { owner_process_id: null });
    expect(await matched(FENCE_RUN.pg, endedLease)).toBe(0);
  });
});
