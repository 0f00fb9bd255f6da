import { telemetry } from '@libs/telemetry';
import { BUSY_RETRY, BusyBackoff, DatabaseBusyError, sleep, type BusyRetry } from '../busy-retry';
import type { Unit } from './unit';

/** A connection the writer can drive: SQLite synchronously, PostgreSQL asynchronously. */
export interface WriterDriver {
  /** False while the connection cannot start a transaction (another owner has one open). */
  ready(): boolean;
  /** Runs the units in one transaction; throws (after rolling back) if any unit throws. */
  runGroup(units: readonly (() => Unit<unknown>)[]): unknown[] | Promise<unknown[]>;
  close(): Promise<void> | void;
}

/**
 * Thrown by a driver's runGroup when the database's writer lock is held by another connection
 * before any unit ran (SQLite: BEGIN IMMEDIATE answered SQLITE_BUSY): nothing was written, so
 * the queue runs the whole group again later (WriteQueue.group).
 */
export class WriterBusy extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WriterBusy';
  }
}

// The busy-lock policy and error are shared with TypeORM's statements (docs/durability.md#a-busy-writer-lock).
export { BUSY_RETRY, DatabaseBusyError, type BusyRetry } from '../busy-retry';

interface Pending {
  unit: () => Unit<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  /** Queued by defer(): nobody waits for its commit. */
  deferred?: true;
}

export interface WriterStats {
  units: number;
  commits: number;
  /** Groups that failed and were replayed unit by unit. */
  replays: number;
}

/** A unit with no statement: barrier() queues it. */
function* nothing(): Unit<void> {}

/** What defer() gives back: the unit's commit, and whether its caller must wait for it. */
export interface Deferred<T> {
  committed: Promise<T>;
  /**
   * True when `maxDeferred` deferred units were already waiting for their commit: the caller waits
   * for this one as for submit(), so a crash never loses more than that many (docs/durability.md).
   */
  wait: boolean;
}

/**
 * How long a deferred unit waits at most for a group commit to join (0: the next turn of the event
 * loop, as a submitted unit; a longer wait groups more rows per commit but lets another process's
 * audit read miss them for that long: docs/durability.md#audit-rows-of-read-calls), and how many
 * may wait.
 */
export const DEFER_MS = 0;
export const MAX_DEFERRED = 256;

/**
 * The one writer of a database (issue: the run path at the floor). Every hot-path write is a
 * unit queued here; the queue groups the units pending at the moment it flushes into one
 * transaction — as soon as the event loop is idle (setImmediate), or at `maxBatch` units — so
 * load batches naturally and an idle system pays no timer. A unit resolves only after its
 * transaction committed, and no unit can join or be rolled back by another's transaction: a group
 * that fails is rolled back whole and its units are replayed one transaction each, so only the
 * failing unit fails.
 *
 * A deferred unit (defer()) is queued in the same order but schedules no flush of its own: it
 * joins the next group some other unit starts, or a group of its own after `deferMs` (or at once
 * when `maxDeferred` are waiting) — the audit rows of answered read calls (docs/durability.md).
 */
export class WriteQueue {
  private pending: Pending[] = [];
  private scheduled = false;
  private deferTimer: NodeJS.Timeout | undefined;
  /** DEFER_MS = 0: the turn that schedules the group of deferred units (see defer()). */
  private deferTurn: NodeJS.Immediate | undefined;
  /** Deferred units queued and not yet committed (or failed). */
  private deferredOpen = 0;
  private flushing = false;
  private closed = false;
  private idleWaiters: (() => void)[] = [];
  readonly stats: WriterStats = { units: 0, commits: 0, replays: 0 };
  /** Groups started again because the writer lock was busy, and groups failed after BusyRetry.boundMs. */
  readonly busy = { retries: 0, failed: 0 };

  constructor(
    private readonly driver: WriterDriver,
    private readonly maxBatch = 256,
    private readonly deferMs = DEFER_MS,
    private readonly maxDeferred = MAX_DEFERRED,
    private readonly busyRetry: BusyRetry = BUSY_RETRY,
  ) {}

  /** Units waiting for a transaction. */
  get depth(): number {
    return this.pending.length;
  }

  /** No group is running or scheduled, and no unit waits but deferred ones (which may wait). */
  get idle(): boolean {
    return !this.flushing && !this.scheduled && this.pending.every((p) => p.deferred);
  }

  submit<T>(unit: () => Unit<T>): Promise<T> {
    if (this.closed) {
      return Promise.reject(new Error('the database writer is closed'));
    }
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ unit, resolve: resolve as (v: unknown) => void, reject });
      this.schedule();
    });
  }

  /**
   * Queues a unit that need not commit before its caller goes on: it joins the next group commit
   * (ordered after everything queued before it), at the latest `deferMs` later; see Deferred.
   */
  defer<T>(unit: () => Unit<T>): Deferred<T> {
    if (this.closed) {
      return { committed: Promise.reject(new Error('the database writer is closed')), wait: true };
    }
    const wait = this.deferredOpen >= this.maxDeferred;
    this.deferredOpen++;
    let settle!: Pick<Pending, 'resolve' | 'reject'>;
    const committed = new Promise<T>((resolve, reject) => {
      settle = { resolve: resolve as (v: unknown) => void, reject };
    });
    this.pending.push({
      unit,
      deferred: true,
      resolve: (v) => {
        this.deferredOpen--;
        settle.resolve(v);
      },
      reject: (e) => {
        this.deferredOpen--;
        settle.reject(e);
      },
    });
    if (wait) {
      this.schedule();
    } else if (this.deferMs === 0) {
      // The group of deferred units starts one turn later than a submitted unit's: the read call
      // whose row this is hands its answer to gRPC now, and node:http2 sends the call's trailers
      // (its status: the end of the call for the caller) from an immediate of this turn; a group
      // started in this turn's immediates would run before them, on the caller's wait
      // (docs/durability.md#audit-rows-of-read-calls).
      if (!this.scheduled && !this.deferTurn) {
        this.deferTurn = setImmediate(() => {
          this.deferTurn = undefined;
          this.schedule();
        });
      }
    } else if (!this.scheduled && !this.deferTimer) {
      this.deferTimer = setTimeout(() => {
        this.deferTimer = undefined;
        this.schedule();
      }, this.deferMs);
    }
    return { committed, wait };
  }

  /**
   * Resolves once every unit queued before it (deferred ones too) is committed or failed, without
   * waiting for units queued after it (unlike drain()): at once when nothing is queued or running.
   */
  barrier(): Promise<void> {
    return this.pending.length === 0 && !this.flushing ? Promise.resolve() : this.submit(nothing);
  }

  /** Resolves once everything submitted or deferred so far is committed (or failed). */
  drain(): Promise<void> {
    if (this.pending.length === 0 && !this.flushing) {
      return Promise.resolve();
    }
    this.schedule(); // deferred units do not wait for their timer
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  async close(): Promise<void> {
    await this.drain();
    this.closed = true;
    await this.driver.close();
  }

  private schedule(): void {
    if (!this.scheduled && !this.flushing) {
      this.scheduled = true;
      setImmediate(() => void this.flush());
    }
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    if (this.flushing) {
      return;
    }
    if (this.deferTimer) {
      clearTimeout(this.deferTimer); // this flush takes the deferred units too
      this.deferTimer = undefined;
    }
    if (this.deferTurn) {
      clearImmediate(this.deferTurn); // likewise
      this.deferTurn = undefined;
    }
    this.flushing = true;
    try {
      while (this.pending.length > 0) {
        const batch = this.pending.splice(0, this.maxBatch);
        await this.runBatch(batch);
      }
    } finally {
      this.flushing = false;
      if (this.pending.length > 0) {
        this.schedule();
      } else {
        this.idleWaiters.splice(0).forEach((w) => w());
      }
    }
  }

  /**
   * Runs a group as soon as the connection is free. An admin transaction may hold the (shared
   * SQLite) connection: the check and the start of the group are one synchronous step, so no
   * other code can begin a transaction between them.
   */
  private async group(units: readonly (() => Unit<unknown>)[]): Promise<unknown[]> {
    const started = Date.now();
    let backoff: BusyBackoff | undefined;
    for (;;) {
      while (!this.driver.ready()) {
        await sleep(1);
      }
      try {
        // Not awaited here: SQLite's group is synchronous (a WriterBusy is thrown, not rejected),
        // and an await would add a microtask to every commit.
        return this.driver.runGroup(units);
      } catch (e) {
        if (!(e instanceof WriterBusy)) {
          throw e;
        }
        // The writer lock is another connection's: no unit ran. Wait off the event loop and run
        // the whole group again (all-or-nothing, so safe), within the bound.
        backoff ??= new BusyBackoff(this.busyRetry, started);
        const wait = backoff.next();
        if (wait === null) {
          this.busy.failed++;
          throw backoff.failure(e.message);
        }
        this.busy.retries++;
        await sleep(wait);
      }
    }
  }

  private async runBatch(batch: Pending[]): Promise<void> {
    this.stats.units += batch.length;
    const t0 = telemetry.now();
    try {
      const results = await this.group(batch.map((p) => p.unit));
      telemetry.writerGroup(batch.length, t0, false);
      this.stats.commits++;
      batch.forEach((p, i) => p.resolve(results[i]));
      return;
    } catch (e) {
      // A lock that stayed busy failed the group before any unit ran: replaying its units one by
      // one would only wait for the same lock again, once per unit.
      if (batch.length === 1 || e instanceof DatabaseBusyError) {
        batch.forEach((p) => p.reject(e));
        return;
      }
    }
    this.stats.replays++;
    telemetry.writerGroup(batch.length, t0, true);
    for (const p of batch) {
      try {
        const [result] = await this.group([p.unit]);
        this.stats.commits++;
        p.resolve(result);
      } catch (e) {
        p.reject(e);
      }
    }
  }
}
