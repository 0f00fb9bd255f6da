import { DatabaseBusyError } from './busy-retry';

interface Waiter {
  readonly who: object;
  grant(): void;
}

/**
 * Who may run statements on the host's SQLite writer connection right now
 * (docs/durability.md#a-busy-writer-lock; reads outside a transaction run on the read-only
 * connection and never take the gate: sqlite-query-runner.ts SqliteConnections). A holder is either a query runner whose transaction is
 * open (held from before its `BEGIN` until its `COMMIT`/`ROLLBACK`) or one statement outside any
 * transaction (held while it runs). Everybody else waits in arrival order, off the event loop, and
 * gets the gate handed over when the holder lets it go; a waiter that is not served by its deadline
 * fails with DatabaseBusyError (503 `database.busy`), having run nothing.
 *
 * The rules, in one place:
 * - free and nobody waiting: `acquire` takes the gate at once;
 * - otherwise the caller queues behind the others (no barging: a freed gate goes to the first
 *   waiter, never to a caller arriving in between);
 * - `release` by the holder hands the gate to the next waiter; by anyone else it does nothing;
 * - a waiter past its deadline leaves the queue and fails; the others keep their places.
 */
export class ConnectionGate {
  private holder: object | null = null;
  private readonly waiting: Waiter[] = [];

  /** Whether `who` holds the gate. */
  holds(who: object): boolean {
    return this.holder === who;
  }

  /** How many callers wait for the gate (for tests and diagnostics). */
  get waiters(): number {
    return this.waiting.length;
  }

  /**
   * Takes the gate for `who`, at once or once the callers before it let it go. Fails with
   * DatabaseBusyError when it is not granted by `deadline` (epoch ms); a holder asking again is a
   * programming error (it would wait for itself).
   */
  acquire(who: object, deadline: number): Promise<void> {
    if (this.holder === who) {
      return Promise.reject(new Error('the caller already holds the SQLite connection gate'));
    }
    if (this.holder === null && this.waiting.length === 0) {
      this.holder = who;
      return Promise.resolve();
    }
    const started = Date.now();
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        who,
        grant: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(
        () => {
          const at = this.waiting.indexOf(waiter);
          if (at >= 0) {
            this.waiting.splice(at, 1);
          }
          reject(
            new DatabaseBusyError(
              Date.now() - started,
              'a transaction of another caller stayed open on it',
              "the host's SQLite connection",
            ),
          );
        },
        Math.max(0, deadline - started),
      );
      timer.unref(); // a waiter alone does not keep a stopping process alive
      this.waiting.push(waiter);
    });
  }

  /** Lets the gate go if `who` holds it: the next waiter gets it. */
  release(who: object): void {
    if (this.holder !== who) {
      return;
    }
    const next = this.waiting.shift();
    this.holder = next ? next.who : null;
    next?.grant();
  }
}
