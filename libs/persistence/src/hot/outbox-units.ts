/**
 * The delivery outbox on the one writer (issue 10): a run's delivery ops are inserted in the same
 * unit — so the same group commit — as the result they derive from (see `resultUnit` and
 * `finishUnit`); the webhook worker's state changes are units of their own. SQL of both dialects.
 */
import { batchableInsert, stmt } from './hot-sql';
import { exec, json, one, rows, type SqlValue, type Unit } from './unit';

export const OUTBOX_COLUMNS = [
  'delivery_id',
  'run_id',
  'agent_id',
  'sequence',
  'op',
  'idempotency_key',
  'reply_target',
  'target_delivery_id',
  'result_sequence',
  'payload',
  'created_at',
  'webhook_url',
  'webhook_secret_env',
  'webhook_state',
] as const;

export type WebhookState = 'none' | 'pending' | 'delivered' | 'failed';

export interface NewOutboxRow {
  delivery_id: string;
  run_id: string;
  agent_id: string;
  sequence: number;
  op: string;
  idempotency_key: string;
  reply_target: Record<string, unknown> | null;
  target_delivery_id: string | null;
  result_sequence: number | null;
  payload: Record<string, unknown>;
  created_at: number;
  webhook_url: string | null;
  webhook_secret_env: string | null;
  webhook_state: 'none' | 'pending';
}

export interface OutboxRow extends Omit<NewOutboxRow, 'webhook_state'> {
  id: number;
  webhook_state: WebhookState;
  attempts: number;
  next_attempt_at: number | null;
  last_error: string | null;
  delivered_at: number | null;
}

const SELECT = `SELECT * FROM "delivery_outbox"`;

/** The webhook worker's queue (below), with an extra condition on the head op `o`. */
function pendingHeadsSql(extra: string): string {
  return `SELECT * FROM (
       SELECT o.*, ROW_NUMBER() OVER (
         PARTITION BY o."webhook_url" ORDER BY COALESCE(o."next_attempt_at", o."created_at") ASC, o."id" ASC) AS "endpoint_rank"
       FROM "delivery_outbox" AS o WHERE o."webhook_state" = 'pending' AND o."sequence" = (
         SELECT MIN(p."sequence") FROM "delivery_outbox" AS p WHERE p."run_id" = o."run_id" AND p."webhook_state" = 'pending')
       ${extra}
     ) AS h WHERE h."endpoint_rank" <= ?
     ORDER BY COALESCE(h."next_attempt_at", h."created_at") ASC, h."id" ASC LIMIT ?`;
}

export const OUTBOX_SQL = {
  insert: batchableInsert('outbox_insert', 'delivery_outbox', OUTBOX_COLUMNS),
  /** A run's ops after a sequence (the deliveries SSE). */
  after: stmt('outbox_after', `${SELECT} WHERE "run_id" = ? AND "sequence" > ? ORDER BY "sequence" ASC LIMIT ?`),
  /**
   * The webhook worker's queue: of each run with pending ops, the first one (ops of a run are
   * pushed in order), due soonest first, at most `?` per webhook URL — so one endpoint with many
   * runs cannot hide the heads of the others from the worker's fair scheduling.
   */
  pendingHeads: stmt('outbox_pending_heads', pendingHeadsSql('')),
  /**
   * The same queue as one process sees it (docs/scale-out.md#webhook-outbox-lease): without the
   * runs another live process is sending (their lease is held); free runs, this process's own and
   * those of dead senders stay in it, to be claimed.
   */
  pendingHeadsFor: stmt(
    'outbox_pending_heads_for',
    pendingHeadsSql(`AND NOT EXISTS (
         SELECT 1 FROM "delivery_senders" AS s WHERE s."run_id" = o."run_id" AND s."process_id" <> ?
           AND EXISTS (SELECT 1 FROM "host_processes" AS hp WHERE hp."id" = s."process_id"))`),
  ),
  delivered: stmt(
    'outbox_delivered',
    `UPDATE "delivery_outbox" SET "webhook_state" = 'delivered', "attempts" = ?, "delivered_at" = ?, "last_error" = ?
     WHERE "delivery_id" = ? AND "webhook_state" = 'pending'`,
  ),
  retry: stmt(
    'outbox_retry',
    `UPDATE "delivery_outbox" SET "attempts" = ?, "next_attempt_at" = ?, "last_error" = ?
     WHERE "delivery_id" = ? AND "webhook_state" = 'pending'`,
  ),
  failed: stmt(
    'outbox_failed',
    `UPDATE "delivery_outbox" SET "webhook_state" = 'failed', "attempts" = ?, "last_error" = ?
     WHERE "delivery_id" = ? AND "webhook_state" = 'pending'`,
  ),
  /** The ops of a run after one that failed: failed too, so nothing arrives out of order. */
  failAfter: stmt(
    'outbox_fail_after',
    `UPDATE "delivery_outbox" SET "webhook_state" = 'failed', "last_error" = ?
     WHERE "run_id" = ? AND "sequence" > ? AND "webhook_state" = 'pending'`,
  ),
  /**
   * An admin's retry of a run's failed ops (`POST /v1/admin/runs/{run_id}/deliveries/retry`): pending
   * again with a fresh attempt budget, due now; the last error stays until an attempt replaces it.
   */
  retryFailed: stmt(
    'outbox_retry_failed',
    `UPDATE "delivery_outbox" SET "webhook_state" = 'pending', "attempts" = 0, "next_attempt_at" = NULL
     WHERE "run_id" = ? AND "webhook_state" = 'failed'`,
  ),
  /** Failed webhook ops, newest first, for the admin API (cursor: the last id of the previous page). */
  failedPage: stmt(
    'outbox_failed_page',
    `${SELECT} WHERE "webhook_state" = 'failed' AND "id" < ? ORDER BY "id" DESC LIMIT ?`,
  ),
  /** Creation time of the oldest webhook op still pending (the outbox lag, read at scrape time). */
  oldestPending: stmt(
    'outbox_oldest_pending',
    `SELECT MIN("created_at") AS "t" FROM "delivery_outbox" WHERE "webhook_state" = 'pending'`,
  ),
  /** A run's last ops, newest first. */
  last: stmt('outbox_last', `${SELECT} WHERE "run_id" = ? ORDER BY "sequence" DESC LIMIT ?`),
  /** Every op of one run (admin), in order. */
  ofRun: stmt('outbox_of_run', `${SELECT} WHERE "run_id" = ? ORDER BY "sequence" ASC LIMIT ?`),
} as const;

type Row = Record<string, unknown>;

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
const obj = (v: unknown): Record<string, unknown> | null =>
  typeof v === 'string' ? (JSON.parse(v) as Record<string, unknown>) : null;

export function outboxFromRow(r: Row): OutboxRow {
  return {
    id: Number(r.id),
    delivery_id: String(r.delivery_id),
    run_id: String(r.run_id),
    agent_id: String(r.agent_id),
    sequence: Number(r.sequence),
    op: String(r.op),
    idempotency_key: String(r.idempotency_key),
    reply_target: obj(r.reply_target),
    target_delivery_id: (r.target_delivery_id as string | null) ?? null,
    result_sequence: num(r.result_sequence),
    payload: obj(r.payload) ?? {},
    created_at: Number(r.created_at),
    webhook_url: (r.webhook_url as string | null) ?? null,
    webhook_secret_env: (r.webhook_secret_env as string | null) ?? null,
    webhook_state: String(r.webhook_state) as WebhookState,
    attempts: Number(r.attempts),
    next_attempt_at: num(r.next_attempt_at),
    last_error: (r.last_error as string | null) ?? null,
    delivered_at: num(r.delivered_at),
  };
}

function values(r: NewOutboxRow): SqlValue[] {
  return OUTBOX_COLUMNS.map((c) => {
    const v = r[c];
    return v === null || typeof v !== 'object' ? v : json(v);
  });
}

/** Appends delivery ops; called inside the unit of the result they derive from, or alone (timed edits). */
export function* outboxUnit(ops: readonly NewOutboxRow[]): Unit<void> {
  for (const r of ops) {
    yield* exec(OUTBOX_SQL.insert, values(r));
  }
}

export function* outboxAfterUnit(runId: string, after: number, limit: number): Unit<OutboxRow[]> {
  return (yield* rows<Row>(OUTBOX_SQL.after, [runId, after, limit])).map(outboxFromRow);
}

/**
 * Pending head ops, oldest due first, at most `perEndpoint` per webhook URL and `limit` in all;
 * with `sender`, without the runs another live process holds the lease of.
 */
export function* pendingHeadsUnit(perEndpoint: number, limit: number, sender?: string): Unit<OutboxRow[]> {
  const found =
    sender === undefined
      ? yield* rows<Row>(OUTBOX_SQL.pendingHeads, [perEndpoint, limit])
      : yield* rows<Row>(OUTBOX_SQL.pendingHeadsFor, [sender, perEndpoint, limit]);
  return found.map(outboxFromRow);
}

export function* webhookDeliveredUnit(id: string, attempts: number, at: number, note: string | null): Unit<void> {
  yield* exec(OUTBOX_SQL.delivered, [attempts, at, note, id]);
}

export function* webhookRetryUnit(id: string, attempts: number, nextAt: number, error: string): Unit<void> {
  yield* exec(OUTBOX_SQL.retry, [attempts, nextAt, error, id]);
}

/** An op out of retries: failed, with every later op of its run (they are never sent before it). */
export function* webhookFailedUnit(op: OutboxRow, attempts: number, error: string): Unit<number> {
  yield* exec(OUTBOX_SQL.failed, [attempts, error, op.delivery_id]);
  return yield* exec(OUTBOX_SQL.failAfter, [
    `not sent: op ${op.sequence} of the run failed before it`,
    op.run_id,
    op.sequence,
  ]);
}

/** Puts a run's failed webhook ops back in the queue; how many. */
export function* webhookRetryFailedUnit(runId: string): Unit<number> {
  return yield* exec(OUTBOX_SQL.retryFailed, [runId]);
}

export function* oldestPendingWebhookUnit(): Unit<number | null> {
  const r = yield* one<{ t: unknown }>(OUTBOX_SQL.oldestPending, []);
  return r?.t === null || r?.t === undefined ? null : Number(r.t);
}

export function* failedPageUnit(beforeId: number, limit: number): Unit<OutboxRow[]> {
  return (yield* rows<Row>(OUTBOX_SQL.failedPage, [beforeId, limit])).map(outboxFromRow);
}

export function* outboxOfRunUnit(runId: string, limit: number): Unit<OutboxRow[]> {
  return (yield* rows<Row>(OUTBOX_SQL.ofRun, [runId, limit])).map(outboxFromRow);
}

export function* outboxLastUnit(runId: string, limit: number): Unit<OutboxRow[]> {
  return (yield* rows<Row>(OUTBOX_SQL.last, [runId, limit])).map(outboxFromRow);
}
