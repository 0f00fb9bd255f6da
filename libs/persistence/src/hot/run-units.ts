/**
 * The units of work of the run path, for the one writer (see unit.ts). Each is one all-or-nothing
 * step of a run: one result, its end (its admission: admission-unit.ts).
 */
import type {
  JsonObject,
  AuditEntity,
  EventEntity,
  EventLogEntity,
  ModelUsageEntity,
  RunEntity,
  RunResultEntity,
} from '../entities';
import type { NewTranscriptRow } from './transcript-row';
import {
  AUDIT_COLUMNS,
  MODEL_USAGE_COLUMNS,
  EVENT_LOG_COLUMNS,
  RESULT_COLUMNS,
  RUN_COLUMNS,
  SQL,
  TRANSCRIPT_COLUMNS,
} from './hot-sql';
import { outboxUnit, type NewOutboxRow } from './outbox-units';
import { fenceCallUnit, fenceUnit, finishRunFenced, type RunLease } from './run-fence';
import { storeSnapshotUnit } from './snapshot-rows';
import { STEERING_SQL } from './steering-sql';
import { bool, exec, json, lastOne, one, oneFinalIf, rowParams, type Unit } from './unit';

/** A run row to write: its authorization snapshot whole (stored once by its hash: snapshot-rows.ts). */
export type NewRun = Omit<
  RunEntity,
  'id' | 'snapshot_hash' | 'authorization_run' | 'owner_process_id' | 'attempt' | 'last_write_at'
> & {
  authorization: JsonObject | null;
  /** Set by the unit that starts the run (its claim: run-fence.ts); absent: not owned, attempt 0. */
  owner_process_id?: string | null;
  attempt?: number;
};
export type NewResult = Omit<RunResultEntity, 'id'>;
export type NewAudit = Omit<AuditEntity, 'id'>;
export type NewEventLog = Omit<EventLogEntity, 'id'>;

export interface StateWrite {
  scope_key: string;
  state_key: string;
  /** JSON text, already validated. */
  value: string;
}

type Row = Record<string, unknown>;

export function eventFromRow(r: Row): EventEntity {
  return {
    event_id: String(r.event_id),
    agent_id: String(r.agent_id),
    event_type: String(r.event_type),
    conversation_id: (r.conversation_id as string | null) ?? null,
    thread_id: (r.thread_id as string | null) ?? null,
    idempotency_key: (r.idempotency_key as string | null) ?? null,
    body_hash: String(r.body_hash),
    payload: JSON.parse(String(r.payload)) as EventEntity['payload'],
    disposition: String(r.disposition),
    run_id: (r.run_id as string | null) ?? null,
    received_at: Number(r.received_at),
  };
}

/** Columns of a run row that replace the prepared run's when it is inserted (insertRunUnit). */
export type RunOverrides = Partial<
  Pick<NewRun, 'context' | 'attempt' | 'owner_process_id' | 'conversation_id' | 'thread_id'>
>;

/**
 * Inserts a run row — `run` with the columns of `over` replacing its own (no copy of the wide row:
 * rowParams) — its snapshot's shared part first when absent (snapshot-rows.ts).
 */
export function* insertRunUnit(run: NewRun, over: RunOverrides = {}): Unit<void> {
  const [snapshotHash, own] = yield* storeSnapshotUnit(run.authorization, run.created_at);
  const attempt = 'attempt' in over ? over.attempt : run.attempt;
  yield* exec(
    SQL.insertRun,
    rowParams(RUN_COLUMNS, run, {
      ...over,
      attempt: attempt ?? 0,
      snapshot_hash: snapshotHash,
      authorization_run: own,
    }),
  );
}

/** The key of a conversation's transcript lock (SQL.lockConversation), taken before an append. */
export function transcriptLockKey(conversationId: string): string {
  return `transcript:${conversationId}`;
}

/**
 * Appends a transcript row at the conversation's next seq, under its transcript lock — taken here
 * unless the unit took it already (`locked`: in an earlier statement of the same transaction).
 */
export function* appendTranscriptUnit(row: NewTranscriptRow, locked = false, last = false): Unit<number> {
  if (!locked) {
    yield* one(SQL.lockConversation, [transcriptLockKey(row.conversation_id)]);
  }
  // `last`: the caller is a top-level unit that returns right after (Op.final).
  const params = [...rowParams(TRANSCRIPT_COLUMNS, row), row.conversation_id];
  const r = last
    ? yield* lastOne<{ seq: number | string }>(SQL.insertTranscript, params)
    : yield* one<{ seq: number | string }>(SQL.insertTranscript, params);
  return Number(r?.seq);
}

/**
 * One accepted result and what it implies (a `state.updated` write, delivery ops), together —
 * fenced first by the run's lease when it has one (run-fence.ts).
 */
export function* resultUnit(
  r: NewResult,
  state: StateWrite | null,
  outbox: readonly NewOutboxRow[] = [],
  lease: RunLease | null = null,
): Unit<void> {
  yield* fenceUnit(lease);
  yield* exec(SQL.insertResult, rowParams(RESULT_COLUMNS, r));
  if (state) {
    yield* exec(SQL.stateUpsert, [state.scope_key, state.state_key, state.value, r.created_at]);
  }
  yield* outboxUnit(outbox);
}

export interface RunEnd {
  status: string;
  status_reason: string | null;
  error_code: string | null;
  retryable: boolean | null;
  usage?: Record<string, unknown> | null;
  finished_at: number;
}

/**
 * The end of a run in one commit: its final status, its terminal result, the state write the
 * terminal result implies, its last delivery ops and the assistant transcript row — only while the run is still active
 * (false, nothing written, when it already ended).
 */
export function* finishUnit(
  terminal: NewResult,
  end: RunEnd,
  state: StateWrite | null,
  assistant: NewTranscriptRow | null,
  outbox: readonly NewOutboxRow[] = [],
  lease: RunLease | null = null,
): Unit<boolean> {
  return (yield* finishLookingUnit(terminal, end, state, assistant, outbox, lease, null)).ended;
}

/** What a run's end read of its conversation's steering with its transcript append (finishLookingUnit). */
export interface EndLook {
  /** Something waits to run in the conversation (a queued event, a routed run, a re-dispatched item). */
  waiting: boolean;
  /** Items still queued on the run (not pulled). */
  queued: number;
}

/**
 * finishUnit; with the run's conversation key and an assistant row, its transcript append also
 * answers the conversation's steering look at the end (STEERING_SQL.appendTranscriptAndQueue: one
 * statement, endRunUnit), else `look` is null.
 */
export function* finishLookingUnit(
  terminal: NewResult,
  end: RunEnd,
  state: StateWrite | null,
  assistant: NewTranscriptRow | null,
  outbox: readonly NewOutboxRow[],
  lease: RunLease | null,
  conversationKey: string | null,
): Unit<{ ended: boolean; look: EndLook | null }> {
  // With a transcript row to append, the finish statement takes its lock (SQL.finishRunLocking);
  // its run row and that key are declared (lockRun, lockKey), so a PostgreSQL group takes them
  // with its other locks, in the one order. A leased run's end is its fence too
  // (finishRunFenced): nothing changed is then told apart by the fence alone.
  const columns = [
    end.status,
    end.status_reason,
    end.error_code,
    bool(end.retryable),
    json(end.usage),
    end.finished_at,
    terminal.run_id,
    ...(assistant ? [transcriptLockKey(assistant.conversation_id)] : []),
  ];
  const changed = lease
    ? yield* exec(finishRunFenced(assistant !== null), [
        ...columns,
        lease.attempt,
        lease.owner_process_id,
        lease.owner_process_id,
      ])
    : yield* exec(assistant ? SQL.finishRunLocking : SQL.finishRun, columns);
  if (changed === 0) {
    // Fenced (FencedError, the group rolled back) or already ended.
    yield* fenceUnit(lease);
    return { ended: false, look: null };
  }
  yield* resultUnit(terminal, state, outbox);
  if (!assistant) {
    return { ended: true, look: null };
  }
  if (conversationKey === null) {
    yield* appendTranscriptUnit(assistant, true);
    return { ended: true, look: null };
  }
  // The lock was taken by the finish statement: the append's snapshot sees every item queued before.
  // With none queued on the run, the end (endRunUnit) returns right after it (Op.finalIf).
  const r = yield* oneFinalIf<{ conv_waiting: number | string; queued: number | string }>(
    STEERING_SQL.appendTranscriptAndQueue,
    [...rowParams(TRANSCRIPT_COLUMNS, assistant), assistant.conversation_id, conversationKey, terminal.run_id],
    STEERING_SQL.appendTranscriptNoneQueued,
  );
  return { ended: true, look: { waiting: Number(r?.conv_waiting ?? 0) > 0, queued: Number(r?.queued ?? 0) } };
}

/** Appends an event-log row; its id is the event's position (the EventPage cursor). */
export function* eventLogUnit(row: NewEventLog): Unit<number> {
  const r = yield* one<{ id: number | string }>(SQL.insertEventLog, rowParams(EVENT_LOG_COLUMNS, row));
  return Number(r?.id);
}

/** An audit row; fenced (FENCE_CALL) when it records a write call made for a leased run. */
export function* auditUnit(a: NewAudit, lease: RunLease | null = null): Unit<void> {
  yield* fenceCallUnit(lease);
  yield* exec(SQL.insertAudit, rowParams(AUDIT_COLUMNS, a));
}

export type NewModelUsage = Omit<ModelUsageEntity, 'id'>;

/** One metered model call (its usage row), written with the run's other hot-path rows; fenced by the run's lease. */
export function* modelUsageUnit(u: NewModelUsage, lease: RunLease | null = null): Unit<void> {
  yield* fenceCallUnit(lease);
  yield* exec(SQL.insertModelUsage, rowParams(MODEL_USAGE_COLUMNS, u));
}

export function* cancelRequestedUnit(runId: string, at: number): Unit<void> {
  yield* exec(SQL.markCancelRequested, [at, runId]);
}

/*
 * The writes of a run's host API calls (docs/scale-out.md#fenced-host-api-writes): each fenced by
 * the run's lease when given (FENCE_CALL: the lease, and the run still running), in the same
 * transaction as the write.
 */
export function* stateSetUnit(w: StateWrite, at: number, lease: RunLease | null = null): Unit<void> {
  yield* fenceCallUnit(lease);
  yield* exec(SQL.stateUpsert, [w.scope_key, w.state_key, w.value, at]);
}

export function* stateDeleteUnit(scopeKey: string, key: string, lease: RunLease | null = null): Unit<boolean> {
  yield* fenceCallUnit(lease);
  return (yield* exec(SQL.stateDelete, [scopeKey, key])) > 0;
}

export function* storageSetUnit(
  ownerKey: string,
  key: string,
  value: Buffer,
  at: number,
  lease: RunLease | null = null,
): Unit<void> {
  yield* fenceCallUnit(lease);
  yield* exec(SQL.storageUpsert, [ownerKey, key, value.toString('base64'), value.length, at]);
}

export function* storageDeleteUnit(ownerKey: string, key: string, lease: RunLease | null = null): Unit<boolean> {
  yield* fenceCallUnit(lease);
  return (yield* exec(SQL.storageDelete, [ownerKey, key])) > 0;
}
