import type { DataSource } from 'typeorm';
import { BetterSqlite3Driver } from 'typeorm/driver/better-sqlite3/BetterSqlite3Driver';
import { BetterSqlite3QueryRunner } from 'typeorm/driver/better-sqlite3/BetterSqlite3QueryRunner';
import { BUSY_RETRY, DatabaseBusyError, isSqliteBusy, retryWhileBusy, type BusyRetry } from './busy-retry';
import { ConnectionGate } from './connection-gate';

/** What TypeORM's runner answers (its own type: `any`, the rows or the structured result). */
type QueryAnswer = ReturnType<BetterSqlite3QueryRunner['query']>;
type IsolationLevel = Parameters<BetterSqlite3QueryRunner['startTransaction']>[0];

/** What every runner of one connection shares: who holds it, and the prepared statements. */
export interface SqliteConnectionShare {
  readonly gate: ConnectionGate;
  readonly statements: Map<string, unknown>;
}

/**
 * One caller's query runner on the host's one SQLite connection (admin CRUD, migrations,
 * repositories' raw statements; docs/durability.md#a-busy-writer-lock). TypeORM's better-sqlite3
 * driver hands every caller the same runner, so a statement of one HTTP request ran inside
 * another request's open transaction (and was rolled back with it), and `isTransactionActive` was
 * shared between unrelated callers. Here each caller (`createQueryRunner()`: every EntityManager
 * call, `dataSource.transaction()`, the migrations) gets its own runner, and the connection has
 * one owner of "the open transaction" (ConnectionGate):
 *
 * - A runner holds the gate from before its `BEGIN` until its `COMMIT`/`ROLLBACK`; its own
 *   statements run. Statements and transactions of other runners wait (in arrival order, off the
 *   event loop) until it ends; each statement outside a transaction holds the gate while it runs.
 * - A transaction starts with `BEGIN IMMEDIATE` (TypeORM's `BEGIN TRANSACTION` is deferred): it
 *   takes the writer lock before any statement of the transaction runs, so a lock another
 *   connection holds fails the BEGIN, never a statement half-way through, and waiting and running
 *   the BEGIN again retries the whole transaction. Once it is open, no statement of it can meet a
 *   busy lock.
 * - A statement outside a transaction is its own (autocommit) transaction: one that failed busy
 *   wrote nothing, and runs again.
 *
 * All waits (for the gate, for a busy writer lock) wait off the event loop with the shared
 * BusyRetry policy, for at most its bound in all (`SQLITE_BUSY_WAIT_MS`), then fail with
 * DatabaseBusyError (503 `unavailable`, reason `database.busy`), nothing written: a transaction
 * that never ends does not hang every other admin request.
 */
export class BusyRetryingQueryRunner extends BetterSqlite3QueryRunner {
  /** When this runner's current transaction began waiting (its bound counts from there). */
  private transactionStarted = 0;

  constructor(
    driver: BetterSqlite3Driver,
    private readonly busy: BusyRetry,
    private readonly share: SqliteConnectionShare = { gate: new ConnectionGate(), statements: new Map() },
  ) {
    super(driver);
    // One statement cache per connection, not per runner: a runner per call would prepare every
    // statement again. Sharing is safe: better-sqlite3 runs a statement whole, synchronously.
    // `stmtCache` is the private Map TypeORM's BetterSqlite3QueryRunner keeps its prepared
    // statements in (typeorm 0.3); were it renamed, each runner would keep its own again (slower,
    // not wrong).
    Reflect.set(this, 'stmtCache', share.statements);
  }

  override query(query: string, parameters?: unknown[], useStructuredResult?: boolean): QueryAnswer {
    const sql = query === 'BEGIN TRANSACTION' ? 'BEGIN IMMEDIATE' : query;
    const run = (): Promise<unknown> => super.query(sql, parameters, useStructuredResult);
    if (!this.share.gate.holds(this)) {
      return this.alone(run);
    }
    if (this.inTransaction()) {
      // This runner's open transaction holds the writer lock (BEGIN IMMEDIATE): SQLITE_BUSY is not
      // expected. Should it come, the statement cannot be run again alone: the caller's
      // transaction rolls back, and the caller gets the retryable error instead of a raw one.
      return run().catch((e: unknown) => {
        throw isSqliteBusy(e) ? new DatabaseBusyError(0, String((e as Error).message)) : e;
      });
    }
    // The BEGIN (or TypeORM's PRAGMA before it): nothing of the transaction ran yet.
    return retryWhileBusy(run, this.busy, this.transactionStarted);
  }

  override async startTransaction(isolationLevel?: IsolationLevel): Promise<void> {
    if (this.transactionDepth > 0 || this.share.gate.holds(this)) {
      return this.begin(isolationLevel); // a savepoint inside this runner's own transaction
    }
    this.transactionStarted = Date.now();
    await this.share.gate.acquire(this, this.transactionStarted + this.busy.boundMs);
    try {
      await this.begin(isolationLevel);
    } catch (e) {
      this.share.gate.release(this);
      throw e;
    }
  }

  override async commitTransaction(): Promise<void> {
    try {
      await super.commitTransaction();
    } finally {
      this.settle();
    }
  }

  override async rollbackTransaction(): Promise<void> {
    try {
      await super.rollbackTransaction();
    } finally {
      this.settle();
    }
  }

  /**
   * TypeORM's callers commit or roll back before they release; a runner released with its
   * transaction still open is rolled back, so it cannot hold the connection forever.
   */
  override async release(): Promise<void> {
    if (this.share.gate.holds(this)) {
      try {
        if (this.inTransaction()) {
          await super.query('ROLLBACK');
        }
      } finally {
        this.isTransactionActive = false;
        this.transactionDepth = 0;
        this.share.gate.release(this);
      }
    }
    return super.release();
  }

  /** A statement outside any transaction: waits for the gate, holds it while it runs. */
  private alone(run: () => Promise<unknown>): Promise<unknown> {
    const started = Date.now();
    return retryWhileBusy(
      async () => {
        const turn = {};
        await this.share.gate.acquire(turn, started + this.busy.boundMs);
        try {
          return await run();
        } finally {
          this.share.gate.release(turn);
        }
      },
      this.busy,
      started,
    );
  }

  private async begin(isolationLevel?: IsolationLevel): Promise<void> {
    try {
      await super.startTransaction(isolationLevel);
    } catch (e) {
      // TypeORM marks the transaction active before its BEGIN runs and leaves the mark when the
      // BEGIN fails: with the mark left, a later save() would run without a transaction of its own.
      if (this.transactionDepth === 0 && !this.inTransaction()) {
        this.isTransactionActive = false;
      }
      throw e;
    }
  }

  /** Once the connection has no transaction any more (committed, rolled back), the gate goes on. */
  private settle(): void {
    if (this.share.gate.holds(this) && !this.inTransaction()) {
      this.isTransactionActive = false;
      this.transactionDepth = 0;
      this.share.gate.release(this);
    }
  }

  private inTransaction(): boolean {
    return (this.driver.databaseConnection as { inTransaction?: boolean } | undefined)?.inTransaction === true;
  }
}

/**
 * Gives each caller of the data source's SQLite connection its own BusyRetryingQueryRunner, all
 * sharing one ConnectionGate (TypeORM's better-sqlite3 driver would hand every caller one runner).
 * Called before `initialize()`, so migrations use it too; a no-op on PostgreSQL, whose runners
 * each have a pooled connection and whose writers wait for row locks in the server.
 */
export function retryBusySqlite(ds: DataSource, busy: BusyRetry = BUSY_RETRY): void {
  const driver = ds.driver;
  if (!(driver instanceof BetterSqlite3Driver)) {
    return;
  }
  // One share per opened connection (a destroyed and re-initialised data source gets a new one,
  // and its statements are prepared on the new connection).
  let share: SqliteConnectionShare | undefined;
  let of: unknown;
  driver.createQueryRunner = () => {
    const connection: unknown = driver.databaseConnection;
    if (share === undefined || of !== connection) {
      share = { gate: new ConnectionGate(), statements: new Map() };
      of = connection;
    }
    return new BusyRetryingQueryRunner(driver, busy, share);
  };
}
