/**
 * The hot-path SQL of conversations and steering (docs/conversations-and-steering.md), both
 * dialects: the conversation's running run, its waiting items, the steering queue of a run, and the
 * runs that start later.
 */
import { EVENT_COLUMNS, EVENT_LOG_INSERT_PG, insert, lockingRun, reading, stmt, transcriptAppend } from './hot-sql';
import { expectedSql } from './speculation';

export const STEERING_COLUMNS = [
  'conversation_key',
  'agent_id',
  'runner_id',
  'conversation_id',
  'thread_id',
  'workspace_id',
  'event_id',
  'kind',
  'state',
  'run_id',
  'position',
  'next_run_id',
  'dispatch',
  'item',
  'submission',
  'pull_mode',
  'created_at',
] as const;

/** The steering items still queued on a run (parameter: the run id), at its end. */
const QUEUED_OF_RUN = `(SELECT COUNT(*) FROM "steering_items" WHERE "run_id" = ? AND "state" = 'queued')`;

/** What a run's end reads with its transcript append: the conversation's wait, then `queued` (parameters: the key, the run id). */
function endLook(queued: string): string {
  return `, (SELECT COUNT(*) FROM (SELECT 1 FROM "steering_items" WHERE "conversation_key" = ? AND "dispatch" = 'waiting' LIMIT 1) AS x) AS "conv_waiting",
       ${queued} AS "queued"`;
}

const ITEM = `"id", "conversation_key", "agent_id", "runner_id", "conversation_id", "thread_id", "workspace_id", "event_id", "kind",
  "state", "run_id", "position", "next_run_id", "dispatch", "item", "submission", "created_at", "redispatched_at"`;

/**
 * The running run of a conversation, as a WHERE clause of `runs` r (4 parameters: agent, workspace,
 * conversation id, thread), written with the expressions and the predicate of the partial unique
 * index uq_runs_running_conversation so both planners seek it (docs/benchmarks.md, "The runs status
 * indexes off the per-run write path"). `COALESCE('w:' || workspace, '')` tells a workspace from none
 * exactly as `IS NOT DISTINCT FROM` did; a run with no conversation is never a conversation's.
 */
const RUNNING_OF = `r."agent_id" = ? AND COALESCE('w:' || r."workspace_id", '') = COALESCE('w:' || CAST(? AS TEXT), '')
     AND r."conversation_id" = ? AND COALESCE(r."thread_id", '') = ?
     AND r."status" = 'running' AND r."conversation_id" IS NOT NULL`;

export const SITUATION = `SELECT (SELECT r."run_id" FROM "runs" r WHERE ${RUNNING_OF} LIMIT 1) AS "run_id",
     (SELECT COUNT(*) FROM "steering_items" s JOIN "runs" r ON r."run_id" = s."run_id"
       WHERE ${RUNNING_OF} AND s."state" = 'queued') AS "queued",
     (SELECT COUNT(*) FROM "steering_items" WHERE "conversation_key" = ? AND "dispatch" = 'waiting') AS "n"`;

/**
 * An admission's claim made only when its conversation is free (PostgreSQL only: admitUnit's
 * `claimIfFree`): the situation (SITUATION) and, when nothing runs or waits in the conversation, the
 * event's claim and log row (SQL.claimEventLogged's) — one statement, one round trip instead of
 * the situation's and the claim's. Answers the situation and the log row's id: `id` null with a
 * free situation is a claim that conflicted (a duplicate), with a busy one a claim not tried
 * (nothing written). Parameters: SITUATION's (situationParams), the event's (EVENT_COLUMNS), the
 * log row's (EVENT_LOG_COLUMNS).
 */
const CLAIM_IF_FREE = reading(
  stmt(
    'claim_if_free',
    '-- PostgreSQL only (admission-unit.ts claimIfFree)',
    `WITH "s" AS (${SITUATION}),
     "e" AS (INSERT INTO "events" (${EVENT_COLUMNS.map((c) => `"${c}"`).join(', ')})
       SELECT ${EVENT_COLUMNS.map((c) => (c === 'received_at' ? '?::bigint' : '?')).join(', ')} FROM "s"
       WHERE "s"."run_id" IS NULL AND "s"."n" = 0
       ON CONFLICT DO NOTHING RETURNING 1 AS "one"),
     "l" AS (${EVENT_LOG_INSERT_PG} FROM "e" RETURNING "id")
     SELECT "s"."run_id", "s"."queued", "s"."n", (SELECT "id" FROM "l") AS "id" FROM "s"`,
  ),
  'runs',
  'steering_items',
  'events',
  'event_log',
);

export const STEERING_SQL = {
  /**
   * A conversation's situation in one statement (steering-rows.ts `situationOf`): its running run
   * (at most one: uq_runs_running_conversation), the items queued on that run, and its waiting
   * items. Parameters: the conversation (agent, workspace, conversation id, thread) twice, then its key.
   */
  situation: reading(stmt('situation', SITUATION), 'runs', 'steering_items'),
  claimIfFree: CLAIM_IF_FREE,
  /** The run's steering queue: items not pulled yet, and the last position given. */
  runQueue: stmt(
    'run_queue',
    `SELECT COUNT(CASE WHEN "state" = 'queued' THEN 1 END) AS "queued", COALESCE(MAX("position"), 0) AS "last"
     FROM "steering_items" WHERE "run_id" = ?`,
  ),
  insertItem: insert('insert_steering_item', 'steering_items', STEERING_COLUMNS),
  /** FIFO: the oldest items not pulled yet. */
  queuedOfRun: reading(
    stmt(
      'queued_of_run',
      `SELECT ${ITEM} FROM "steering_items" WHERE "run_id" = ? AND "state" = 'queued' ORDER BY "position" ASC LIMIT ?`,
    ),
    'steering_items',
  ),
  /** Hands an item out once: only from `queued`. */
  markInjected: stmt(
    'mark_injected',
    `UPDATE "steering_items" SET "state" = 'injected', "injected_at" = ?, "pull_mode" = ? WHERE "id" = ? AND "state" = 'queued'`,
  ),
  /** A run ended with the item still queued: dropped, and due as a run of its own. */
  markRedispatched: stmt(
    'mark_redispatched',
    `UPDATE "steering_items" SET "state" = 'redispatched', "dropped_at" = ?, "redispatched_at" = ?, "next_run_id" = ?, "dispatch" = 'waiting'
     WHERE "id" = ? AND "state" = 'queued'`,
  ),
  /**
   * At a run's end, in one statement: whether anything waits to run in its conversation (a queued
   * event, a routed run, a re-dispatched item: `conv_waiting` 0/1, on every row) and the run's
   * items not pulled yet, oldest first (none: one row of nulls). What the end signals
   * `conversation` for (endRunUnit) rides on the read the release makes anyway: no round trip more.
   * Parameters: the conversation key, the run id, the limit.
   */
  queuedOfRunAndWaiting: reading(
    stmt(
      'queued_of_run_and_waiting',
      `SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM "steering_items" WHERE "conversation_key" = ? AND "dispatch" = 'waiting' LIMIT 1) AS x) AS "conv_waiting",
         ${ITEM.replace(/"(\w+)"/g, 's."$1"')}
       FROM (SELECT 1 AS "one") AS o LEFT JOIN "steering_items" s ON s."run_id" = ? AND s."state" = 'queued'
       ORDER BY s."position" ASC LIMIT ?`,
    ),
    'steering_items',
  ),
  /**
   * The end's transcript append (SQL.insertTranscript) answering, besides its seq, what the end
   * reads of the conversation's steering (queuedOfRunAndWaiting's two questions): whether anything
   * waits to run in the conversation (`conv_waiting` 0/1) and how many items are still queued on
   * the run (`queued`; only when some are does the end read them, queuedOfRun). The append runs
   * after the end took the conversation's transcript lock (finish_run_locking), so its snapshot is
   * the one that read used: one round trip fewer per run end (docs/benchmarks.md, round 9
   * wt-pgc1r9). Parameters: insertTranscript's, then the conversation key, the run id.
   */
  appendTranscriptAndQueue: reading(
    transcriptAppend('insert_transcript_and_queue', endLook(QUEUED_OF_RUN)),
    'transcript',
    'steering_items',
  ),
  /**
   * appendTranscriptAndQueue as the end's last statement on PostgreSQL (Op.finalIf): the same
   * answer, but the statement fails (speculation.ts) when items are still queued on the run — the
   * end then goes on to release them, so it was not its last statement. PostgreSQL only.
   */
  appendTranscriptNoneQueued: reading(
    transcriptAppend(
      'insert_transcript_none_queued',
      endLook(expectedSql(QUEUED_OF_RUN, 0, 'steering items queued on the run')),
    ),
    'transcript',
    'steering_items',
  ),
  /** The conversation's next item to run (arrival order). */
  nextWaiting: stmt(
    'next_waiting',
    `SELECT ${ITEM} FROM "steering_items" WHERE "conversation_key" = ? AND "dispatch" = 'waiting' ORDER BY "id" ASC LIMIT 1`,
  ),
  markDispatched: stmt(
    'mark_dispatched',
    `UPDATE "steering_items" SET "dispatch" = ?, "started_at" = ? WHERE "id" = ? AND "dispatch" = 'waiting'`,
  ),
  /**
   * A queued run starts: its context and grants are frozen now, and the starting process claims
   * it (owner, next attempt: docs/scale-out.md#taking-a-run).
   */
  startQueuedRun: {
    ...stmt(
      'start_queued_run',
      `UPDATE "runs" SET "status" = 'running', "context" = ?, "snapshot_hash" = ?, "authorization_run" = ?, "authorization_hash" = ?, "started_at" = ?, "deadline_at" = ?,
       "owner_process_id" = ?, "attempt" = "attempt" + 1
     WHERE "run_id" = ? AND "status" = 'queued' RETURNING "attempt"`,
    ),
    relets: true,
  },
  /** A waiting run ends before it started (no runner in time, its agent gone, cancelled). */
  finishQueuedRun: lockingRun(
    stmt(
      'finish_queued_run',
      `UPDATE "runs" SET "status" = ?, "status_reason" = ?, "error_code" = ?, "retryable" = ?, "finished_at" = ?
     WHERE "run_id" = ? AND "status" = 'queued'`,
    ),
    5,
  ),
  /** An event's position in the event log (its first row: the EventPage cursor of the run context). */
  eventSeq: stmt('event_seq', `SELECT MIN("id") AS "id" FROM "event_log" WHERE "event_id" = ?`),
  /** The item a waiting run was made for. */
  itemOfNextRun: stmt('item_of_next_run', `SELECT ${ITEM} FROM "steering_items" WHERE "next_run_id" = ?`),
  /** Runs that ended (any way) with items still queued on them (boot recovery). */
  endedWithQueued: stmt(
    'ended_with_queued',
    `SELECT DISTINCT s."run_id" AS "run_id" FROM "steering_items" s JOIN "runs" r ON r."run_id" = s."run_id"
     WHERE s."state" = 'queued' AND r."status" <> 'running'`,
  ),
  /**
   * Conversations with items waiting to run that could start now: none has a running run
   * (docs/scale-out.md#routing — the dispatcher's poll reads no busy conversation; the end of the
   * running run kicks it, and the next poll finds it). The runs side is the partial unique index
   * uq_runs_running_conversation (same expressions); a conversation of one (no conversation on
   * its run row) is never busy.
   */
  waitingConversations: stmt(
    'waiting_conversations',
    `SELECT DISTINCT s."conversation_key" FROM "steering_items" s
     WHERE s."dispatch" = 'waiting'
       AND NOT EXISTS (
         SELECT 1 FROM "runs" r
          WHERE r."status" = 'running' AND r."conversation_id" IS NOT NULL
            AND r."agent_id" = s."agent_id"
            AND COALESCE('w:' || r."workspace_id", '') = COALESCE('w:' || s."workspace_id", '')
            AND r."conversation_id" = s."conversation_id"
            AND COALESCE(r."thread_id", '') = COALESCE(s."thread_id", ''))`,
  ),
} as const;
