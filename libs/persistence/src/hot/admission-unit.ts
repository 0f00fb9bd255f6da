/**
 * The one admission unit (docs/conversations-and-steering.md, docs/durability.md), for the one
 * writer. Every event goes through it; an event without a conversation is a conversation of one
 * (always free). Under the conversation's lock it reads the situation, applies the decision table
 * (admission-decision.ts), claims the event row (the idempotency guard), and writes what the
 * disposition implies: the run (started, or failed at admission), the steering item (steered), the
 * waiting run (queued), or nothing more (rejected). The run is prepared by the caller only when it
 * expects a start; a start it did not prepare writes nothing and answers `existing: null`.
 *
 * One readmission rule: an event that was not accepted — `failed` (no runner) or `rejected` (a
 * busy conversation under `reject`) — may be sent again with the same body; it is the only kind of
 * event whose first answer was an error, so the only one a client is told to retry.
 */
import type { EventEntity, JsonObject } from '../entities';
import type { NewTranscriptRow } from '../repositories/context.repository';
import { decide, FREE, type DecisionTable } from './admission-decision';
import { EVENT_COLUMNS, EVENT_LOG_COLUMNS, lockKeys, RESULT_COLUMNS, SQL } from './hot-sql';
import { storeSnapshotUnit } from './snapshot-rows';
import {
  appendTranscriptUnit,
  eventFromRow,
  eventLogUnit,
  insertRunUnit,
  transcriptLockKey,
  type NewEventLog,
  type NewResult,
  type NewRun,
} from './run-units';
import { STEERING_COLUMNS, STEERING_SQL } from './steering-sql';
import {
  conversationLockKey,
  situationFromRow,
  situationOf,
  situationParams,
  type ConversationRef,
  type ConversationSituation,
  type Disposition,
  type Row,
} from './steering-rows';
import { exec, json, one, rowParams, type Unit } from './unit';

/** Dispositions of events that were not accepted: the same event (same body) may be sent again. */
export const NOT_ACCEPTED: readonly string[] = ['failed', 'rejected'];

export interface ConversationRows {
  ref: ConversationRef;
  table: DecisionTable;
  /** The SteeringInputItem a runner pulls; the unit sets its `claimed_run_id` and `position`. */
  item: JsonObject;
  /** The full submission (a waiting run is prepared from it when it starts). */
  submission: JsonObject;
  /**
   * An event without a conversation routed to another process (docs/scale-out.md#routing): a
   * conversation of one (`soloConversation`) that only carries its waiting run; the run row has
   * no conversation.
   */
  of_one?: boolean;
}

export interface AdmissionRows {
  /**
   * The event row; the decision sets its disposition and run_id. Its run_id on input is the id
   * of the run this event starts or waits as.
   */
  event: EventEntity;
  /** A retry of an event that was not accepted (see the readmission rule above). */
  readmit: boolean;
  log: NewEventLog;
  user: NewTranscriptRow | null;
  /**
   * The run as it starts now (prepared: grants, context without `event_seq`), or — with
   * `terminal` — the run failed at admission (no runner connected); null when the caller expected
   * a busy conversation and did not prepare it.
   */
  run: NewRun | null;
  terminal: NewResult | null;
  /** Null or missing: a conversation of one. */
  conversation?: ConversationRows | null;
  /**
   * The workspace's `max_active_runs` (docs/tenancy.md#quotas), counted here over the database —
   * every process's running runs — under the workspace's lock, so two processes admitting at once
   * never exceed it. Absent: no such quota (nothing read, no lock).
   */
  active_quota?: ActiveQuota | null;
}

export interface ActiveQuota {
  workspace_id: string;
  max: number;
}

export type AdmitOutcome =
  | {
      admitted: true;
      disposition: Disposition | 'failed';
      /** The run it concerns: started, failed, steered into, queued as; the running run for a rejection. */
      run_id: string | null;
      /** The event's position in the event log (the EventPage cursor), set in the stored run context. */
      event_seq: number;
      /** The user's transcript row, when written. */
      transcript_seq: number | null;
      /** Steered: the item's position in the run's steering queue. */
      position: number | null;
      /** The conversation's running run (steered into, rejected by, or to interrupt). */
      running_run_id: string | null;
      /** Started: the run's attempt (its fence token with the owner: run-fence.ts); otherwise null. */
      attempt: number | null;
    }
  /** A duplicate (maybe concurrent): nothing written, the event recorded first. */
  | { admitted: false; existing: EventEntity; active?: undefined }
  /**
   * Nothing written. Without `active`: the conversation was free but the run was not prepared
   * (prepare and submit again). With `active`: the workspace has reached its `max_active_runs`
   * (that many running runs).
   */
  | { admitted: false; existing: null; active?: number };

/** The stored run context with the event's position, set once, by the unit that knows it. */
export function withEventSeq(context: NewRun['context'], eventSeq: number): NewRun['context'] {
  const inner = (context as { context?: Record<string, unknown> }).context ?? {};
  return { ...context, context: { ...inner, event_seq: eventSeq } };
}

/**
 * Claims the event row — inserts it, or re-admits a retry — and writes its log row once it is
 * claimed; answers the log row's id (the event's position), or the event recorded first when it
 * lost to a duplicate (nothing written). A new event's claim and log row are one statement
 * (SQL.claimEventLogged: one round trip on PostgreSQL).
 */
function* claimEvent(
  e: EventEntity,
  readmit: boolean,
  log: NewEventLog,
): Unit<{ existing: EventEntity; seq?: undefined } | { existing?: undefined; seq: number }> {
  if (!readmit) {
    const r = yield* one<{ id: number | string }>(SQL.claimEventLogged, [
      ...rowParams(EVENT_COLUMNS, e),
      ...rowParams(EVENT_LOG_COLUMNS, log),
    ]);
    return r ? { seq: Number(r.id) } : { existing: yield* conflicted(e) };
  }
  if (e.idempotency_key) {
    // The retry brings a key another event took meanwhile: that event is the answer.
    const holder = yield* one<Row>(SQL.eventByKey, [e.idempotency_key]);
    if (holder && holder.event_id !== e.event_id) {
      return { existing: eventFromRow(holder) };
    }
  }
  const claimed = yield* exec(SQL.readmitEvent, [
    e.disposition,
    e.run_id,
    e.received_at,
    e.idempotency_key,
    e.event_id,
    e.body_hash,
  ]);
  return claimed > 0 ? { seq: yield* eventLogUnit(log) } : { existing: yield* conflicted(e) };
}

/** The event recorded first, after `e`'s claim changed nothing. */
function* conflicted(e: EventEntity): Unit<EventEntity> {
  const byKey = e.idempotency_key ? yield* one<Row>(SQL.eventByKey, [e.idempotency_key]) : undefined;
  const row = byKey ?? (yield* one<Row>(SQL.eventById, [e.event_id]));
  if (!row) {
    throw new Error(`event ${e.event_id} conflicted but cannot be read`);
  }
  return eventFromRow(row);
}

/** The event recorded first (read only), unless it is the one this retry may take over. */
function* recordedEvent(e: EventEntity, readmit: boolean): Unit<EventEntity | undefined> {
  const byKey = e.idempotency_key ? yield* one<Row>(SQL.eventByKey, [e.idempotency_key]) : undefined;
  const row = byKey ?? (yield* one<Row>(SQL.eventById, [e.event_id]));
  const found = row ? eventFromRow(row) : undefined;
  const retryable =
    readmit &&
    found?.event_id === e.event_id &&
    found.body_hash === e.body_hash &&
    NOT_ACCEPTED.includes(found.disposition);
  return retryable ? undefined : found;
}

function runOf(d: Disposition | 'failed', a: AdmissionRows, s: ConversationSituation): string | null {
  return d === 'steered' || d === 'rejected' ? s.running_run_id : a.event.run_id;
}

/** The key of a workspace's active-run count's lock (lockConversation's kind of lock). */
function activeQuotaLockKey(q: ActiveQuota): string {
  return `workspace-active:${q.workspace_id}`;
}

/**
 * The workspace's running runs when they reach its `max_active_runs`, else null. The caller holds
 * the workspace's lock (activeQuotaLockKey: a transaction advisory lock on PostgreSQL, held to
 * COMMIT; SQLite has one writer), taken with the conversation's, so a concurrent admission or
 * start in the workspace counts this one's run once it committed. Read without the lock, it is
 * only a hint (SteeringRepository.activeQuotaReached): the units decide.
 */
export function* activeQuotaReached(q: ActiveQuota): Unit<number | null> {
  const r = yield* one<{ n: number | string }>(SQL.runningOfWorkspace, [q.workspace_id, q.workspace_id]);
  const n = Number(r?.n ?? 0);
  return n >= q.max ? n : null;
}

/**
 * Admission of one event, in one transaction (see the file comment). `claimIfFree` (PostgreSQL,
 * where a statement is a round trip: RunsRepository.admit): an event prepared to start in its
 * conversation reads the situation and claims the event as started in one statement
 * (STEERING_SQL.claimIfFree) — what the situation's read and the claim write when the conversation
 * is free; a busy conversation's claim is then made as without it, after the decision.
 */
export function* admitUnit(a: AdmissionRows, claimIfFree = false): Unit<AdmitOutcome> {
  const c = a.conversation ?? null;
  yield* admissionLocks(a);
  if (a.active_quota) {
    const active = yield* activeQuotaReached(a.active_quota);
    if (active !== null) {
      // A duplicate still answers its original admission: a quota never refuses it.
      const existing = yield* recordedEvent(a.event, a.readmit);
      return existing ? { admitted: false, existing } : { admitted: false, existing: null, active };
    }
  }
  // Only a new event prepared to start: anything else claims after the decision, as without it.
  const speculate = claimIfFree && c && (c.table.free ?? 'started') === 'started' && !a.readmit && a.run && !a.terminal;
  const speculated = speculate ? yield* claimedIfFree(a, c) : null;
  if (speculated?.existing) {
    return { admitted: false, existing: speculated.existing };
  }
  const s = speculated ? speculated.situation : c ? yield* situationOf(c.ref) : FREE;
  const decided = c ? decide(c.table, s) : 'started';
  if (decided === 'started' && !a.run) {
    // A duplicate still answers as one, even when the start was not prepared.
    return { admitted: false, existing: (yield* recordedEvent(a.event, a.readmit)) ?? null };
  }
  const disposition = decided === 'started' && a.terminal ? 'failed' : decided;
  const runId = runOf(disposition, a, s);
  // Read before the claim, so that the claim and the log row (which records the position) are one
  // statement: under the conversation's lock either way, and the claim writes only `events`.
  const queue =
    disposition === 'steered' && runId ? yield* one<{ last: number | string }>(STEERING_SQL.runQueue, [runId]) : null;
  const position = queue ? Number(queue.last) + 1 : null;
  const steering =
    disposition === 'steered'
      ? { status: 'queued', run_id: runId, position }
      : disposition === 'queued'
        ? { status: 'waiting', next_run_id: runId }
        : undefined;
  let eventSeq: number;
  if (speculated?.seq !== undefined) {
    eventSeq = speculated.seq;
  } else {
    // The log row records the disposition of an event of a conversation, and a failure at admission.
    const claim = yield* claimEvent(
      { ...a.event, disposition, run_id: runId },
      a.readmit,
      logRow(a, disposition, runId, steering),
    );
    if (claim.existing) {
      return { admitted: false, existing: claim.existing };
    }
    eventSeq = claim.seq;
  }
  const admitted = (transcriptSeq: number | null): AdmitOutcome => ({
    admitted: true,
    disposition,
    run_id: runId,
    event_seq: eventSeq,
    transcript_seq: transcriptSeq,
    position,
    running_run_id: s.running_run_id,
    attempt: disposition === 'started' ? 1 : null,
  });
  switch (disposition) {
    case 'started':
      // The claim (docs/scale-out.md#taking-a-run): a run inserted running is its first attempt,
      // owned by the process that prepared it (`run.owner_process_id`; missing: not owned).
      yield* insertRunUnit(a.run!, { context: withEventSeq(a.run!.context, eventSeq), attempt: 1 });
      break;
    case 'failed':
      // Its terminal result, so its stream ends like any other; no transcript row; never owned.
      yield* insertRunUnit(a.run!, { owner_process_id: null });
      yield* exec(SQL.insertResult, rowParams(RESULT_COLUMNS, a.terminal!));
      return admitted(null);
    case 'rejected':
      // Nothing else changes: no transcript row, no run.
      return admitted(null);
    case 'steered':
    case 'queued': {
      const ref = c!.ref;
      if (disposition === 'queued') {
        const row = waitingRunRow(runId!, a.event.event_id, ref, a.event.received_at);
        yield* insertRunUnit(row, c!.of_one ? { conversation_id: null, thread_id: null } : {});
      }
      yield* exec(
        STEERING_SQL.insertItem,
        rowParams(STEERING_COLUMNS, {
          conversation_key: ref.key,
          agent_id: ref.agent_id,
          runner_id: ref.runner_id,
          conversation_id: ref.conversation_id,
          thread_id: ref.thread_id,
          workspace_id: ref.workspace_id,
          event_id: a.event.event_id,
          kind: disposition === 'steered' ? 'steer' : 'queue',
          state: disposition === 'steered' ? 'queued' : 'waiting',
          run_id: disposition === 'steered' ? runId : null,
          position,
          next_run_id: disposition === 'queued' ? runId : null,
          dispatch: disposition === 'queued' ? 'waiting' : null,
          item: { ...c!.item, claimed_run_id: runId, position: position ?? 0 },
          submission: c!.submission,
          pull_mode: null,
          created_at: a.event.received_at,
        }),
      );
      break;
    }
  }
  // The user row is the admission's last statement: on PostgreSQL its COMMIT rides with it.
  return admitted(a.user ? yield* appendTranscriptUnit(a.user, true, true) : null);
}

/** The event's log row, with its disposition (and its steering, its failure at admission). */
function logRow(
  a: AdmissionRows,
  disposition: Disposition | 'failed',
  runId: string | null,
  steering?: Record<string, unknown>,
): NewEventLog {
  return {
    ...a.log,
    run_id: runId,
    metadata: {
      ...a.log.metadata,
      ...(a.conversation || disposition === 'failed' ? { disposition } : {}),
      ...(steering ? { steering } : {}),
      ...(disposition === 'failed' ? { error_code: 'runner.unavailable' } : {}),
    },
  };
}

/**
 * The situation read and, when the conversation is free, the event claimed as started in the same
 * statement (admitUnit's `claimIfFree`): the log row's id (`seq`), or the event recorded first (a
 * duplicate), or neither (busy: nothing written; the caller decides on the situation and claims).
 * Only for a new event prepared to start (`run`, no `terminal`, not a readmission).
 */
function* claimedIfFree(
  a: AdmissionRows,
  c: ConversationRows,
): Unit<{ situation: ConversationSituation; seq?: number; existing?: EventEntity }> {
  const runId = a.event.run_id;
  const r = yield* one<{
    run_id: string | null;
    queued: number | string;
    n: number | string;
    id: number | string | null;
  }>(STEERING_SQL.claimIfFree, [
    ...situationParams(c.ref),
    ...rowParams(EVENT_COLUMNS, a.event, { disposition: 'started', run_id: runId }),
    ...rowParams(EVENT_LOG_COLUMNS, logRow(a, 'started', runId)),
  ]);
  const situation = situationFromRow(r);
  if (r?.id !== null && r?.id !== undefined) {
    return { situation, seq: Number(r.id) };
  }
  // Free and not claimed: the event conflicted with one recorded first.
  return decide(c.table, situation) === 'started' ? { situation, existing: yield* conflicted(a.event) } : { situation };
}

/**
 * The transaction locks an admission takes, as one statement (a round trip each on PostgreSQL,
 * taken in the one lock order: lockKeys): the conversation's (its situation is read under it),
 * the workspace's active-run count's (activeQuotaReached), and the transcript's of the user row it
 * may append (appendTranscriptUnit) — taken before the unit reads anything, so every later read
 * sees what the lock's previous holder committed.
 */
function* admissionLocks(a: AdmissionRows): Unit<void> {
  const keys = [
    ...(a.conversation ? [conversationLockKey(a.conversation.ref)] : []),
    ...(a.active_quota ? [activeQuotaLockKey(a.active_quota)] : []),
    ...(a.user ? [transcriptLockKey(a.user.conversation_id)] : []),
  ];
  if (keys.length > 0) {
    yield* one(keys.length === 1 ? SQL.lockConversation : lockKeys(keys.length), keys);
  }
}

/**
 * The conversation of one an event without a conversation waits in when its runner is held by
 * another process (docs/scale-out.md#routing): a key of its own (never a real conversation's:
 * those are JSON arrays of four), so the run waits alone and the conversation dispatcher of the
 * holding process starts it like any waiting run. `conversation_id` is empty: it names no
 * conversation (the run row stores none).
 */
export function soloConversation(
  runId: string,
  agentId: string,
  runnerId: string,
  workspaceId: string | null,
): ConversationRef {
  return {
    key: JSON.stringify(['run', runId]),
    agent_id: agentId,
    runner_id: runnerId,
    workspace_id: workspaceId,
    conversation_id: '',
    thread_id: null,
  };
}

/** A run's row while it waits in its conversation (started later by the conversation dispatcher). */
export function waitingRunRow(runId: string, eventId: string, c: Omit<ConversationRef, 'key'>, at: number): NewRun {
  return {
    run_id: runId,
    event_id: eventId,
    agent_id: c.agent_id,
    runner_id: c.runner_id,
    conversation_id: c.conversation_id,
    thread_id: c.thread_id,
    workspace_id: c.workspace_id,
    status: 'queued',
    status_reason: 'waiting for the conversation',
    error_code: null,
    retryable: null,
    context: {},
    usage: null,
    authorization: null,
    authorization_hash: null,
    created_at: at,
    started_at: null,
    finished_at: null,
    deadline_at: null,
    cancel_requested_at: null,
  };
}

export interface WaitingStart {
  conversation: ConversationRef;
  item_id: number;
  run_id: string;
  /**
   * The run as prepared now (status running, grants, context without `event_seq`); its
   * `owner_process_id` claims it (attempt + 1: docs/scale-out.md#taking-a-run).
   */
  run: NewRun;
  /**
   * The workspace's `max_active_runs` (docs/tenancy.md#quotas), counted as at admission under the
   * workspace's lock: a waiting run that would exceed it does not start ('quota', nothing
   * written) and keeps waiting. Absent: no such quota.
   */
  active_quota?: ActiveQuota | null;
}

export type WaitingStartOutcome =
  | { started: true; event_seq: number | null; attempt: number }
  | { started: false; why: 'busy' | 'moved' | 'gone' | 'quota' };

/**
 * The deferred start of an admitted event that waited (queued, or re-dispatched): the same
 * decision on the same situation — it starts only when the conversation has no running run and it
 * is the conversation's next waiting item ('busy' / 'moved', nothing written), and the workspace
 * is under its `max_active_runs` ('quota', nothing written); 'gone' when its run
 * ended meanwhile. The event's position is set in the stored context as at admission.
 */
export function* startWaitingUnit(w: WaitingStart): Unit<WaitingStartOutcome> {
  // The conversation's lock and, with a quota, the workspace's (activeQuotaReached) as one
  // statement, before anything is read; the run row its claim updates is declared (Op.locks), so
  // a PostgreSQL group locks it with its other locks, in the one order (docs/scale-out.md#one-lock-order).
  const keys = [conversationLockKey(w.conversation), ...(w.active_quota ? [activeQuotaLockKey(w.active_quota)] : [])];
  yield* one(keys.length === 1 ? SQL.lockConversation : lockKeys(keys.length), keys, { runs: [w.run_id] });
  const situation = yield* situationOf(w.conversation);
  if (situation.running_run_id) {
    return { started: false, why: 'busy' };
  }
  const next = yield* one<Row>(STEERING_SQL.nextWaiting, [w.conversation.key]);
  if (!next || Number(next.id) !== w.item_id) {
    return { started: false, why: 'moved' };
  }
  // The same count under the same locks as admission (the conversation's and the workspace's,
  // taken above): the start of a waiting or routed run never takes the workspace past its limit,
  // at any process.
  if (w.active_quota) {
    if ((yield* activeQuotaReached(w.active_quota)) !== null) {
      return { started: false, why: 'quota' };
    }
  }
  const seq = yield* one<{ id: number | string | null }>(STEERING_SQL.eventSeq, [w.run.event_id]);
  const eventSeq = seq?.id === null || seq?.id === undefined ? null : Number(seq.id);
  const r = w.run;
  const [snapshotHash, own] = yield* storeSnapshotUnit(r.authorization, r.started_at ?? r.created_at);
  const claimed = yield* one<{ attempt: number | string }>(STEERING_SQL.startQueuedRun, [
    json(eventSeq === null ? r.context : withEventSeq(r.context, eventSeq)),
    snapshotHash,
    own,
    r.authorization_hash,
    r.started_at,
    r.deadline_at,
    r.owner_process_id ?? null,
    w.run_id,
  ]);
  yield* exec(STEERING_SQL.markDispatched, [claimed ? 'started' : 'failed', r.started_at, w.item_id]);
  return claimed
    ? { started: true, event_seq: eventSeq, attempt: Number(claimed.attempt) }
    : { started: false, why: 'gone' };
}
