/**
 * Admission of an event into a conversation (docs/conversations-and-steering.md), for the one
 * writer: start, steer, queue or reject, decided under the conversation's lock, and written in one
 * transaction.
 */
import type { EventEntity, JsonObject } from '../entities';
import type { NewTranscriptRow } from '../repositories/context.repository';
import { EVENT_COLUMNS, RESULT_COLUMNS, RUN_COLUMNS, SQL } from './hot-sql';
import {
  appendTranscriptUnit,
  eventFromRow,
  eventLogUnit,
  type NewEventLog,
  type NewResult,
  type NewRun,
} from './run-units';
import { STEERING_COLUMNS, STEERING_SQL } from './steering-sql';
import {
  conversationLock,
  situationOf,
  type ConversationRef,
  type ConversationSituation,
  type Disposition,
  type Row,
} from './steering-rows';
import { exec, one, rowParams, type Unit } from './unit';

export interface ConversationAdmitRows {
  conversation: ConversationRef;
  /** The event row; disposition and run_id are set by the decision. */
  event: EventEntity;
  readmit: boolean;
  /** The policy rule (pure: the unit may run twice). */
  decide: (s: ConversationSituation) => Disposition;
  log: NewEventLog;
  user: NewTranscriptRow | null;
  /** The run to start now; null when its runner is not connected. */
  start: { run: NewRun; contextAt: (eventSeq: number) => NewRun['context'] } | null;
  /** Started with no runner connected: the run failed `runner.unavailable`, with its terminal result. */
  unavailable: { run: NewRun; terminal: NewResult };
  /** The run this event becomes if it has to wait (status `queued`). */
  queuedRun: NewRun;
  /** The SteeringInputItem (given its run and position) and the full submission. */
  item: (runId: string, position: number) => JsonObject;
  submission: JsonObject;
}

export type ConversationAdmitOutcome =
  | { admitted: false; existing: EventEntity }
  | {
      admitted: true;
      disposition: Disposition | 'failed';
      /** The run it concerns: started, steered into, queued as; the running run for a rejection (if any). */
      run_id: string | null;
      event_seq: number;
      position: number | null;
      /** The running run (steered into, rejected by, or to interrupt). */
      running_run_id: string | null;
    };

/** Inserts the event row (or re-admits a retry); the existing event when it lost to a duplicate. */
function* claimEvent(e: EventEntity, readmit: boolean): Unit<EventEntity | undefined> {
  if (readmit && e.idempotency_key) {
    const holder = yield* one<Row>(SQL.eventByKey, [e.idempotency_key]);
    if (holder && holder.event_id !== e.event_id) {
      return eventFromRow(holder);
    }
  }
  const claimed = readmit
    ? yield* exec(STEERING_SQL.readmitEvent, [
        e.disposition,
        e.run_id,
        e.received_at,
        e.idempotency_key,
        e.event_id,
        e.body_hash,
      ])
    : yield* exec(SQL.insertEvent, rowParams(EVENT_COLUMNS, e as unknown as Row));
  if (claimed > 0) {
    return undefined;
  }
  const byKey = e.idempotency_key ? yield* one<Row>(SQL.eventByKey, [e.idempotency_key]) : undefined;
  const row = byKey ?? (yield* one<Row>(SQL.eventById, [e.event_id]));
  if (!row) {
    throw new Error(`event ${e.event_id} conflicted but cannot be read`);
  }
  return eventFromRow(row);
}

/**
 * Admission of an event into a conversation, under the conversation's lock: the policy decides
 * from what is running and waiting; then the event, its log row, and — by disposition — its run,
 * its steering item (with position) or its queued run, and the user transcript row are written
 * together. A duplicate (maybe concurrent) writes nothing and returns the event recorded first.
 */
export function* admitConversationUnit(a: ConversationAdmitRows): Unit<ConversationAdmitOutcome> {
  yield* conversationLock(a.conversation);
  const s = yield* situationOf(a.conversation);
  const decided = a.decide(s);
  const disposition = decided === 'started' && !a.start ? 'failed' : decided;
  const runId =
    disposition === 'started'
      ? a.start!.run.run_id
      : disposition === 'failed'
        ? a.unavailable.run.run_id
        : disposition === 'queued'
          ? a.queuedRun.run_id
          : s.running_run_id;
  const existing = yield* claimEvent({ ...a.event, disposition, run_id: runId }, a.readmit);
  if (existing) {
    return { admitted: false, existing };
  }
  const queue =
    disposition === 'steered' && runId ? yield* one<{ last: number | string }>(STEERING_SQL.runQueue, [runId]) : null;
  const position = queue ? Number(queue.last) + 1 : null;
  const steering =
    disposition === 'steered'
      ? { status: 'queued', run_id: runId, position }
      : disposition === 'queued'
        ? { status: 'waiting', next_run_id: runId }
        : undefined;
  const eventSeq = yield* eventLogUnit({
    ...a.log,
    run_id: runId,
    metadata: {
      ...a.log.metadata,
      disposition,
      ...(steering ? { steering } : {}),
      ...(disposition === 'failed' ? { error_code: 'runner.unavailable' } : {}),
    },
  });
  switch (disposition) {
    case 'started': {
      const run = a.start!.run;
      yield* exec(SQL.insertRun, rowParams(RUN_COLUMNS, { ...run, context: a.start!.contextAt(eventSeq) }));
      break;
    }
    case 'failed':
      yield* exec(SQL.insertRun, rowParams(RUN_COLUMNS, a.unavailable.run));
      yield* exec(SQL.insertResult, rowParams(RESULT_COLUMNS, a.unavailable.terminal));
      break;
    case 'steered':
    case 'queued': {
      if (disposition === 'queued') {
        yield* exec(SQL.insertRun, rowParams(RUN_COLUMNS, a.queuedRun));
      }
      const c = a.conversation;
      yield* exec(
        STEERING_SQL.insertItem,
        rowParams(STEERING_COLUMNS, {
          conversation_key: c.key,
          agent_id: c.agent_id,
          runner_id: c.runner_id,
          conversation_id: c.conversation_id,
          thread_id: c.thread_id,
          workspace_id: c.workspace_id,
          event_id: a.event.event_id,
          kind: disposition === 'steered' ? 'steer' : 'queue',
          state: disposition === 'steered' ? 'queued' : 'waiting',
          run_id: disposition === 'steered' ? runId : null,
          position,
          next_run_id: disposition === 'queued' ? runId : null,
          dispatch: disposition === 'queued' ? 'waiting' : null,
          item: a.item(runId!, position ?? 0),
          submission: a.submission,
          pull_mode: null,
          created_at: a.event.received_at,
        }),
      );
      break;
    }
    case 'rejected':
      // Nothing else changes: no transcript row, no run.
      return { admitted: true, disposition, run_id: runId, event_seq: eventSeq, position, running_run_id: runId };
  }
  if (a.user && disposition !== 'failed') {
    yield* appendTranscriptUnit(a.user);
  }
  return {
    admitted: true,
    disposition,
    run_id: runId,
    event_seq: eventSeq,
    position,
    running_run_id: s.running_run_id,
  };
}
