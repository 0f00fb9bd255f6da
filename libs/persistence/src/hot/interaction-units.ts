/**
 * Interaction rows written for a run by its owner (docs/scale-out.md#fenced-writes,
 * docs/interactions.md): a new request, an elicitation's early close, the superseding of older
 * requests and the claim of an elicitation's answer — each in one unit that starts with the run's
 * fence, so a process that lost the run's lease creates and answers nothing for it. SQL of both
 * dialects. A platform's submission of a runner's request is not the owner's write (any process
 * takes it, and it becomes a new event): InteractionsRepository.claim, unfenced.
 */
import type { InteractionEntity, InteractionStatus, JsonObject } from '../entities';
import { insert, reading, stmt } from './hot-sql';
import { fenceCallUnit, fenceUnit, type RunLease } from './run-fence';
import { exec, json, rowParams, type Unit } from './unit';

export const INTERACTION_COLUMNS = [
  'id',
  'interaction_id',
  'run_id',
  'agent_id',
  'runner_id',
  'conversation_id',
  'thread_id',
  'actor_id',
  'kind',
  'status',
  'status_reason',
  'request',
  'delivery_target',
  'callback_token_hash',
  'replaces_id',
  'expires_at',
  'submission',
  'submitted_at',
  'submission_event_id',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof InteractionEntity)[];

export const INTERACTION_SQL = {
  insert: insert('insert_interaction', 'interactions', INTERACTION_COLUMNS),
  /** `pending` → a closed status (expired early, superseded), once. */
  close: reading(
    stmt(
      'close_interaction',
      `UPDATE "interactions" SET "status" = ?, "status_reason" = ?, "updated_at" = ? WHERE "id" = ? AND "status" = 'pending'`,
    ),
    'interactions',
  ),
  /** `pending` → `submitted`, only while pending and not past its expiry. */
  claim: reading(
    stmt(
      'claim_interaction',
      `UPDATE "interactions" SET "status" = 'submitted', "submission" = ?, "submitted_at" = ?, "submission_event_id" = ?, "updated_at" = ?
       WHERE "id" = ? AND "status" = 'pending' AND "expires_at" > ?`,
    ),
    'interactions',
  ),
} as const;

/**
 * Which fence a write names: `run` for what the run's own path writes (a result's request, the
 * close of its elicitation or of older requests — also after the run's end, while this process
 * still holds it); `call` for what a call inside the running run writes (an MCP elicitation and
 * its answer), which must also find the run `running` (run-fence.ts FENCE_CALL).
 */
export interface InteractionFence {
  lease: RunLease | null;
  kind: 'run' | 'call';
}

function* fenced(f: InteractionFence | null): Unit<void> {
  if (f?.kind === 'call') {
    yield* fenceCallUnit(f.lease);
  } else {
    yield* fenceUnit(f?.lease ?? null);
  }
}

/** A new pending interaction of the run; FencedError (nothing written) when the lease is lost. */
export function* insertInteractionUnit(row: InteractionEntity, f: InteractionFence | null): Unit<void> {
  yield* fenced(f);
  yield* exec(INTERACTION_SQL.insert, rowParams(INTERACTION_COLUMNS, row));
}

/** `pending` → `status` once (true when this unit closed it); fenced like insertInteractionUnit. */
export function* closeInteractionUnit(
  id: string,
  status: Exclude<InteractionStatus, 'pending' | 'submitted'>,
  reason: string,
  now: number,
  f: InteractionFence | null,
): Unit<boolean> {
  yield* fenced(f);
  return (yield* exec(INTERACTION_SQL.close, [status, reason, now, id])) > 0;
}

/** `pending` → `submitted` while not past its expiry (true when this unit claimed it); fenced. */
export function* claimInteractionUnit(
  id: string,
  submission: JsonObject,
  eventId: string,
  now: number,
  f: InteractionFence | null,
): Unit<boolean> {
  yield* fenced(f);
  return (yield* exec(INTERACTION_SQL.claim, [json(submission), now, eventId, now, id, now])) > 0;
}
