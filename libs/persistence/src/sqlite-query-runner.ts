import type { DataSource } from 'typeorm';
import { BetterSqlite3Driver } from 'typeorm/driver/better-sqlite3/BetterSqlite3Driver';
import { BetterSqlite3QueryRunner } from 'typeorm/driver/better-sqlite3/BetterSqlite3QueryRunner';
import { BUSY_RETRY, DatabaseBusyError, isSqliteBusy, retryWhileBusy, type BusyRetry } from './busy-retry';

/** What TypeORM's runner answers (its own type: `any`, the rows or the structured result). */
type QueryAnswer = ReturnType<BetterSqlite3QueryRunner['query']>;
type IsolationLevel = Parameters<BetterSqlite3QueryRunner['startTransaction']>[0];

/**
 * TypeORM's one query runner on the host's SQLite connection (admin CRUD, migrations, repositories'
 * raw statements), made to wait for a busy writer lock like the hot writer does
 * (docs/durability.md#a-busy-writer-lock). Without it such a write waited only the connection's
 * `busy_timeout` (SQLITE_BUSY_TIMEOUT_MS, 100 ms, blocking the thread) and then failed with a raw
 * "database is locked" — an admin answer of 500.
 *
 * - A transaction starts with `BEGIN IMMEDIATE` (TypeORM's `BEGIN TRANSACTION` is deferred): it
 *   takes the writer lock before any statement of the transaction runs, so a busy lock fails the
 *   BEGIN, never a statement half-way through, and waiting and running the BEGIN again retries the
 *   whole transaction. Once it is open, no statement of it can meet a busy lock.
 * - A statement outside a transaction is its own (autocommit) transaction: one that failed busy
 *   wrote nothing, and runs again.
 *
 * Both wait off the event loop with the shared BusyRetry policy and then fail with
 * DatabaseBusyError (503 `unavailable`, reason `database.busy`), nothing written.
 */
export class BusyRetryingQueryRunner extends BetterSqlite3QueryRunner {
  constructor(
    driver: BetterSqlite3Driver,
    private readonly busy: BusyRetry,
  ) {
    super(driver);
  }

  override query(query: string, parameters?: unknown[], useStructuredResult?: boolean): QueryAnswer {
    const sql = query === 'BEGIN TRANSACTION' ? 'BEGIN IMMEDIATE' : query;
    if (this.inTransaction()) {
      // The transaction holds the writer lock (BEGIN IMMEDIATE): SQLITE_BUSY is not expected here.
      // Should another BEGIN have opened it, the statement cannot be run again alone: the caller's
      // transaction rolls back, and the caller gets the retryable error instead of a raw one.
      return super.query(sql, parameters, useStructuredResult).catch((e: unknown) => {
        throw isSqliteBusy(e) ? new DatabaseBusyError(0, String((e as Error).message)) : e;
      });
    }
    return retryWhileBusy(() => super.query(sql, parameters, useStructuredResult), this.busy);
  }

  override async startTransaction(isolationLevel?: IsolationLevel): Promise<void> {
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

  private inTransaction(): boolean {
    return (this.driver.databaseConnection as { inTransaction?: boolean } | undefined)?.inTransaction === true;
  }
}

/**
 * Makes the data source's SQLite query runner a BusyRetryingQueryRunner (the better-sqlite3 driver
 * keeps one runner and hands it to every caller). Called before `initialize()`, so migrations use
 * it too; a no-op on PostgreSQL, whose writers wait for row locks in the server.
 */
export function retryBusySqlite(ds: DataSource, busy: BusyRetry = BUSY_RETRY): void {
  const driver = ds.driver;
  if (!(driver instanceof BetterSqlite3Driver)) {
    return;
  }
  driver.createQueryRunner = () => (driver.queryRunner ??= new BusyRetryingQueryRunner(driver, busy));
}
