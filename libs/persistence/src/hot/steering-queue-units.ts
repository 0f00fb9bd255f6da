/**
 * The steering queue of a run and the runs that wait in a conversation
 * (docs/conversations-and-steering.md), for the one writer: a pull (each item handed out once), the
 * release of a run's undrained items at its end, the failure of a waiting run, and the release of
 * orphans at boot (its start: admission-unit.ts). Each is one transaction.
 */
import type { JsonObject } from '../entities';
import { waitingRunRow } from './admission-unit';
import type { NewTranscriptRow } from '../repositories/context.repository';
import type { NewOutboxRow } from './outbox-units';
import { orderedUuid } from './ordered-id';
import { fenceUnit, type RunLease } from './run-fence';
import { RESULT_COLUMNS, SQL } from './hot-sql';
import {
  eventLogUnit,
  finishLookingUnit,
  finishUnit,
  insertRunUnit,
  type NewEventLog,
  type NewResult,
  type RunEnd,
  type StateWrite,
} from './run-units';
import { STEERING_SQL } from './steering-sql';
import { steeringFromRow, type Row, type SteeringRow } from './steering-rows';
import { bool, exec, rowParams, rows, type Unit } from './unit';

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
    workspace_id: item.workspace_id,
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

/**
 * Up to `limit` queued items of the run, oldest first, each handed out exactly once
 * (`steering.injected`) — fenced first by the run's lease when given (run-fence.ts): a process
 * that lost the run hands nothing out.
 */
export function* pullUnit(
  runId: string,
  limit: number,
  mode: string,
  at: number,
  lease: RunLease | null = null,
): Unit<SteeringRow[]> {
  yield* fenceUnit(lease);
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

/**
 * Zero loss at a run's end: every item still queued on it is recorded `steering.dropped`, then
 * re-dispatched as a run of its own (queued, started in arrival order). Returns their number.
 */
export function* releaseRunUnit(runId: string, at: number): Unit<number> {
  const left = (yield* rows<Row>(STEERING_SQL.queuedOfRun, [runId, 1_000_000])).map(steeringFromRow);
  return yield* releaseItemsUnit(runId, left, at);
}

/** The release of `left`, the run's items not pulled yet (releaseRunUnit). */
function* releaseItemsUnit(runId: string, left: readonly SteeringRow[], at: number): Unit<number> {
  for (const item of left) {
    const next = orderedUuid();
    if ((yield* exec(STEERING_SQL.markRedispatched, [at, at, next, item.id])) !== 1) {
      continue;
    }
    yield* insertRunUnit(waitingRunRow(next, item.event_id, item, at));
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

/**
 * The end of a run (finishUnit) and, when it ended now, the release of its steering queue; with
 * the run's conversation key, also whether a run waits in the conversation (`waiting`: its items
 * just released, or one queued before this read) — the only case its end signals `conversation`
 * (docs/scale-out.md#signal-bus). An item queued by another process after this read and before
 * this commit is started by the dispatcher's poll; on SQLite (one writer) there is no such item.
 */
export function* endRunUnit(
  terminal: NewResult,
  end: RunEnd,
  state: StateWrite | null,
  assistant: NewTranscriptRow | null,
  outbox: readonly NewOutboxRow[] = [],
  lease: RunLease | null = null,
  conversationKey: string | null = null,
): Unit<{ ended: boolean; released: number; waiting: boolean }> {
  if (conversationKey !== null && assistant !== null) {
    // The end's transcript append answers the conversation's wait and the run's queued count (one
    // statement, finishLookingUnit); the items themselves are read only when some are queued.
    const { ended, look } = yield* finishLookingUnit(terminal, end, state, assistant, outbox, lease, conversationKey);
    if (!ended || look === null) {
      return { ended, released: 0, waiting: false };
    }
    const left =
      look.queued > 0
        ? (yield* rows<Row>(STEERING_SQL.queuedOfRun, [terminal.run_id, 1_000_000])).map(steeringFromRow)
        : [];
    const released = yield* releaseItemsUnit(terminal.run_id, left, end.finished_at);
    return { ended, released, waiting: released > 0 || look.waiting };
  }
  const ended = yield* finishUnit(terminal, end, state, assistant, outbox, lease);
  if (!ended) {
    return { ended, released: 0, waiting: false };
  }
  if (conversationKey === null) {
    return { ended, released: yield* releaseRunUnit(terminal.run_id, end.finished_at), waiting: false };
  }
  // The release's read of the run's queue carries the conversation's wait (one statement).
  const found = yield* rows<Row>(STEERING_SQL.queuedOfRunAndWaiting, [conversationKey, terminal.run_id, 1_000_000]);
  const left = found.filter((r) => r.id !== null && r.id !== undefined).map(steeringFromRow);
  const released = yield* releaseItemsUnit(terminal.run_id, left, end.finished_at);
  const waitedBefore = Number(found[0]?.conv_waiting ?? 0) > 0;
  return { ended, released, waiting: released > 0 || waitedBefore };
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
  yield* exec(SQL.insertResult, rowParams(RESULT_COLUMNS, terminal));
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
