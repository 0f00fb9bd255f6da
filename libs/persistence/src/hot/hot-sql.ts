/**
 * The hot-path SQL of both dialects, in one place: every statement the run path runs (admission,
 * results, finish, transcript, state, storage, audit, the SSE and host-API lookups) as fixed text
 * with bound parameters, prepared once per connection (better-sqlite3 statements; named
 * statements on `pg`). Written with `?` marks; PostgreSQL gets `$n` marks, or its own text where
 * the dialects differ.
 */
export interface HotStatement {
  /** Unique; also the name of the prepared statement on PostgreSQL. */
  readonly name: string;
  readonly sqlite: string;
  readonly pg: string;
  /**
   * A plain single-row INSERT whose caller never reads its result: the writer may hold it and
   * write it with the other rows of the same statement in its group as one multi-row INSERT
   * (insert-batch.ts). Absent for every other statement.
   */
  readonly rows?: { readonly table: string; readonly columns: readonly string[]; readonly tail: string };
  /**
   * The fence of a run's write (run-fence.ts): run without writing the held inserts first (it
   * reads none of them), and once it matched, not run again in the same transaction (FenceCache).
   */
  readonly fence?: true;
  /**
   * Changes a run's lease (its owner or attempt: a claim, a takeover): the writer forgets the
   * fences it holds in the transaction (FenceCache), so none answers for a lease it moved.
   */
  readonly relets?: true;
  /**
   * The tables whose held inserts this statement must see (it reads or conflicts with them): the
   * writer writes held rows first only when some are of these tables (`mustFlush`,
   * insert-batch.ts). Absent: every held row is written first. Only for statements whose text
   * and triggers touch nothing else.
   */
  readonly reads?: readonly string[];
  /**
   * Its parameters are all transaction advisory lock keys (lockConversation, lockKeys): as the
   * first op of a unit, the PostgreSQL writer takes them with its group's other locks, in the one
   * lock order (run-fence.ts GROUP_LOCKS), and answers the op itself.
   */
  readonly advisory?: true;
  /**
   * The parameter that names the run whose row it locks (an UPDATE of `runs`), and the parameter
   * of the advisory key it takes, if any: as the first op of a unit, the PostgreSQL writer locks
   * them with its group's other locks first, in the one lock order (GROUP_LOCKS); the op still runs.
   */
  readonly lockRun?: number;
  readonly lockKey?: number;
  /**
   * Also its run's fence, the lease test folded in (run-fence.ts finishRunFenced): the parameters
   * of the lease it tests (run id, attempt, owner). It takes its advisory key (lockKey) before its
   * run's row, so the PostgreSQL writer may run it first as its group's one lock statement when
   * the group's other units only fence the same lease (FenceCache.prefetch).
   */
  readonly lease?: readonly [run: number, attempt: number, owner: number];
  /**
   * SQLite has no data-modifying CTEs: a statement PostgreSQL runs as one INSERT chained on the
   * rows another inserted (`WITH e AS (INSERT … RETURNING 1) INSERT … SELECT … FROM e`) runs on
   * SQLite as these statements in order, each binding the next `params` parameters; a step that
   * inserted nothing ends it with an empty answer (no row, no change: the later steps would have
   * inserted nothing either), else the answer is the last step's. Its own `sqlite` text is never
   * prepared (sqlite-driver.ts).
   */
  readonly sqliteChain?: readonly { readonly stmt: HotStatement; readonly params: number }[];
}

/** The statement, locking the run row named by its parameter `run` (and the advisory key of `key`) (HotStatement.lockRun). */
export function lockingRun(s: HotStatement, run: number, key?: number): HotStatement {
  return { ...s, lockRun: run, ...(key === undefined ? {} : { lockKey: key }) };
}

/** The statement, declared to read (or conflict with) only these tables' held rows (HotStatement.reads). */
export function reading(s: HotStatement, ...tables: string[]): HotStatement {
  return { ...s, reads: tables };
}

/**
 * The advisory locks of a JSON array of keys, in the one lock order: by lock id (`hashtext` of
 * the key), each once — the sorted subquery is kept apart (OFFSET 0), so the aggregate takes the
 * locks in its order (docs/scale-out.md#one-lock-order).
 */
export function advisoryLocksSql(keys: string, as: string): string {
  return `SELECT count(pg_advisory_xact_lock(s."h")) AS "${as}" FROM (SELECT DISTINCT hashtext(k) AS "h" FROM ${keys} AS k ORDER BY 1 OFFSET 0) AS s`;
}

/**
 * The transaction locks of `n` keys (lockConversation's, n ≥ 2) in one statement, in the one lock
 * order (by lock id, advisoryLocksSql), whatever the order of the keys.
 */
const LOCKS = new Map<number, HotStatement>();
export function lockKeys(n: number): HotStatement {
  let s = LOCKS.get(n);
  if (!s) {
    const marks = Array.from({ length: n }, (_, i) => i);
    s = {
      ...reading(
        stmt(
          `lock_keys_x${n}`,
          `SELECT ${marks.map((i) => `? AS "k${i}"`).join(', ')}`,
          advisoryLocksSql(`unnest(ARRAY[${marks.map(() => '?').join(', ')}]::text[])`, 'k'),
        ),
      ),
      advisory: true,
    };
    LOCKS.set(n, s);
  }
  return s;
}

export function stmt(name: string, sql: string, pgSql?: string): HotStatement {
  let n = 0;
  return { name: `hot_${name}`, sqlite: sql, pg: (pgSql ?? sql).replace(/\?/g, () => `$${++n}`) };
}

/**
 * PostgreSQL only: the statement `s` (an UPDATE, or an INSERT) as a data-modifying CTE, then
 * `check` of the count of rows it changed — a function that fails the statement unless the count
 * is the one its writer assumed, so that the statement may be written without waiting for its
 * answer (run-fence.ts ridingFence, speculation.ts ridingEnd). Named `<s>_riding`; the parameters
 * are `s`'s, then any `check` adds.
 */
export function riding(s: HotStatement, check: (changed: string) => string): HotStatement {
  const text = s.pg.replace(/\$(\d+)/g, '?');
  const returning = /\bRETURNING\b/i.test(text) ? text : `${text} RETURNING 1`;
  return {
    ...stmt(
      `${s.name.replace(/^hot_/, '')}_riding`,
      '-- PostgreSQL only (pg-driver.ts)',
      `WITH "f" AS (${returning})
     SELECT ${check('(SELECT count(*) FROM "f")')} AS "matched"`,
    ),
    reads: s.reads,
  };
}

export function insert(name: string, table: string, columns: readonly string[], tail = ''): HotStatement {
  const cols = columns.map((c) => `"${c}"`).join(', ');
  return stmt(name, `INSERT INTO "${table}" (${cols}) VALUES (${columns.map(() => '?').join(', ')})${tail}`);
}

/**
 * A single-row INSERT the writer may merge with the other rows of the same statement in its group
 * (`HotStatement.rows`): only for inserts whose changed-row count nobody reads (no RETURNING, and
 * `tail` at most `ON CONFLICT DO NOTHING`).
 */
export function batchableInsert(name: string, table: string, columns: readonly string[], tail = ''): HotStatement {
  return { ...insert(name, table, columns, tail), rows: { table, columns, tail } };
}

/** The same INSERT for `n` rows (n ≥ 2): bound parameters row after row, in column order. */
export function multiRowInsert(s: HotStatement, n: number): HotStatement {
  const r = s.rows!;
  const cols = r.columns.map((c) => `"${c}"`).join(', ');
  const tuple = `(${r.columns.map(() => '?').join(', ')})`;
  const sql = `INSERT INTO "${r.table}" (${cols}) VALUES ${Array.from({ length: n }, () => tuple).join(', ')}${r.tail}`;
  return stmt(`${s.name.replace(/^hot_/, '')}_x${n}`, sql);
}

export const EVENT_COLUMNS = [
  'event_id',
  'agent_id',
  'event_type',
  'conversation_id',
  'thread_id',
  'idempotency_key',
  'body_hash',
  'payload',
  'disposition',
  'run_id',
  'received_at',
] as const;

export const RUN_COLUMNS = [
  'run_id',
  'event_id',
  'agent_id',
  'runner_id',
  'conversation_id',
  'thread_id',
  'workspace_id',
  'status',
  'status_reason',
  'error_code',
  'retryable',
  'context',
  'usage',
  'snapshot_hash',
  'authorization_run',
  'authorization_hash',
  'created_at',
  'started_at',
  'finished_at',
  'deadline_at',
  'cancel_requested_at',
  'owner_process_id',
  'attempt',
] as const;

export const EVENT_LOG_COLUMNS = [
  'event_id',
  'event_type',
  'event_time',
  'source',
  'agent_id',
  'conversation_id',
  'thread_id',
  'bot_id',
  'workspace_id',
  'actor_type',
  'actor_id',
  'actor_name',
  'subject_type',
  'subject_id',
  'input_summary',
  'run_id',
  'runner_id',
  'metadata',
  'created_at',
] as const;

export const TRANSCRIPT_COLUMNS = [
  'conversation_id',
  'thread_id',
  'role',
  'item_type',
  'content',
  'content_json',
  'attachment_refs',
  'event_id',
  'run_id',
  'agent_id',
  'workspace_id',
  'metadata',
  'created_at',
] as const;

export const RESULT_COLUMNS = [
  'run_id',
  'sequence',
  'type',
  'data',
  'usage',
  'source',
  'timestamp',
  'created_at',
] as const;

export const AUDIT_COLUMNS = [
  'run_id',
  'runner_id',
  'plugin_id',
  'action',
  'resource',
  'scope',
  'outcome',
  'error_code',
  'duration_us',
  'created_at',
] as const;

/** Host-side metering of a proxied model call (`model_usage`). */
export const MODEL_USAGE_COLUMNS = [
  'run_id',
  'model_id',
  'operation',
  'prompt_tokens',
  'completion_tokens',
  'total_tokens',
  'complete',
  'created_at',
] as const;

const INSERT_EVENT = reading(insert('insert_event', 'events', EVENT_COLUMNS, ' ON CONFLICT DO NOTHING'), 'events');
const INSERT_EVENT_LOG = reading(
  insert('insert_event_log', 'event_log', EVENT_LOG_COLUMNS, ' RETURNING "id"'),
  'event_log',
);

/** The bigint columns of `event_log`: PostgreSQL types the parameters of a SELECT list as text. */
const EVENT_LOG_BIGINT: ReadonlySet<string> = new Set(['event_time', 'created_at']);

/** The insert of an `event_log` row from a SELECT list on PostgreSQL, FROM clause to follow (the bigint columns cast). */
export const EVENT_LOG_INSERT_PG = `INSERT INTO "event_log" (${EVENT_LOG_COLUMNS.map((c) => `"${c}"`).join(', ')})
     SELECT ${EVENT_LOG_COLUMNS.map((c) => (EVENT_LOG_BIGINT.has(c) ? '?::bigint' : '?')).join(', ')}`;

/**
 * The event row (INSERT_EVENT: the idempotency guard) and, only when it was inserted, its log row
 * (INSERT_EVENT_LOG), answering the log row's id: one statement on PostgreSQL (one round trip
 * instead of two), the two statements on SQLite (HotStatement.sqliteChain). No row: the event
 * conflicted, nothing was written. Parameters: the event's (EVENT_COLUMNS), then the log row's
 * (EVENT_LOG_COLUMNS).
 */
const CLAIM_EVENT_LOGGED: HotStatement = {
  ...reading(
    stmt(
      'claim_event_logged',
      '-- sqliteChain',
      `WITH "e" AS (${INSERT_EVENT.sqlite} RETURNING 1 AS "one")
     ${EVENT_LOG_INSERT_PG} FROM "e" RETURNING "id"`,
    ),
    'events',
    'event_log',
  ),
  sqliteChain: [
    { stmt: INSERT_EVENT, params: EVENT_COLUMNS.length },
    { stmt: INSERT_EVENT_LOG, params: EVENT_LOG_COLUMNS.length },
  ],
};

const transcriptCols = TRANSCRIPT_COLUMNS.map((c) => `"${c}"`).join(', ');

/** Parameters: conversation_id, any-agent flag, agent_id, any-workspace flag, workspace_id, any-thread flag, thread_id, before, after, limit. */
function transcriptPage(order: 'ASC' | 'DESC', is: string): string {
  return `SELECT * FROM "transcript" WHERE "conversation_id" = ? AND (? = 1 OR "agent_id" = ?)
     AND (? = 1 OR "workspace_id" ${is} ?) AND (? = 1 OR "thread_id" ${is} ?)
     AND "seq" < ? AND "seq" > ? ORDER BY "seq" ${order} LIMIT ?`;
}

/**
 * The transcript append (SQL.insertTranscript): the row at the conversation's next seq, computed in
 * the same statement, answering `"seq"` and then `returning` (more RETURNING expressions, their
 * parameters after the row's and the conversation id). Parameters: TRANSCRIPT_COLUMNS, the
 * conversation id, then `returning`'s.
 */
export function transcriptAppend(name: string, returning = ''): HotStatement {
  return stmt(
    name,
    `INSERT INTO "transcript" (${transcriptCols}, "seq")
     SELECT ${TRANSCRIPT_COLUMNS.map(() => '?').join(', ')}, COALESCE(MAX("seq"), 0) + 1 FROM "transcript" WHERE "conversation_id" = ?
     RETURNING "seq"${returning}`,
    // PostgreSQL types the parameters of a SELECT list as text: created_at needs its cast.
    `INSERT INTO "transcript" (${transcriptCols}, "seq")
     SELECT ${TRANSCRIPT_COLUMNS.map((c) => (c === 'created_at' ? '?::bigint' : '?')).join(', ')}, COALESCE(MAX("seq"), 0) + 1 FROM "transcript" WHERE "conversation_id" = ?
     RETURNING "seq"${returning}`,
  );
}

export const SQL = {
  begin: stmt('begin', 'BEGIN'),
  commit: stmt('commit', 'COMMIT'),
  rollback: stmt('rollback', 'ROLLBACK'),

  // Admission: the event row is the idempotency guard (primary key event_id, unique idempotency_key).
  insertEvent: INSERT_EVENT,
  claimEventLogged: CLAIM_EVENT_LOGGED,
  eventById: stmt('event_by_id', 'SELECT * FROM "events" WHERE "event_id" = ?'),
  eventByKey: stmt('event_by_key', 'SELECT * FROM "events" WHERE "idempotency_key" = ?'),
  /**
   * Re-admits an event that was not accepted (failed: no runner; rejected: a busy conversation),
   * only from those states and with the same body (admission-unit.ts: the one readmission rule).
   */
  readmitEvent: stmt(
    'readmit_event',
    `UPDATE "events" SET "disposition" = ?, "run_id" = ?, "received_at" = ?, "idempotency_key" = COALESCE("idempotency_key", ?)
     WHERE "event_id" = ? AND "disposition" IN ('failed', 'rejected') AND "body_hash" = ?`,
  ),
  insertRun: batchableInsert('insert_run', 'runs', RUN_COLUMNS),
  insertEventLog: INSERT_EVENT_LOG,
  /**
   * Taken before a transcript append: on PostgreSQL the conversation's transaction lock, so
   * writers of several host processes cannot compute the same next seq; SQLite has one writer.
   */
  lockConversation: {
    ...reading(stmt('lock_conversation', 'SELECT ? AS "k"', `SELECT pg_advisory_xact_lock(hashtext(?)) AS "k"`)),
    advisory: true,
  },
  /**
   * finishRun, taking the conversation's transcript lock (lockConversation's) in the same
   * statement when it matched: the end's transcript row then needs no lock statement of its own —
   * its next seq is read by a later statement, whose snapshot is taken after the lock was granted.
   */
  finishRunLocking: lockingRun(
    reading(
      stmt(
        'finish_run_locking',
        `UPDATE "runs" SET "status" = ?, "status_reason" = ?, "error_code" = ?, "retryable" = ?, "usage" = ?, "finished_at" = ?
     WHERE "run_id" = ? AND "status" IN ('queued', 'running') RETURNING ? AS "k"`,
        `UPDATE "runs" SET "status" = ?, "status_reason" = ?, "error_code" = ?, "retryable" = ?, "usage" = ?, "finished_at" = ?
     WHERE "run_id" = ? AND "status" IN ('queued', 'running') RETURNING pg_advisory_xact_lock(hashtext(?)) AS "k"`,
      ),
      'runs',
    ),
    6,
    7,
  ),
  /**
   * Running runs of a workspace (`default` also counts runs stored without one), for its
   * `max_active_runs` (docs/tenancy.md#quotas): the partial index idx_runs_running_workspace.
   * It reads `runs`: run rows held in the writer's batch are written first.
   */
  runningOfWorkspace: reading(
    stmt(
      'running_of_workspace',
      `SELECT COUNT(*) AS "n" FROM "runs" WHERE "status" = 'running'
       AND ("workspace_id" = ? OR (CAST(? AS TEXT) = 'default' AND "workspace_id" IS NULL))`,
    ),
    'runs',
  ),
  /** Next seq of the conversation in the same statement. */
  insertTranscript: reading(transcriptAppend('insert_transcript'), 'transcript'),

  // Results and the end of a run.
  insertResult: batchableInsert('insert_result', 'run_results', RESULT_COLUMNS),
  finishRun: lockingRun(
    reading(
      stmt(
        'finish_run',
        `UPDATE "runs" SET "status" = ?, "status_reason" = ?, "error_code" = ?, "retryable" = ?, "usage" = ?, "finished_at" = ?
     WHERE "run_id" = ? AND "status" IN ('queued', 'running')`,
      ),
      'runs',
    ),
    6,
  ),
  markCancelRequested: lockingRun(
    stmt('mark_cancel', 'UPDATE "runs" SET "cancel_requested_at" = ? WHERE "run_id" = ?'),
    1,
  ),

  // Reads of the run path.
  resultsAfter: stmt(
    'results_after',
    `SELECT "run_id", "sequence", "type", "data", "usage", "source", "timestamp" FROM "run_results"
     WHERE "run_id" = ? AND "sequence" > ? ORDER BY "sequence" ASC LIMIT ?`,
  ),
  lastSequence: stmt('last_sequence', 'SELECT MAX("sequence") AS "max" FROM "run_results" WHERE "run_id" = ?'),
  runStatus: stmt('run_status', 'SELECT "status" FROM "runs" WHERE "run_id" = ?'),
  /** What a host API call at a process that does not own the run re-reads every call (docs/scale-out.md#host-api-anywhere). */
  runLiveness: stmt(
    'run_liveness',
    'SELECT "status", "created_at", "started_at", "cancel_requested_at", "attempt", "owner_process_id" FROM "runs" WHERE "run_id" = ?',
  ),
  /** Highest seq of one conversation (agent, workspace, conversation id, thread; null matches null). */
  latestThreadSeq: stmt(
    'latest_thread_seq',
    `SELECT MAX("seq") AS "max" FROM "transcript"
     WHERE "agent_id" = ? AND "conversation_id" = ? AND "workspace_id" IS ? AND "thread_id" IS ?`,
    `SELECT MAX("seq") AS "max" FROM "transcript"
     WHERE "agent_id" = ? AND "conversation_id" = ? AND "workspace_id" IS NOT DISTINCT FROM ? AND "thread_id" IS NOT DISTINCT FROM ?`,
  ),

  /**
   * A transcript page (HistoryPage, the transcript API). Each of agent, workspace and thread is
   * either matched exactly (null matches null) or, when its flag is 1, not filtered (the admin
   * view only: a run's reads always name all three).
   */
  transcriptNewest: stmt(
    'transcript_newest',
    transcriptPage('DESC', 'IS'),
    transcriptPage('DESC', 'IS NOT DISTINCT FROM'),
  ),
  transcriptOldest: stmt(
    'transcript_oldest',
    transcriptPage('ASC', 'IS'),
    transcriptPage('ASC', 'IS NOT DISTINCT FROM'),
  ),

  // State, storage, audit.
  stateGet: stmt('state_get', 'SELECT "value" FROM "state_entries" WHERE "scope_key" = ? AND "state_key" = ?'),
  stateEntries: stmt(
    'state_entries',
    'SELECT "state_key", "value" FROM "state_entries" WHERE "scope_key" = ? ORDER BY "state_key" ASC LIMIT ?',
  ),
  stateUpsert: stmt(
    'state_upsert',
    `INSERT INTO "state_entries" ("scope_key", "state_key", "value", "updated_at") VALUES (?, ?, ?, ?)
     ON CONFLICT ("scope_key", "state_key") DO UPDATE SET "value" = excluded."value", "updated_at" = excluded."updated_at"`,
  ),
  stateDelete: stmt('state_delete', 'DELETE FROM "state_entries" WHERE "scope_key" = ? AND "state_key" = ?'),
  storageUpsert: stmt(
    'storage_upsert',
    `INSERT INTO "storage_entries" ("owner_key", "key", "value_base64", "size", "updated_at") VALUES (?, ?, ?, ?, ?)
     ON CONFLICT ("owner_key", "key") DO UPDATE SET "value_base64" = excluded."value_base64", "size" = excluded."size", "updated_at" = excluded."updated_at"`,
  ),
  storageDelete: stmt('storage_delete', 'DELETE FROM "storage_entries" WHERE "owner_key" = ? AND "key" = ?'),
  insertAudit: batchableInsert('insert_audit', 'audit_log', AUDIT_COLUMNS),
  insertModelUsage: batchableInsert('insert_model_usage', 'model_usage', MODEL_USAGE_COLUMNS),
} as const;
