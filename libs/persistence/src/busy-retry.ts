import { DomainError } from '@libs/protocol';

/**
 * How a write waits for a busy SQLite writer lock (another connection holds it: the checkpoint
 * worker's TRUNCATE, an operator's sqlite3 shell, a backup): off the event loop, the first retry
 * `firstDelayMs` after the failure, doubling to at most `maxDelayMs`, for at most `boundMs` in all
 * (docs/durability.md#a-busy-writer-lock). One policy for the hot writer (WriteQueue) and for
 * TypeORM's statements and transactions (sqlite-query-runner.ts).
 */
export interface BusyRetry {
  firstDelayMs: number;
  maxDelayMs: number;
  boundMs: number;
}

export const BUSY_RETRY: BusyRetry = { firstDelayMs: 2, maxDelayMs: 50, boundMs: 10_000 };

/** The policy with the bound `SQLITE_BUSY_WAIT_MS` sets (docs/configuration.md), else the default. */
export function busyRetryOf(boundMs: number | undefined): BusyRetry {
  return boundMs === undefined ? BUSY_RETRY : { ...BUSY_RETRY, boundMs };
}

/**
 * What a write gets when the writer lock stayed busy for `BusyRetry.boundMs`: a retryable
 * `unavailable` (HTTP 503, gRPC UNAVAILABLE, `details.reason` `database.busy`); nothing of it was
 * written.
 */
export class DatabaseBusyError extends DomainError {
  constructor(waitedMs: number, cause: string, lockedBy = 'another connection') {
    super(
      'unavailable',
      `the database stayed locked by ${lockedBy} for ${waitedMs} ms (${cause}); nothing was written, retry`,
      { reason: 'database.busy', waited_ms: waitedMs },
    );
    this.name = 'DatabaseBusyError';
  }
}

/**
 * SQLITE_BUSY and its extended codes (SQLITE_BUSY_SNAPSHOT, SQLITE_BUSY_RECOVERY, …): better-sqlite3's
 * own error, or TypeORM's QueryFailedError around it (which keeps it as `driverError`).
 */
export function isSqliteBusy(e: unknown): boolean {
  const err = e as { code?: unknown; driverError?: { code?: unknown } } | null;
  const code = err?.driverError?.code ?? err?.code;
  return typeof code === 'string' && (code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_'));
}

/** The waits of one write between its attempts, from `started` (its first attempt) on. */
export class BusyBackoff {
  private delay: number;

  constructor(
    private readonly policy: BusyRetry,
    private readonly started = Date.now(),
  ) {
    this.delay = policy.firstDelayMs;
  }

  /** How long to wait before the next attempt; null once `boundMs` have passed since `started`. */
  next(): number | null {
    const waited = Date.now() - this.started;
    if (waited >= this.policy.boundMs) {
      return null;
    }
    const wait = Math.min(this.delay, this.policy.boundMs - waited);
    this.delay = Math.min(this.delay * 2, this.policy.maxDelayMs);
    return wait;
  }

  /** The error to give up with (after next() answered null). */
  failure(cause: string): DatabaseBusyError {
    return new DatabaseBusyError(Date.now() - this.started, cause);
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Runs `attempt` until it does not fail with SQLITE_BUSY, waiting between attempts as `policy`
 * says (off the event loop), then fails with DatabaseBusyError. `attempt` must write nothing when
 * it fails busy (one autocommit statement, or a BEGIN IMMEDIATE before any statement of its
 * transaction), so running it again writes once. `started` is when the write began waiting (its
 * bound counts from there: a wait before the first attempt is part of it).
 */
export async function retryWhileBusy<T>(
  attempt: () => Promise<T>,
  policy: BusyRetry,
  started = Date.now(),
): Promise<T> {
  let backoff: BusyBackoff | undefined;
  for (;;) {
    try {
      return await attempt();
    } catch (e) {
      if (!isSqliteBusy(e)) {
        throw e;
      }
      backoff ??= new BusyBackoff(policy, started);
      const wait = backoff.next();
      if (wait === null) {
        throw backoff.failure(causeOf(e));
      }
      await sleep(wait);
    }
  }
}

/** The driver's message (TypeORM's QueryFailedError repeats it, with the statement). */
function causeOf(e: unknown): string {
  const err = e as { driverError?: { message?: unknown }; message?: unknown } | null;
  const m = err?.driverError?.message ?? err?.message;
  return typeof m === 'string' ? m : String(e);
}
