import { Client } from 'pg';
import type { DataSource } from 'typeorm';
import { FENCE_CALL, FENCE_RUN, FENCE_RUNS, finishRunFenced, RunEntity, type RunLease } from '@libs/persistence';
import { GROUP_LOCKS } from '../../libs/persistence/src/hot/run-fence';
import { leaseStores, type LeaseStores } from './support/leased-runs';
import { newRun } from './support/run-rows';

jest.setTimeout(120_000);

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

/** The scans of the `runs` table in the plan of `sql` with `values` (EXPLAIN runs nothing). */
async function runsScans(
  client: Client,
  sql: string,
  values: unknown[],
  mode: 'auto' | 'force_generic_plan',
): Promise<string[]> {
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

  it.each([
    ['FENCE_RUN', FENCE_RUN.pg],
    ['FENCE_CALL', FENCE_CALL.pg],
  ])(
    '%s: the runs row by runs_run_id_key, never a scan of the owner index (custom and generic plan)',
    async (_n, sql) => {
      for (const mode of ['auto', 'force_generic_plan'] as const) {
        expect(await runsScans(client, sql, params(running), mode)).toEqual(['Index Scan runs_run_id_key']);
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
        expect(await runsScans(client, finishRunFenced(locking).pg, values, mode)).toEqual([
          'Index Scan runs_run_id_key',
        ]);
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

/**
 * How PostgreSQL finds the rows of the statements that lock several runs (run-fence.ts FENCE_RUNS
 * and GROUP_LOCKS, docs/scale-out.md#one-lock-order): each run by its run id, one lookup per run in
 * run-id order, whatever the statistics say. On a `runs` table of 2,000 runs never analysed, their
 * earlier forms (a join of the ids with `runs`, locked above a sort) were planned as a Seq Scan of
 * every run and a hash join — twice in GROUP_LOCKS, once in FENCE_RUNS — on every multi-run group.
 */
describe('the multi-run lock statements on postgres: each run by run id, in run-id order', () => {
  const RUNS = 2_000;
  const LIVE = 8;
  let stores: LeaseStores;
  let ds: DataSource;
  let client: Client;
  let url: string;
  /** The live runs' leases, sorted by run id. */
  let live: RunLease[];

  beforeAll(async () => {
    stores = await leaseStores(['p1', 'p2']);
    ds = stores.ds;
    url = (stores.db.config as { url: string }).url;
    client = new Client({ connectionString: url });
    await client.connect();
    // A fresh table stays unanalysed for the whole suite: autovacuum's analyse would end it.
    await client.query('ALTER TABLE "runs" SET (autovacuum_enabled = false)');
    for (let i = 0; i < RUNS - LIVE; i += 500) {
      const ended = Array.from({ length: Math.min(500, RUNS - LIVE - i) }, (_, j) => ({
        ...newRun({ conversation_id: `ended-${i + j}`, status: 'completed' }),
        owner_process_id: (i + j) % 2 === 0 ? 'p1' : 'p2',
        attempt: 1,
      }));
      await ds.getRepository(RunEntity).insert(ended);
    }
    live = [];
    for (let i = 0; i < LIVE; i++) {
      const run = {
        ...newRun({ conversation_id: `live-${i}` }),
        owner_process_id: i % 2 === 0 ? 'p1' : 'p2',
        attempt: 2,
      };
      await ds.getRepository(RunEntity).insert(run);
      live.push({ run_id: run.run_id, attempt: 2, owner_process_id: run.owner_process_id });
    }
    live.sort((a, b) => (a.run_id < b.run_id ? -1 : 1));
  });

  afterAll(async () => {
    await client?.end();
    await stores?.dispose();
  });

  const json = (v: unknown): string => JSON.stringify(v);
  /** FENCE_RUNS' one parameter: the leases (here in reverse run-id order, a stale attempt among them). */
  const fenceRunsParams = (): unknown[] => [json([...live].reverse().concat({ ...live[0], attempt: 1 }))];
  /** GROUP_LOCKS' parameters: the run ids, the leases among them, the advisory keys. */
  const groupParams = (ids = live.map((l) => l.run_id).reverse(), leases = live.slice(0, 5)): unknown[] => [
    json(ids),
    json(leases),
    json(['transcript:live-1', 'conversation:live-0']),
  ];

  it('the table is the fresh one of the case: 2,000 runs, never analysed', async () => {
    const { rows } = await client.query<{ n: string; reltuples: number; analysed: string | null }>(
      `SELECT (SELECT count(*) FROM "runs") AS "n", c."reltuples",
         COALESCE(s."last_analyze", s."last_autoanalyze")::text AS "analysed"
       FROM pg_class c JOIN pg_stat_user_tables s ON s."relid" = c."oid" WHERE c."relname" = 'runs'`,
    );
    expect(rows).toEqual([{ n: String(RUNS), reltuples: -1, analysed: null }]);
  });

  it.each([
    ['FENCE_RUNS', () => FENCE_RUNS.pg, fenceRunsParams],
    ['GROUP_LOCKS', () => GROUP_LOCKS.pg, () => groupParams()],
  ])(
    '%s: every runs row by runs_run_id_key, no Seq Scan of runs (custom and generic plan)',
    async (_n, sql, values) => {
      for (const mode of ['auto', 'force_generic_plan'] as const) {
        const scans = await runsScans(client, sql(), values(), mode);
        // The lock step and the fence's update: each a lookup by run id.
        expect(scans).toEqual(['Index Scan runs_run_id_key', 'Index Scan runs_run_id_key']);
      }
    },
  );

  /** Runs `sql` in a transaction rolled back after. */
  async function once<T>(sql: string, values: unknown[]): Promise<T[]> {
    await client.query('SET plan_cache_mode = auto');
    await client.query('BEGIN');
    try {
      return (await client.query(sql, values)).rows as T[];
    } finally {
      await client.query('ROLLBACK');
    }
  }
  const byRun = (a: RunLease, b: RunLease): number => (a.run_id < b.run_id ? -1 : 1);

  it("FENCE_RUNS answers the leases matched: not a stale attempt, another owner's, a dead owner's or an unknown run's", async () => {
    const leases = [
      ...live.slice(0, 3),
      { ...live[3], attempt: 1 },
      { ...live[4], owner_process_id: live[4].owner_process_id === 'p1' ? 'p2' : 'p1' },
      { run_id: 'run_unknown', attempt: 1, owner_process_id: 'p1' },
    ];
    const rows = await once<RunLease>(FENCE_RUNS.pg, [json(leases.reverse())]);
    expect(rows.sort(byRun)).toEqual(live.slice(0, 3));
    await ds.getRepository(RunEntity).update({ run_id: live[5].run_id }, { owner_process_id: 'p3' });
    try {
      expect(await once(FENCE_RUNS.pg, [json([{ ...live[5], owner_process_id: 'p3' }])])).toEqual([]);
    } finally {
      await ds
        .getRepository(RunEntity)
        .update({ run_id: live[5].run_id }, { owner_process_id: live[5].owner_process_id });
    }
  });

  it('GROUP_LOCKS answers its keys, the rows it locked (each once) and the leases matched', async () => {
    const ids = [...live.map((l) => l.run_id), live[0].run_id, 'run_unknown'];
    const leases = [...live.slice(0, 4), { ...live[4], attempt: 1 }];
    const [row] = await once<{ keys: string; rows: string; fenced: RunLease[] }>(
      GROUP_LOCKS.pg,
      groupParams(ids, leases),
    );
    expect([Number(row.keys), Number(row.rows)]).toEqual([2, LIVE]);
    expect(row.fenced.sort(byRun)).toEqual(live.slice(0, 4));
  });

  /** Whether another transaction holds the row lock of `run` (probed without waiting, nothing kept). */
  async function rowLocked(probe: Client, run: string): Promise<boolean> {
    await probe.query('BEGIN');
    try {
      const r = await probe.query('SELECT 1 FROM "runs" WHERE "run_id" = $1 FOR UPDATE SKIP LOCKED', [run]);
      return r.rowCount === 0;
    } finally {
      await probe.query('ROLLBACK');
    }
  }

  it.each([
    ['FENCE_RUNS', () => FENCE_RUNS.pg, fenceRunsParams],
    ['GROUP_LOCKS', () => GROUP_LOCKS.pg, () => groupParams()],
  ])(
    '%s locks the rows in run-id order whatever the order of its parameters (GROUP_LOCKS: its advisory keys first), and fences each lease on the row as locked',
    async (name, sql, values) => {
      const holder = new Client({ connectionString: url });
      const probe = new Client({ connectionString: url });
      await Promise.all([holder.connect(), probe.connect()]);
      const middle = live[4];
      try {
        // Another transaction holds the middle run and takes it over (a new attempt): the statement
        // waits there, holding every run before it in run-id order and none after it.
        await holder.query('BEGIN');
        await holder.query('UPDATE "runs" SET "attempt" = 3 WHERE "run_id" = $1', [middle.run_id]);
        await client.query('SET plan_cache_mode = auto');
        await client.query('BEGIN');
        const pid = Number((await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid);
        const running = client.query(sql(), values());
        let waiting = false;
        for (let i = 0; i < 500 && !waiting; i++) {
          const r = await probe.query('SELECT 1 FROM pg_locks WHERE "pid" = $1 AND NOT "granted"', [pid]);
          waiting = (r.rowCount ?? 0) > 0;
        }
        expect(waiting).toBe(true);
        const locked: boolean[] = [];
        for (const l of live) {
          locked.push(l === middle ? true : await rowLocked(probe, l.run_id));
        }
        expect(locked).toEqual(live.map((_l, i) => i <= 4));
        if (name === 'GROUP_LOCKS') {
          const advisory = await probe.query(
            `SELECT 1 FROM pg_locks WHERE "pid" = $1 AND "locktype" = 'advisory' AND "granted"`,
            [pid],
          );
          expect(advisory.rowCount).toBe(2);
        }
        await holder.query('COMMIT');
        const rows = (await running).rows as Record<string, unknown>[];
        const fenced = (name === 'GROUP_LOCKS' ? rows[0].fenced : rows) as RunLease[];
        // The middle run's lease was re-checked on the row it locked: attempt 3 now, not matched.
        const expected = name === 'GROUP_LOCKS' ? live.slice(0, 5) : live;
        expect(fenced.sort(byRun)).toEqual(expected.filter((l) => l !== middle));
        await client.query('ROLLBACK');
      } finally {
        await client.query('ROLLBACK').catch(() => undefined);
        await holder.query('ROLLBACK').catch(() => undefined);
        await ds.getRepository(RunEntity).update({ run_id: middle.run_id }, { attempt: middle.attempt });
        await Promise.all([holder.end(), probe.end()]);
      }
    },
  );

  it('a row changed but not taken over while the statement waited (another fence) is still fenced', async () => {
    const holder = new Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(FENCE_RUN.pg, [
        live[2].run_id,
        live[2].attempt,
        live[2].owner_process_id,
        live[2].owner_process_id,
      ]);
      await client.query('SET plan_cache_mode = auto');
      await client.query('BEGIN');
      const pid = Number((await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid);
      const running = client.query(FENCE_RUNS.pg, [json([live[3], live[2]])]);
      let waiting = false;
      for (let i = 0; i < 500 && !waiting; i++) {
        const r = await holder.query('SELECT 1 FROM pg_locks WHERE "pid" = $1 AND NOT "granted"', [pid]);
        waiting = (r.rowCount ?? 0) > 0;
      }
      expect(waiting).toBe(true);
      await holder.query('COMMIT');
      expect(((await running).rows as RunLease[]).sort(byRun)).toEqual([live[2], live[3]]);
      await client.query('ROLLBACK');
    } finally {
      await client.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  });
});
