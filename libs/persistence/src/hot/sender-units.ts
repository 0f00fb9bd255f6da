/**
 * The webhook outbox lease (docs/scale-out.md#webhook-outbox-lease): a run's webhook ops are sent
 * by one process at a time, its sender, named in `delivery_senders`. The lease is the sender's
 * `host_processes` row: it holds while that row exists (renewed in bulk by the process heartbeat)
 * and is free once the row is deleted (declared dead, or a clean stop). Every time and check is in
 * SQL; the same statements run on both dialects (SQLite has one process, so they always succeed
 * there; PostgreSQL serialises them with row locks).
 */
import { stmt } from './hot-sql';
import { outboxFromRow, type OutboxRow } from './outbox-units';
import { exec, one, type Unit } from './unit';

/** A process row that exists: a lease named after it is held. */
const LIVE = (col: string) => `EXISTS (SELECT 1 FROM "host_processes" AS h WHERE h."id" = ${col})`;

export const SENDER_SQL = {
  /**
   * Claims a run for `process_id` when it is free, already this process's, or held by a process
   * whose row is gone — and only while the claimer's own row exists (a process declared dead
   * claims nothing). One row per run: an upsert whose conflict branch re-checks the holder on the
   * latest row version under its row lock, so of two concurrent claimers exactly one gets it.
   * RETURNING yields a row only when this process holds the lease afterwards.
   */
  claim: stmt(
    'sender_claim',
    `INSERT INTO "delivery_senders" ("run_id", "process_id", "claimed_at")
     SELECT CAST(? AS VARCHAR(64)), CAST(? AS VARCHAR(64)), CAST(? AS BIGINT) WHERE ${LIVE('?')}
     ON CONFLICT ("run_id") DO UPDATE SET "process_id" = excluded."process_id", "claimed_at" = excluded."claimed_at"
     WHERE "delivery_senders"."process_id" = excluded."process_id"
        OR NOT ${LIVE('"delivery_senders"."process_id"')}
     RETURNING "process_id"`,
  ),
  /**
   * The fence of a sender's state write: the lease is still this process's and its row exists.
   * On PostgreSQL the lease row is locked until the unit commits, so a takeover (which updates that
   * row) waits for the write, and then reads the op's recorded state.
   */
  fence: stmt(
    'sender_fence',
    `SELECT 1 AS "held" FROM "delivery_senders" WHERE "run_id" = ? AND "process_id" = ? AND ${LIVE('?')}`,
    `SELECT 1 AS "held" FROM "delivery_senders" WHERE "run_id" = ? AND "process_id" = ? AND ${LIVE('?')} FOR UPDATE`,
  ),
  /** The run's first pending op (what its sender sends next). */
  head: stmt(
    'sender_head',
    `SELECT * FROM "delivery_outbox" WHERE "run_id" = ? AND "webhook_state" = 'pending' ORDER BY "sequence" ASC LIMIT 1`,
  ),
  /** Drops this process's lease of a run that has nothing pending any more. */
  releaseIfDone: stmt(
    'sender_release_if_done',
    `DELETE FROM "delivery_senders" WHERE "run_id" = ? AND "process_id" = ? AND NOT EXISTS (
       SELECT 1 FROM "delivery_outbox" AS o WHERE o."run_id" = ? AND o."webhook_state" = 'pending')`,
  ),
  /** Every lease not of this process (SQLite at boot: the file lock makes every other process dead). */
  releaseOthers: stmt('sender_release_others', `DELETE FROM "delivery_senders" WHERE "process_id" <> ?`),
  /** Hands back every lease of a process (a clean stop: the others take its runs at once). */
  releaseAll: stmt('sender_release_all', `DELETE FROM "delivery_senders" WHERE "process_id" = ?`),
  /** Leases of dead processes whose runs have nothing pending (no one would ever claim them again). */
  sweep: stmt(
    'sender_sweep',
    `DELETE FROM "delivery_senders" WHERE NOT ${LIVE('"delivery_senders"."process_id"')} AND NOT EXISTS (
       SELECT 1 FROM "delivery_outbox" AS o WHERE o."run_id" = "delivery_senders"."run_id" AND o."webhook_state" = 'pending')`,
  ),
  /** Who holds a run's lease (tests, admin). */
  holder: stmt('sender_holder', `SELECT "process_id" FROM "delivery_senders" WHERE "run_id" = ?`),
} as const;

/**
 * Claims a run's lease for `processId` (see SENDER_SQL.claim) and reads the run's first pending op
 * in the same unit: what this process may send now. Null when another live process holds the run,
 * this process's row is gone, or nothing is pending.
 */
export function* claimSenderUnit(runId: string, processId: string, now: number): Unit<OutboxRow | null> {
  const held = yield* one<{ process_id: string }>(SENDER_SQL.claim, [runId, processId, now, processId]);
  if (!held) {
    return null;
  }
  const head = yield* one<Record<string, unknown>>(SENDER_SQL.head, [runId]);
  if (!head) {
    yield* exec(SENDER_SQL.releaseIfDone, [runId, processId, runId]);
    return null;
  }
  return outboxFromRow(head);
}

/**
 * A sender's state write (delivered, retry, failed), fenced by its lease: `write` runs only when
 * `processId` still holds `runId`, and the lease is dropped afterwards when nothing of the run is
 * pending. `{ fenced: true }` when the lease was lost (the write did not happen: the new sender
 * sends the op again, same idempotency key).
 */
export function* fencedSenderUnit<T>(
  runId: string,
  processId: string,
  write: () => Unit<T>,
): Unit<{ fenced: true } | { fenced: false; value: T }> {
  if (!(yield* one<{ held: unknown }>(SENDER_SQL.fence, [runId, processId, processId]))) {
    return { fenced: true };
  }
  const value = yield* write();
  yield* exec(SENDER_SQL.releaseIfDone, [runId, processId, runId]);
  return { fenced: false, value };
}

/** Hands back every lease `processId` holds; how many. */
export function* releaseSendersUnit(processId: string): Unit<number> {
  return yield* exec(SENDER_SQL.releaseAll, [processId]);
}

/**
 * Deletes every lease held by another process than `processId`: only where no other process can
 * be alive (SQLite, whose file lock admits one host process), so that the runs a killed
 * predecessor was sending are taken over at boot instead of after its registry row expires.
 */
export function* releaseOtherSendersUnit(processId: string): Unit<number> {
  return yield* exec(SENDER_SQL.releaseOthers, [processId]);
}

/** Deletes leases of dead processes over runs with nothing pending; how many. */
export function* sweepSendersUnit(): Unit<number> {
  return yield* exec(SENDER_SQL.sweep, []);
}

export function* senderOfUnit(runId: string): Unit<string | null> {
  return (yield* one<{ process_id: string }>(SENDER_SQL.holder, [runId]))?.process_id ?? null;
}
