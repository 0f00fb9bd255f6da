/**
 * The fence of a run's writes (docs/scale-out.md#fenced-writes), for the one writer: the lease a
 * process holds of a run, the fence every write unit of the run starts with, and the cache that
 * keeps it at one statement per run per group commit. SQL of both dialects (SQLite has one
 * process, but runs the same statement). The takeover of a dead owner's runs: run-takeover.ts.
 */
import { advisoryLocksSql, riding, stmt, type HotStatement } from './hot-sql';
import { exec, type Changes, type LaterLocks, type Op, type SqlValue, type Unit } from './unit';

/** What a process holds of a run it owns: the fence token its writes name. */
export interface RunLease {
  run_id: string;
  attempt: number;
  owner_process_id: string;
}

/**
 * A write of a run refused by its fence: another process owns the run now (it took it over), or
 * this process was declared dead. The unit's transaction was rolled back.
 */
export class FencedError extends Error {
  readonly code = 'host.fenced';

  constructor(readonly lease: RunLease) {
    super(
      `run ${lease.run_id}: write fenced (attempt ${lease.attempt} of process ${lease.owner_process_id} no longer owns it)`,
    );
    this.name = 'FencedError';
  }
}

export function isFenced(e: unknown): e is FencedError {
  return e instanceof FencedError;
}

/** The database's clock in epoch ms (the lease times compare on one clock: host-processes.repository.ts). */
const NOW_SQLITE = `CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)`;
const NOW_PG = `(extract(epoch from clock_timestamp()) * 1000)::bigint`;

/**
 * The lease test of a single-run fence on PostgreSQL: the row found by its run id (unique), then
 * its attempt and owner (and `andAlso`) compared. The comparison is wrapped in `IS TRUE` (the same outcome: a
 * NULL never matched) so that it is no index condition: the planner must find the row by
 * `runs_run_id_key`. Without it, on a `runs` table not yet analysed (a fresh database, or a new
 * process whose id is not in the statistics yet) both indexes look like one row and PostgreSQL
 * took `idx_runs_owner_process`, reading every run the process ever owned on every fence
 * (docs/benchmarks.md#postgresql-c1-the-anatomy-of-one-run).
 */
function leasePg(andAlso = ''): string {
  return `"run_id" = ? AND ("attempt" = ? AND "owner_process_id" = ?${andAlso}) IS TRUE`;
}

/**
 * The fence (a statement the writer drivers recognise by `fence`: FenceCache): an UPDATE of the
 * run's row, so it takes the row lock and serialises with a takeover — whichever commits second
 * sees the first's row (docs/scale-out.md#fenced-writes).
 */
export const FENCE_RUN: HotStatement = {
  ...stmt(
    'fence_run',
    `UPDATE "runs" SET "last_write_at" = ${NOW_SQLITE}
     WHERE "run_id" = ? AND "attempt" = ? AND "owner_process_id" = ?
       AND EXISTS (SELECT 1 FROM "host_processes" WHERE "id" = ?)`,
    `UPDATE "runs" SET "last_write_at" = ${NOW_PG}
     WHERE ${leasePg()}
       AND EXISTS (SELECT 1 FROM "host_processes" WHERE "id" = ?)`,
  ),
  fence: true,
  // It reads none of the held rows but the run's own (when its insert is held).
  reads: ['runs'],
};

/** The SQLSTATE of a riding fence that matched nothing (migration 1767740000000, `rh_fenced`). */
export const FENCED_SQLSTATE = 'RH409';

/** The leases of a JSON array parameter, as rows (FENCE_RUNS, GROUP_LOCKS). */
const LEASES_PG = `("run_id" text, "attempt" integer, "owner_process_id" text)`;

/**
 * The run rows of `ids` (a sub-select of distinct run ids as "id", sorted) locked on PostgreSQL
 * one by one, in that order, each looked up by its run id (runs_run_id_key): a LATERAL sub-select
 * with FOR UPDATE is never flattened into a join, so each lock is a lookup by id, taken in the
 * sorted order of the ids (the nested loop keeps its outer order), whatever the statistics say.
 * A join of the ids with `runs` (IN, `= ANY(ARRAY(...))`), on a `runs` table not yet analysed,
 * was planned as a Seq Scan of every run and a hash join (docs/benchmarks.md, issue 16 round 6,
 * wt-lockplan). Answers each locked row's lease as it is under its lock (the newest version,
 * re-read when another transaction changed it meanwhile).
 */
function lockRunsPg(ids: string): string {
  return `SELECT l."run_id", l."attempt", l."owner_process_id" FROM (${ids}) AS "ids"
       CROSS JOIN LATERAL (SELECT r."run_id", r."attempt", r."owner_process_id" FROM "runs" r
         WHERE r."run_id" = "ids"."id" FOR UPDATE OF r) AS "l"`;
}

/**
 * The fences of the leases `f` (rows of LEASES_PG) among the rows of the CTE "locked"
 * (lockRunsPg): each lease is tested on the row as locked, its owner alive (FENCE_RUN's test),
 * and the row matched is updated, found by its run id. The join of the locked rows with the
 * leases comes first (it is estimated at one row), so the update's lookups are by run id too.
 */
function fenceLockedPg(f: string): string {
  return `UPDATE "runs" AS r SET "last_write_at" = ${NOW_PG}
     FROM "locked" l JOIN ${f}
       ON l."run_id" = f."run_id" AND l."attempt" = f."attempt" AND l."owner_process_id" = f."owner_process_id"
     WHERE r."run_id" = l."run_id" AND EXISTS (SELECT 1 FROM "host_processes" h WHERE h."id" = l."owner_process_id")
     RETURNING r."run_id", r."attempt", r."owner_process_id"`;
}

/**
 * The fences of several runs as one statement (docs/scale-out.md#fenced-writes): FENCE_RUN for
 * each lease of a JSON array `[{run_id, attempt, owner_process_id}]`, returning the runs it
 * matched — each matched row locked until COMMIT, as by its own FENCE_RUN. The PostgreSQL writer
 * runs it at the start of a group for the runs whose units open with a fence (FenceCache.prefetch).
 *
 * On PostgreSQL it takes its row locks in one fixed order, by run id, whatever the order of the
 * array: two processes whose groups fence each other's runs (host API writes at a non-owner) would
 * otherwise lock them in opposite orders and deadlock. An UPDATE locks rows in its join's order,
 * which no input order fixes, so the statement first locks the rows of the leases' runs, one
 * lookup by run id each in sorted run-id order (lockRunsPg, a MATERIALIZED CTE the UPDATE reads),
 * then tests each lease on the row it locked and updates the rows matched (fenceLockedPg) — still
 * one round trip. A row taken over meanwhile is read under its lock as it is now and matches
 * nothing (not returned); its lock is held until the group ends (its unit's own FENCE_RUN fails).
 * SQLite has one writer: no lock order to keep.
 */
export const FENCE_RUNS: HotStatement = {
  ...stmt(
    'fence_runs',
    `UPDATE "runs" SET "last_write_at" = ${NOW_SQLITE}
     WHERE EXISTS (SELECT 1 FROM json_each(?) f
       WHERE f."value" ->> 'run_id' = "runs"."run_id" AND f."value" ->> 'attempt' = "runs"."attempt"
         AND f."value" ->> 'owner_process_id' = "runs"."owner_process_id")
       AND EXISTS (SELECT 1 FROM "host_processes" h WHERE h."id" = "runs"."owner_process_id")
     RETURNING "run_id", "attempt", "owner_process_id"`,
    `WITH "f" AS (SELECT * FROM json_to_recordset(?::json) AS f${LEASES_PG}),
     "locked" AS MATERIALIZED (${lockRunsPg(`SELECT DISTINCT f."run_id" AS "id" FROM "f" ORDER BY 1`)})
     ${fenceLockedPg('"f"')}`,
  ),
  reads: ['runs'],
};

/**
 * The fence of a host API write made for a run (docs/scale-out.md#fenced-host-api-writes): the
 * run's own fence, and the run must still be `running` — at the owner a call checked before the
 * run's end committed must not write after it; at another process (StoredRunGrants) the lease is
 * the one read with the run's status, so the write lands only while the run is still running
 * under the attempt the call was granted for, its owner alive.
 */
export const FENCE_CALL: HotStatement = {
  ...stmt(
    'fence_call',
    `UPDATE "runs" SET "last_write_at" = ${NOW_SQLITE}
     WHERE "run_id" = ? AND "attempt" = ? AND "owner_process_id" = ? AND "status" = 'running'
       AND EXISTS (SELECT 1 FROM "host_processes" WHERE "id" = ?)`,
    `UPDATE "runs" SET "last_write_at" = ${NOW_PG}
     WHERE ${leasePg(` AND "status" = 'running'`)}
       AND EXISTS (SELECT 1 FROM "host_processes" WHERE "id" = ?)`,
  ),
  fence: true,
  // Not answered from a group's locks (it checks the status, which the group may change), but
  // its row is locked with them, in the one lock order (GROUP_LOCKS).
  lockRun: 0,
};

const RIDING = new Map<HotStatement, HotStatement>();

/**
 * The statement the PostgreSQL writer writes for a fence (FENCE_RUN, FENCE_CALL) without waiting
 * for its answer: the same UPDATE, then `rh_fenced` of the rows it matched, which fails the
 * statement — and so the transaction — with FENCED_SQLSTATE instead of changing nothing, so the
 * fence's answer decides nothing but the transaction's failure
 * (docs/durability.md#the-writers-transactions-on-postgresql). Its parameters are the fence's, then
 * the run id again (named in the error's message). Undefined for any other statement.
 */
export function ridingFence(fence: HotStatement): HotStatement | undefined {
  if (fence !== FENCE_RUN && fence !== FENCE_CALL) {
    return undefined;
  }
  let s = RIDING.get(fence);
  if (!s) {
    s = riding(fence, (matched) => `"rh_fenced"(${matched}, CAST(? AS text))`);
    RIDING.set(fence, s);
  }
  return s;
}

/** The lease a fence op (FENCE_RUN, FENCE_CALL: run id, attempt, owner) tests. */
export function leaseOfFence(op: Op): RunLease {
  const [run_id, attempt, owner_process_id] = op.params as [string, number, string];
  return { run_id, attempt, owner_process_id };
}

/**
 * Every lock a PostgreSQL group commit takes, as one statement at its start, in the one lock order
 * (docs/scale-out.md#one-lock-order): first the transaction advisory locks (conversations,
 * workspaces' active-run counts, transcripts) by lock id, then the run rows by run id — the fences
 * of the leases among them (FENCE_RUN for each, returned when matched) and the rows its units lock
 * otherwise (FENCE_CALL, a cancel request, an end or a start of a run: HotStatement.lockRun,
 * Op.locks). A lock taken later in unit order is then one the transaction holds already, so two
 * processes' groups never wait for each other in a cycle over these locks.
 *
 * Parameters: the run ids to lock (JSON array), the leases to fence (JSON array of
 * `{run_id, attempt, owner_process_id}`, their runs among the ids), the advisory keys (JSON array).
 * One row: `keys` and `rows` (how many were locked) and `fenced` (the leases matched). The select
 * list is evaluated left to right, so the advisory locks are taken before the first row lock; the
 * `locked` CTE locks its rows one lookup by run id each, in run-id order (lockRunsPg, as
 * FENCE_RUNS), and the fence tests each lease on the row it locked (fenceLockedPg: a run taken
 * over meanwhile matches nothing).
 * PostgreSQL only: SQLite has one writer (no lock order to keep) and never runs it.
 */
export const GROUP_LOCKS: HotStatement = {
  ...stmt(
    'group_locks',
    `SELECT ? AS "rows", ? AS "fenced", ? AS "keys"`,
    `WITH "locked" AS MATERIALIZED (${lockRunsPg(`SELECT DISTINCT j."id" FROM json_array_elements_text(?::json) AS j("id") ORDER BY 1`)}),
     "fenced" AS (${fenceLockedPg(`json_to_recordset(?::json) AS f${LEASES_PG}`)})
     SELECT (${advisoryLocksSql('json_array_elements_text(?::json)', 'n')}) AS "keys",
       (SELECT count(*) FROM "locked") AS "rows",
       (SELECT COALESCE(json_agg(json_build_object('run_id', x."run_id", 'attempt', x."attempt",
          'owner_process_id', x."owner_process_id")), '[]'::json) FROM "fenced" x) AS "fenced"`,
  ),
  reads: ['runs'],
};

/**
 * The transaction advisory locks of a PostgreSQL group whose units lock no run row (admissions:
 * their conversation's, workspace's and transcript's keys), as one statement, in the one lock
 * order (docs/scale-out.md#one-lock-order: by lock id, advisoryLocksSql). GROUP_LOCKS without its
 * run-row steps: those, planned even for no run ids, made it a statement of three CTEs for what
 * is one aggregate of lock calls (docs/benchmarks.md, issue 16 round 6). Parameter: the keys (JSON
 * array). PostgreSQL only, as GROUP_LOCKS.
 */
export const GROUP_KEYS: HotStatement = {
  ...stmt('group_keys', `SELECT ? AS "keys"`, advisoryLocksSql('json_array_elements_text(?::json)', 'keys')),
  reads: [],
};

const FINISH_SET = `"status" = ?, "status_reason" = ?, "error_code" = ?, "retryable" = ?, "usage" = ?, "finished_at" = ?`;

/**
 * The end of a leased run and its fence in one statement (docs/scale-out.md#fenced-writes): the
 * run's final status written only while it is active (`queued`/`running`) and the lease still
 * its own — FENCE_RUN's test, `last_write_at` included — so the end's group needs no fence
 * statement of its own. Nothing changed says "fenced or already ended"; the unit tells them apart
 * by running FENCE_RUN then (finishUnit). Parameters: the six columns of the end, the run id,
 * with `locking` the transcript lock's key (SQL.lockConversation's), then the lease's attempt and
 * owner (twice).
 *
 * With `locking`, on PostgreSQL it takes the key's transaction lock before the run's row: the
 * run id is compared with a sub-select that takes the lock (an InitPlan, run before the scan
 * locks any row), so the statement keeps the one lock order (docs/scale-out.md#one-lock-order)
 * and can be its group's only lock statement (FenceCache.prefetch). SQLite has one writer: the
 * key is only tested not null there.
 */
const FINISH_FENCED = new Map<boolean, HotStatement>();
export function finishRunFenced(locking: boolean): HotStatement {
  let s = FINISH_FENCED.get(locking);
  if (!s) {
    const key = locking ? ' AND ? IS NOT NULL' : '';
    const run = locking ? `(SELECT CAST(? AS text) FROM (SELECT pg_advisory_xact_lock(hashtext(?))) AS "l")` : '?';
    s = {
      ...stmt(
        locking ? 'finish_run_fenced_locking' : 'finish_run_fenced',
        `UPDATE "runs" SET ${FINISH_SET}, "last_write_at" = ${NOW_SQLITE}
     WHERE "run_id" = ?${key} AND "status" IN ('queued', 'running') AND "attempt" = ? AND "owner_process_id" = ?
       AND EXISTS (SELECT 1 FROM "host_processes" WHERE "id" = ?)`,
        `UPDATE "runs" SET ${FINISH_SET}, "last_write_at" = ${NOW_PG}
     WHERE "run_id" = ${run} AND ("status" IN ('queued', 'running') AND "attempt" = ? AND "owner_process_id" = ?) IS TRUE
       AND EXISTS (SELECT 1 FROM "host_processes" WHERE "id" = ?)`,
      ),
      reads: ['runs'],
      lockRun: 6,
      ...(locking ? { lockKey: 7, lease: [6, 8, 9] as const } : { lease: [6, 7, 8] as const }),
    };
    FINISH_FENCED.set(locking, s);
  }
  return s;
}

/**
 * The fence of a unit of a run owned by this process: nothing when the run is not leased (one
 * process without a claim; legacy callers); otherwise the unit (its whole transaction) fails with
 * FencedError unless the lease is still this run's. `later`: the locks the unit takes after the
 * fence (Op.locks: taken with its group's, in the one lock order).
 */
export function* fenceUnit(lease: RunLease | null | undefined, later?: LaterLocks): Unit<void> {
  if (!lease) {
    return;
  }
  const matched = yield* exec(
    FENCE_RUN,
    [lease.run_id, lease.attempt, lease.owner_process_id, lease.owner_process_id],
    later,
  );
  if (matched === 0) {
    throw new FencedError(lease);
  }
}

/**
 * The fence of a host API write unit (FENCE_CALL): nothing when the run is not leased; otherwise
 * the unit fails with FencedError (its transaction rolled back) unless the run is still running
 * under the lease the call was granted for.
 */
export function* fenceCallUnit(lease: RunLease | null | undefined): Unit<void> {
  if (!lease) {
    return;
  }
  const matched = yield* exec(FENCE_CALL, [
    lease.run_id,
    lease.attempt,
    lease.owner_process_id,
    lease.owner_process_id,
  ]);
  if (matched === 0) {
    throw new FencedError(lease);
  }
}

/**
 * The fences of one group commit: a fence that matched holds the run's row lock until COMMIT, so
 * the same fence again in the same transaction needs no statement — one fence per run per group,
 * however many of its results the group carries. Drivers call `answer` before running an op and
 * `ran` after; `reset` at each transaction.
 *
 * A driver whose statements are round trips (PostgreSQL) also fences, before the group's first
 * unit, every run whose unit opens with a FENCE_RUN as one statement (`prefetch`, FENCE_RUNS):
 * with 100 runs streaming, a group carried up to 100 sequential fences. A lease it matched is held
 * as if its own fence had run (the row lock is the same); one it did not match is not recorded,
 * so that unit's own FENCE_RUN runs where it stands — it fails as before (FencedError rolls back
 * the group, whose units the writer replays one by one: write-queue.ts), or it matches a run the
 * group itself inserted or claimed before it.
 */
export class FenceCache {
  private readonly held = new Set<string>();
  /** Advisory keys the group's lock statement took (GROUP_LOCKS): their lock ops are answered. */
  private readonly keys = new Set<string>();
  private planned: readonly string[] = [];
  /** The op run as the group's lock statement ahead of its unit (`hoistable`), and its answer. */
  private hoisted: Op | null = null;
  private hoistedResult: Changes | undefined;

  /**
   * The one statement taking the locks these ops (the first op of each unit of a group) open with
   * or declare (Op.locks), or null when fewer than two locks would be in it (one lock is its own
   * statement, nothing to order). Only fences of two or more distinct leases: FENCE_RUNS. Only
   * advisory keys: GROUP_KEYS. Advisory keys and run rows, or run rows beyond the fences:
   * GROUP_LOCKS, in the one lock order.
   */
  prefetch(first: readonly Op[]): Op | null {
    const hoisted = this.hoist(first);
    if (hoisted) {
      return hoisted;
    }
    const leases = new Map<string, RunLease>();
    const runs = new Set<string>();
    const keys = new Set<string>();
    for (const op of first) {
      if (op.stmt === FENCE_RUN) {
        if (!this.held.has(key(op))) {
          const [run_id, attempt, owner_process_id] = op.params as [string, number, string];
          leases.set(key(op), { run_id, attempt, owner_process_id });
          runs.add(run_id);
        }
      } else if (op.stmt.advisory) {
        op.params.forEach((k) => keys.add(String(k)));
      } else if (op.stmt.lockRun !== undefined) {
        runs.add(String(op.params[op.stmt.lockRun]));
        if (op.stmt.lockKey !== undefined) {
          keys.add(String(op.params[op.stmt.lockKey]));
        }
      }
      op.locks?.keys?.forEach((k) => keys.add(k));
      op.locks?.runs?.forEach((r) => runs.add(r));
    }
    if (keys.size === 0 && runs.size === leases.size) {
      return leases.size < 2 ? null : { kind: 'all', stmt: FENCE_RUNS, params: [JSON.stringify([...leases.values()])] };
    }
    if (keys.size + runs.size < 2) {
      return null;
    }
    this.planned = [...keys];
    if (runs.size === 0) {
      // Keys only (no run row, so no lease either): their locks alone.
      return { kind: 'get', stmt: GROUP_KEYS, params: [JSON.stringify(this.planned)] };
    }
    return {
      kind: 'all',
      stmt: GROUP_LOCKS,
      params: [JSON.stringify([...runs]), JSON.stringify([...leases.values()]), JSON.stringify(this.planned)],
    };
  }

  /**
   * The run's end with its fence (finishRunFenced) to run ahead of the group's other units when
   * they only fence the same lease (`hoistable`: the run's last results), or null. The driver
   * runs it first and hands its answer to `prefetched`: the results' fences are then answered by
   * it, one fence statement fewer in the group. The SQLite writer asks only this (its statements
   * are steps, not round trips: no other lock statement pays there), the PostgreSQL writer as
   * part of `prefetch`.
   */
  hoist(first: readonly Op[]): Op | null {
    const hoisted = hoistable(first);
    if (hoisted) {
      this.hoisted = hoisted;
    }
    return hoisted;
  }

  /**
   * Records what the group's lock statement took: the leases it matched (FENCE_RUNS' rows, or
   * GROUP_LOCKS' `fenced`) and, for GROUP_LOCKS and GROUP_KEYS, their advisory keys.
   */
  prefetched(rows: unknown): void {
    if (rows !== undefined && !Array.isArray(rows) && !this.hoisted) {
      // GROUP_KEYS' one row: its keys are taken, no run row is.
      this.planned.forEach((k) => this.keys.add(k));
      this.planned = [];
      return;
    }
    if (this.hoisted) {
      // The end of a run and its fence (finishRunFenced), run ahead of its unit: its answer waits
      // for the unit, and a lease it matched is held as by its own FENCE_RUN.
      this.hoistedResult = rows as Changes;
      this.ran(this.hoisted, rows);
      return;
    }
    const list = rows as Record<string, unknown>[];
    const group = list.length === 1 && 'fenced' in list[0] ? list[0].fenced : undefined;
    if (group !== undefined) {
      this.planned.forEach((k) => this.keys.add(k));
    }
    this.planned = [];
    const matched = (
      group === undefined ? list : typeof group === 'string' ? (JSON.parse(group) as unknown) : group
    ) as { run_id: string; attempt: number | string; owner_process_id: string }[];
    for (const r of matched) {
      const attempt = Number(r.attempt);
      this.held.add(
        key({ kind: 'run', stmt: FENCE_RUN, params: [r.run_id, attempt, r.owner_process_id, r.owner_process_id] }),
      );
    }
  }

  /**
   * The answer for an op that is a fence already matched in this transaction, or an advisory lock
   * op whose keys the group's lock statement took; undefined to run it.
   */
  answer(op: Op): Changes | undefined {
    if (op === this.hoisted) {
      this.hoisted = null;
      return this.hoistedResult;
    }
    if (op.stmt.advisory) {
      return this.keys.size > 0 && op.params.every((k) => this.keys.has(String(k))) ? { changes: 1 } : undefined;
    }
    return op.stmt.fence && this.held.has(key(op)) ? { changes: 1 } : undefined;
  }

  /**
   * Records a fence that ran (only one that matched counts). A statement that moves a run's
   * lease (HotStatement.relets: a claim, a takeover) forgets every fence held so far: the next
   * fence of the group runs again and sees the row as it is now.
   */
  ran(op: Op, result: unknown): void {
    if (op.stmt.relets) {
      this.held.clear();
    } else if (op.stmt.fence && (result as Changes).changes > 0) {
      this.held.add(key(op));
    } else if (op.stmt.lease && (result as Changes).changes > 0) {
      this.held.add(key(fenceOf(op)));
    }
  }

  reset(): void {
    this.held.clear();
    this.keys.clear();
    this.planned = [];
    this.hoisted = null;
    this.hoistedResult = undefined;
  }
}

/** The FENCE_RUN of the lease an op tests itself (HotStatement.lease). */
function fenceOf(op: Op): Op {
  const [run, attempt, owner] = op.stmt.lease!;
  const p = op.params;
  return { kind: 'run', stmt: FENCE_RUN, params: [p[run], p[attempt], p[owner], p[owner]] };
}

/**
 * The op that can be a group's one lock statement itself: a run's end with its fence
 * (finishRunFenced: its transcript key, then its row) when every other unit of the group opens
 * with the FENCE_RUN of the same lease (the run's last results) and declares no other lock — its
 * locks are then all the group takes, in the one lock order, and the results' fences are answered
 * by it (docs/benchmarks.md#postgresql-c1-the-pool-reads-and-the-ends-fence). Running the end first
 * changes nothing the results' units write or read (their fence tests the lease, not the status);
 * when it changes nothing, their own fences run as before.
 */
function hoistable(first: readonly Op[]): Op | null {
  const own = first.filter((op) => op.stmt.lease);
  if (own.length !== 1 || own[0].locks) {
    return null;
  }
  const fence = key(fenceOf(own[0]));
  return first.every((op) => op === own[0] || (op.stmt === FENCE_RUN && !op.locks && key(op) === fence))
    ? own[0]
    : null;
}

/** Per statement: a run's FENCE_RUN that matched says nothing of FENCE_CALL's status check. */
function key(op: Op): string {
  return [op.stmt.name, ...op.params.map((p: SqlValue) => String(p))].join('\u0000');
}
