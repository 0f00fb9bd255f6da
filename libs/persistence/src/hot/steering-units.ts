/**
 * The units of work of conversations and steering (SPEC §9), for the one writer: admission of an
 * event into a conversation (start, steer, queue or reject, decided under the conversation's
 * lock), a steering pull, the release of a run's undrained queue at its end, and the start or
 * failure of a run that waited. Each is one transaction.
 */
import { randomUUID } from 'node:crypto';
import type { EventEntity, JsonObject } from '../entities';
import type { NewTranscriptRow } from '../repositories/context.repository';
import { EVENT_COLUMNS, RESULT_COLUMNS, RUN_COLUMNS, SQL } from './hot-sql';
import {
  appendTranscriptUnit,
  eventFromRow,
  eventLogUnit,
  finishUnit,
  type NewEventLog,
  type NewResult,
  type NewRun,
  type RunEnd,
  type StateWrite,
} from './run-units';
import { STEERING_COLUMNS, STEERING_SQL } from './steering-sql';
import { bool, exec, json, one, rows, type SqlValue, type Unit } from './unit';

/** One conversation: agent + conversation_id + thread_id, and the runner its agent binds. */
export interface ConversationRef {
  /** Canonical key of the three ids (see conversationKey). */
  key: string;
  agent_id: string;
  runner_id: string;
  conversation_id: string;
  thread_id: string | null;
}

export function conversationKey(agentId: string, conversationId: string, threadId: string | null): string {
  return JSON.stringify([agentId, conversationId, threadId ?? '']);
}

/** What admission sees of a conversation, under its lock. */
export interface ConversationSituation {
  running_run_id: string | null;
  /** Items queued on the running run and not pulled yet. */
  queued_on_run: number;
  /** Items waiting to start as runs of their own. */
  waiting: number;
}

export type Disposition = 'started' | 'steered' | 'queued' | 'rejected';

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

type Row = Record<string, unknown>;

export interface SteeringRow {
  id: number;
  conversation_key: string;
  agent_id: string;
  runner_id: string;
  conversation_id: string;
  thread_id: string | null;
  event_id: string;
  kind: 'steer' | 'queue';
  state: string;
  run_id: string | null;
  position: number | null;
  next_run_id: string | null;
  dispatch: string | null;
  item: JsonObject;
  submission: JsonObject;
  created_at: number;
  redispatched_at: number | null;
}

export function steeringFromRow(r: Row): SteeringRow {
  const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    id: Number(r.id),
    conversation_key: String(r.conversation_key),
    agent_id: String(r.agent_id),
    runner_id: String(r.runner_id),
    conversation_id: String(r.conversation_id),
    thread_id: (r.thread_id as string | null) ?? null,
    event_id: String(r.event_id),
    kind: r.kind as 'steer' | 'queue',
    state: String(r.state),
    run_id: (r.run_id as string | null) ?? null,
    position: n(r.position),
    next_run_id: (r.next_run_id as string | null) ?? null,
    dispatch: (r.dispatch as string | null) ?? null,
    item: JSON.parse(String(r.item)) as JsonObject,
    submission: JSON.parse(String(r.submission)) as JsonObject,
    created_at: Number(r.created_at),
    redispatched_at: n(r.redispatched_at),
  };
}

function params(columns: readonly string[], row: Row): SqlValue[] {
  return columns.map((c) => {
    const v = row[c];
    if (v === undefined || v === null) {
      return null;
    }
    if (typeof v === 'boolean') {
      return bool(v);
    }
    return typeof v === 'object' ? json(v) : (v as SqlValue);
  });
}

function* lock(c: ConversationRef): Unit<void> {
  yield* one(SQL.lockConversation, [`conversation:${c.key}`]);
}

export function* situationOf(c: ConversationRef): Unit<ConversationSituation> {
  const running = yield* one<{ run_id: string }>(STEERING_SQL.runningRun, [
    c.agent_id,
    c.conversation_id,
    c.thread_id ?? '',
  ]);
  const waiting = yield* one<{ n: number | string }>(STEERING_SQL.waitingCount, [c.key]);
  const queue = running ? yield* one<{ queued: number | string }>(STEERING_SQL.runQueue, [running.run_id]) : undefined;
  return {
    running_run_id: running?.run_id ?? null,
    queued_on_run: Number(queue?.queued ?? 0),
    waiting: Number(waiting?.n ?? 0),
  };
}

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
    : yield* exec(SQL.insertEvent, params(EVENT_COLUMNS, e as unknown as Row));
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
  yield* lock(a.conversation);
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
      yield* exec(SQL.insertRun, params(RUN_COLUMNS, { ...run, context: a.start!.contextAt(eventSeq) }));
      break;
    }
    case 'failed':
      yield* exec(SQL.insertRun, params(RUN_COLUMNS, a.unavailable.run));
      yield* exec(SQL.insertResult, params(RESULT_COLUMNS, a.unavailable.terminal));
      break;
    case 'steered':
    case 'queued': {
      if (disposition === 'queued') {
        yield* exec(SQL.insertRun, params(RUN_COLUMNS, a.queuedRun));
      }
      const c = a.conversation;
      yield* exec(
        STEERING_SQL.insertItem,
        params(STEERING_COLUMNS, {
          conversation_key: c.key,
          agent_id: c.agent_id,
          runner_id: c.runner_id,
          conversation_id: c.conversation_id,
          thread_id: c.thread_id,
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

/** The event-log row of a steering transition of an item. */
function transition(
  item: SteeringRow,
  type: string,
  runId: string | null,
  metadata: JsonObject,
  at: number,
): NewEventLog {
  return {
    event_id: item.event_id,
    event_type: type,
    event_time: null,
    source: 'system',
    agent_id: item.agent_id,
    conversation_id: item.conversation_id,
    thread_id: item.thread_id,
    bot_id: null,
    workspace_id: null,
    actor_type: null,
    actor_id: null,
    actor_name: null,
    subject_type: null,
    subject_id: null,
    input_summary: '',
    run_id: runId,
    runner_id: item.runner_id,
    metadata: { steering: metadata },
    created_at: at,
  };
}

/** Up to `limit` queued items of the run, oldest first, each handed out exactly once (`steering.injected`). */
export function* pullUnit(runId: string, limit: number, mode: string, at: number): Unit<SteeringRow[]> {
  const found = (yield* rows<Row>(STEERING_SQL.queuedOfRun, [runId, limit])).map(steeringFromRow);
  const out: SteeringRow[] = [];
  for (const item of found) {
    if ((yield* exec(STEERING_SQL.markInjected, [at, mode, item.id])) === 1) {
      yield* eventLogUnit(
        transition(
          item,
          'steering.injected',
          runId,
          { status: 'injected', pull_mode: mode, position: item.position },
          at,
        ),
      );
      out.push(item);
    }
  }
  return out;
}

/** A run's row when it has to wait (started later by the conversation dispatcher). */
export function queuedRunRow(runId: string, eventId: string, c: Omit<ConversationRef, 'key'>, at: number): NewRun {
  return {
    run_id: runId,
    event_id: eventId,
    agent_id: c.agent_id,
    runner_id: c.runner_id,
    conversation_id: c.conversation_id,
    thread_id: c.thread_id,
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

/**
 * Zero loss at a run's end: every item still queued on it is recorded `steering.dropped`, then
 * re-dispatched as a run of its own (queued, started in arrival order). Returns their number.
 */
export function* releaseRunUnit(runId: string, at: number): Unit<number> {
  const left = (yield* rows<Row>(STEERING_SQL.queuedOfRun, [runId, 1_000_000])).map(steeringFromRow);
  for (const item of left) {
    const next = randomUUID();
    if ((yield* exec(STEERING_SQL.markRedispatched, [at, at, next, item.id])) !== 1) {
      continue;
    }
    yield* exec(SQL.insertRun, params(RUN_COLUMNS, queuedRunRow(next, item.event_id, item, at)));
    const position = item.position;
    yield* eventLogUnit(
      transition(item, 'steering.dropped', runId, { status: 'dropped', reason: 'run_ended', position }, at),
    );
    yield* eventLogUnit(
      transition(
        item,
        'steering.redispatched',
        next,
        { status: 'redispatched', from_run_id: runId, next_run_id: next },
        at,
      ),
    );
  }
  return left.length;
}

/** The end of a run (finishUnit) and, when it ended now, the release of its steering queue. */
export function* endRunUnit(
  terminal: NewResult,
  end: RunEnd,
  state: StateWrite | null,
  assistant: NewTranscriptRow | null,
): Unit<{ ended: boolean; released: number }> {
  const ended = yield* finishUnit(terminal, end, state, assistant);
  const released = ended ? yield* releaseRunUnit(terminal.run_id, end.finished_at) : 0;
  return { ended, released };
}

export interface QueuedStart {
  conversation: ConversationRef;
  item_id: number;
  run_id: string;
  context: JsonObject;
  authorization: JsonObject;
  authorization_hash: string;
  started_at: number;
  deadline_at: number | null;
}

/**
 * A waiting run starts — only if the conversation has no running run and it is still the
 * conversation's next item (else 'busy' / 'moved', nothing written); 'gone' when the run ended meanwhile.
 */
export function* startQueuedUnit(s: QueuedStart): Unit<'started' | 'busy' | 'moved' | 'gone'> {
  yield* lock(s.conversation);
  const situation = yield* situationOf(s.conversation);
  if (situation.running_run_id) {
    return 'busy';
  }
  const next = yield* one<Row>(STEERING_SQL.nextWaiting, [s.conversation.key]);
  if (!next || Number(next.id) !== s.item_id) {
    return 'moved';
  }
  const changed = yield* exec(STEERING_SQL.startQueuedRun, [
    json(s.context),
    json(s.authorization),
    s.authorization_hash,
    s.started_at,
    s.deadline_at,
    s.run_id,
  ]);
  yield* exec(STEERING_SQL.markDispatched, [changed ? 'started' : 'failed', s.started_at, s.item_id]);
  return changed ? 'started' : 'gone';
}

/**
 * A waiting run that cannot start (no runner in time, agent gone, cancelled) ends with its
 * terminal result — only while it is still `queued` (false, nothing written, once it started).
 */
export function* failQueuedUnit(itemId: number, terminal: NewResult, end: RunEnd): Unit<boolean> {
  const changed = yield* exec(STEERING_SQL.finishQueuedRun, [
    end.status,
    end.status_reason,
    end.error_code,
    bool(end.retryable),
    end.finished_at,
    terminal.run_id,
  ]);
  if (changed === 0) {
    return false;
  }
  yield* exec(STEERING_SQL.markDispatched, ['failed', end.finished_at, itemId]);
  yield* exec(SQL.insertResult, params(RESULT_COLUMNS, terminal));
  return true;
}

/** Boot: runs that ended with items queued (a crash between the end and the release) are released. */
export function* releaseOrphansUnit(at: number): Unit<number> {
  const runs = yield* rows<{ run_id: string }>(STEERING_SQL.endedWithQueued, []);
  let n = 0;
  for (const r of runs) {
    n += yield* releaseRunUnit(r.run_id, at);
  }
  return n;
}
