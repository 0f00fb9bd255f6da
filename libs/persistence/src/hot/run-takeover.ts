/**
 * The takeover of a run whose owner process is dead (docs/scale-out.md#dead-owner-sweep), for the
 * one writer: the orphaned runs, and one unit that takes one of them over under its row lock.
 * SQL of both dialects (FOR UPDATE SKIP LOCKED on PostgreSQL). The fence: run-fence.ts.
 */
import type { JsonObject } from '../entities';
import { RESULT_COLUMNS, SQL, stmt } from './hot-sql';
import { outboxUnit, type NewOutboxRow } from './outbox-units';
import type { NewResult, RunEnd } from './run-units';
import { releaseRunUnit } from './steering-queue-units';
import { STEERING_COLUMNS, STEERING_SQL } from './steering-sql';
import { conversationKey } from './steering-rows';
import { bool, exec, json, one, rowParams, rows, type Unit } from './unit';

/** The orphaned runs: running, owned by a process that has no row (declared dead, or never seen). */
const ORPHANS = `SELECT "run_id", "owner_process_id", "attempt" FROM "runs"
  WHERE "status" = 'running' AND "owner_process_id" IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM "host_processes" h WHERE h."id" = "runs"."owner_process_id")`;

export const LEASE_SQL = {
  /** Orphaned runs, oldest first (candidates: the takeover checks each again under its row lock). */
  orphans: stmt('lease_orphans', `${ORPHANS} ORDER BY "id" ASC LIMIT ?`),
  /**
   * Running runs with no owner (started before leases existed, or by code that does not claim):
   * only the boot sweep of a process alone on its database takes them.
   */
  unowned: stmt(
    'lease_unowned',
    `SELECT "run_id", "owner_process_id", "attempt" FROM "runs" WHERE "status" = 'running' AND "owner_process_id" IS NULL
     ORDER BY "id" ASC LIMIT ?`,
  ),
  /**
   * The row to take over, locked, if it is still the orphan that was found (same owner, same
   * attempt, owner still gone); on PostgreSQL a row another sweeper (or a late fence) holds is
   * skipped, to be seen again at the next tick.
   */
  lockOrphan: stmt(
    'lease_lock_orphan',
    `SELECT "run_id", "agent_id", "workspace_id", "conversation_id", "thread_id", "runner_id", "event_id", "attempt"
     FROM "runs" WHERE "run_id" = ? AND "status" = 'running' AND "attempt" = ? AND "owner_process_id" IS ?
       AND ("owner_process_id" IS NULL OR NOT EXISTS (SELECT 1 FROM "host_processes" h WHERE h."id" = "runs"."owner_process_id"))`,
    `SELECT "run_id", "agent_id", "workspace_id", "conversation_id", "thread_id", "runner_id", "event_id", "attempt"
     FROM "runs" WHERE "run_id" = ? AND "status" = 'running' AND "attempt" = ? AND "owner_process_id" IS NOT DISTINCT FROM ?
       AND ("owner_process_id" IS NULL OR NOT EXISTS (SELECT 1 FROM "host_processes" h WHERE h."id" = "runs"."owner_process_id"))
     FOR UPDATE SKIP LOCKED`,
  ),
  /** The takeover's fence: the next attempt, no owner (the dead one's writes match nothing after this). */
  bumpAttempt: {
    ...stmt('lease_bump', `UPDATE "runs" SET "attempt" = "attempt" + 1, "owner_process_id" = NULL WHERE "run_id" = ?`),
    relets: true,
  },
  /** A never-started run waits again: it is dispatched like any waiting run. */
  requeue: stmt(
    'lease_requeue',
    `UPDATE "runs" SET "status" = 'queued', "status_reason" = ?, "started_at" = NULL WHERE "run_id" = ? AND "status" = 'running'`,
  ),
  /** The waiting item the run was started from, due again. */
  itemDueAgain: stmt(
    'lease_item_due_again',
    `UPDATE "steering_items" SET "dispatch" = 'waiting', "started_at" = NULL WHERE "next_run_id" = ?`,
  ),
  eventPayload: stmt('lease_event_payload', `SELECT "payload" FROM "events" WHERE "event_id" = ?`),
} as const;

/** An orphaned run as the sweep found it. */
export interface OrphanRef {
  run_id: string;
  owner_process_id: string | null;
  attempt: number;
}

export function* orphansUnit(limit: number, withUnowned: boolean): Unit<OrphanRef[]> {
  const found = yield* rows<Record<string, unknown>>(LEASE_SQL.orphans, [limit]);
  const unowned = withUnowned ? yield* rows<Record<string, unknown>>(LEASE_SQL.unowned, [limit]) : [];
  return [...found, ...unowned].map((r) => ({
    run_id: String(r.run_id),
    owner_process_id: (r.owner_process_id as string | null) ?? null,
    attempt: Number(r.attempt),
  }));
}

export interface TakeOver {
  orphan: OrphanRef;
  /** The terminal of a started run; the unit sets its sequence (after the last committed result). */
  terminal: NewResult;
  end: RunEnd;
  /** Ops that close its delivery (for a started run). */
  outbox: readonly NewOutboxRow[];
  at: number;
  /**
   * A run with no committed result waits again instead of ending `interrupted` — only when the
   * caller knows its runner never began it (a dispatch the runner never acknowledged). Without
   * that knowledge (no dispatch acknowledgment in the protocol yet) it is false: a run may have
   * been started by its runner without a result, and is never re-run silently.
   */
  requeue_unstarted?: boolean;
}

export type TakeOverOutcome =
  /** Someone else took it (or it ended, or its owner came back): nothing written. */
  | { taken: false }
  /** Never started: queued again, its conversation is due. */
  | { taken: true; kind: 'requeued'; attempt: number; conversation_key: string }
  /** Started: ended `interrupted` with its terminal at `sequence`; its queued steering items re-dispatched. */
  | {
      taken: true;
      kind: 'interrupted';
      attempt: number;
      sequence: number;
      released: number;
      conversation_key: string | null;
    };

/**
 * The takeover of one orphaned run, in one transaction, under its row lock: the attempt bump
 * fences the dead owner first; a run with no committed result (its runner never sent one) waits
 * again, any other ends `interrupted` at the sequence after its last committed result, with its
 * delivery's closing ops, and its queued steering items are re-dispatched in order.
 */
export function* takeOverUnit(t: TakeOver): Unit<TakeOverOutcome> {
  const o = t.orphan;
  const row = yield* one<Record<string, unknown>>(LEASE_SQL.lockOrphan, [o.run_id, o.attempt, o.owner_process_id]);
  if (!row) {
    return { taken: false };
  }
  yield* exec(LEASE_SQL.bumpAttempt, [o.run_id]);
  const attempt = o.attempt + 1;
  const last = yield* one<{ max: number | string | null }>(SQL.lastSequence, [o.run_id]);
  const lastSequence = last?.max === null || last?.max === undefined ? 0 : Number(last.max);
  const agentId = String(row.agent_id);
  const workspaceId = (row.workspace_id as string | null) ?? null;
  const conversationId = (row.conversation_id as string | null) ?? null;
  const threadId = (row.thread_id as string | null) ?? null;
  if (lastSequence === 0 && t.requeue_unstarted === true) {
    yield* exec(LEASE_SQL.requeue, ['waiting again: its host process died before the run started', o.run_id]);
    const key = conversationKey(agentId, workspaceId, conversationId ?? `run:${o.run_id}`, threadId);
    if ((yield* exec(LEASE_SQL.itemDueAgain, [o.run_id])) === 0) {
      yield* insertDueItem(o.run_id, String(row.event_id), key, row, t.at);
    }
    return { taken: true, kind: 'requeued', attempt, conversation_key: key };
  }
  const sequence = lastSequence + 1;
  const e = t.end;
  yield* exec(SQL.finishRun, [
    e.status,
    e.status_reason,
    e.error_code,
    bool(e.retryable),
    json(e.usage),
    e.finished_at,
    o.run_id,
  ]);
  yield* exec(SQL.insertResult, rowParams(RESULT_COLUMNS, { ...t.terminal, run_id: o.run_id, sequence }));
  yield* outboxUnit(t.outbox);
  const released = yield* releaseRunUnit(o.run_id, t.at);
  const key = conversationId === null ? null : conversationKey(agentId, workspaceId, conversationId, threadId);
  return { taken: true, kind: 'interrupted', attempt, sequence, released, conversation_key: key };
}

/**
 * A run started at admission has no waiting item: one is made from its event's stored submission,
 * so the conversation dispatcher starts it like any waiting run (the stored submission has its
 * binary contents redacted: docs/scale-out.md#dead-owner-sweep).
 */
function* insertDueItem(
  runId: string,
  eventId: string,
  key: string,
  run: Record<string, unknown>,
  at: number,
): Unit<void> {
  const ev = yield* one<{ payload: string }>(LEASE_SQL.eventPayload, [eventId]);
  const submission = ev ? (JSON.parse(String(ev.payload)) as JsonObject) : {};
  yield* exec(
    STEERING_SQL.insertItem,
    rowParams(STEERING_COLUMNS, {
      conversation_key: key,
      agent_id: run.agent_id,
      runner_id: run.runner_id,
      conversation_id: run.conversation_id,
      thread_id: run.thread_id,
      workspace_id: run.workspace_id,
      event_id: eventId,
      kind: 'queue',
      state: 'waiting',
      run_id: null,
      position: null,
      next_run_id: runId,
      dispatch: 'waiting',
      item: {},
      submission,
      pull_mode: null,
      created_at: at,
    }),
  );
}
