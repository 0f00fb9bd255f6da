import Sqlite, { type Database, type Statement } from 'better-sqlite3';
import type { DataSource } from 'typeorm';
import { BetterSqlite3Driver } from 'typeorm/driver/better-sqlite3/BetterSqlite3Driver';
import { BetterSqlite3QueryRunner } from 'typeorm/driver/better-sqlite3/BetterSqlite3QueryRunner';
import { BUSY_RETRY, DatabaseBusyError, isSqliteBusy, retryWhileBusy, type BusyRetry } from './busy-retry';
import { ConnectionGate } from './connection-gate';
import { SQLITE_BUSY_TIMEOUT_MS } from './data-source';

/** What TypeORM's runner answers (its own type: `any`, the rows or the structured result). */
type QueryAnswer = ReturnType<BetterSqlite3QueryRunner['query']>;
type IsolationLevel = Parameters<BetterSqlite3QueryRunner['startTransaction']>[0];

/** How many statement texts SqliteConnections remembers the kind of (read or not). */
const KINDS_KEPT = 1000;

/**
 * The host's connections to one SQLite database, and what every runner on them shares
 * (docs/durability.md, "One open transaction per connection" and "Reads on their own connection"):
 *
 * - the writer connection TypeORM opened (the hot writer shares it), with the gate that says who
 *   may run statements on it and its prepared statements;
 * - for a file database, a second, read-only connection, opened at the first read and closed
 *   before the writer: a SELECT outside a transaction runs there. In WAL mode it neither waits for
 *   the writer nor sees an open transaction's rows: each statement reads the last committed
 *   snapshot, and its read ends with the statement (better-sqlite3 runs it whole and resets it),
 *   so no read is left open to hold back a checkpoint. `:memory:` has no other connection: its
 *   reads stay on the writer's, behind the gate.
 */
export class SqliteConnections {
  readonly gate = new ConnectionGate();
  /** The writer connection's prepared statements (TypeORM's `stmtCache` of every runner on it). */
  readonly statements = new Map<string, unknown>();
  private reader: Database | undefined;
  private readerRunner: ReadingQueryRunner | undefined;
  private readonly kinds = new Map<string, boolean>();
  private closed = false;

  constructor(
    private readonly driver: BetterSqlite3Driver,
    readonly writer: Database,
  ) {}

  /** The read-only connection (opened now if need be); undefined for `:memory:` or once closed. */
  readConnection(): Database | undefined {
    if (this.reader === undefined && !this.closed && !this.writer.memory && this.writer.open) {
      // fileMustExist: the writer created it; timeout: a reader meets SQLITE_BUSY only in WAL
      // recovery, and then waits as briefly as the writer (data-source.ts).
      this.reader = new Sqlite(this.writer.name, {
        readonly: true,
        fileMustExist: true,
        timeout: SQLITE_BUSY_TIMEOUT_MS,
      });
    }
    return this.reader;
  }

  /**
   * The runner for `sql` when it is a read that may run on the read-only connection: a SELECT (or
   * WITH … SELECT) that SQLite itself reports returns rows and writes nothing
   * (`Statement.reader`, `Statement.readonly`). Anything else — writes, PRAGMAs (connection
   * settings are the writer's), transaction control, a statement that does not prepare — is not.
   */
  readerFor(sql: string): BetterSqlite3QueryRunner | undefined {
    let read = this.kinds.get(sql);
    if (read === undefined) {
      const reader = /^\s*(SELECT|WITH)\b/i.test(sql) ? this.readConnection() : undefined;
      const stmt = reader && prepared(reader, sql);
      if (stmt === null) {
        return undefined; // not remembered: the writer's runner reports the error
      }
      read = stmt !== undefined && stmt.reader && stmt.readonly;
      if (this.kinds.size >= KINDS_KEPT) {
        this.kinds.delete(this.kinds.keys().next().value!);
      }
      this.kinds.set(sql, read);
    }
    if (!read || this.reader === undefined) {
      return undefined;
    }
    this.readerRunner ??= new ReadingQueryRunner(this.driver, this.reader);
    return this.readerRunner;
  }

  /** Closes the read-only connection (before the writer's: the writer, closing last, cleans the WAL up). */
  close(): void {
    this.closed = true;
    this.reader?.close();
  }
}

/** `sql` prepared on `db`, or null when it does not prepare there. */
function prepared(db: Database, sql: string): Statement | null {
  try {
    return db.prepare(sql);
  } catch {
    return null;
  }
}

/**
 * TypeORM's runner on the read-only connection (SqliteConnections): only its `query` is used, by
 * BusyRetryingQueryRunner for a read outside a transaction, so the answer (rows, structured
 * result, QueryFailedError) is TypeORM's own. Its prepared statements are the read connection's.
 */
class ReadingQueryRunner extends BetterSqlite3QueryRunner {
  constructor(
    driver: BetterSqlite3Driver,
    private readonly reader: Database,
  ) {
    super(driver);
  }

  override connect(): Promise<Database> {
    return Promise.resolve(this.reader);
  }
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
 * - A read outside this runner's transaction (a SELECT: every `find`, a `query` of a SELECT) runs
 *   on the read-only connection (SqliteConnections.readerFor) without the gate: it does not wait
 *   for another caller's transaction nor see its rows, and sees every committed one — this
 *   caller's own writes included, as they committed before their promise resolved. Inside this
 *   runner's transaction its reads stay on the writer connection and see its own writes.
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
    private readonly share: SqliteConnections,
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
      // Outside this runner's transaction: a read goes to the read-only connection, at once (it
      // waits for no gate and sees no open transaction); anything else holds the gate while it runs.
      const reader = this.isReleased ? undefined : this.share.readerFor(sql);
      return reader
        ? retryWhileBusy(() => reader.query(sql, parameters, useStructuredResult), this.busy)
        : this.alone(run);
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

/** The drivers retryBusySqlite was installed on, and the SqliteConnections of their open connection. */
const INSTALLED = new WeakSet<BetterSqlite3Driver>();
const CONNECTIONS = new WeakMap<BetterSqlite3Driver, SqliteConnections>();

/**
 * The SqliteConnections of the driver's open connection: a new one once the data source was
 * destroyed and initialised again (its statements are prepared on the new connection).
 */
function connectionsOf(driver: BetterSqlite3Driver): SqliteConnections {
  const writer: unknown = driver.databaseConnection;
  if (!(writer instanceof Sqlite)) {
    throw new Error('the better-sqlite3 driver has no open connection (is the data source initialized?)');
  }
  let current = CONNECTIONS.get(driver);
  if (current === undefined || current.writer !== writer) {
    current?.close();
    current = new SqliteConnections(driver, writer);
    CONNECTIONS.set(driver, current);
  }
  return current;
}

/**
 * The read-only connection of a data source retryBusySqlite was installed on (the hot store reads
 * there: docs/durability.md); undefined for `:memory:`, for PostgreSQL, or when it was not installed.
 */
export function sqliteReadConnectionOf(ds: DataSource): Database | undefined {
  const driver = ds.driver;
  return driver instanceof BetterSqlite3Driver && INSTALLED.has(driver)
    ? connectionsOf(driver).readConnection()
    : undefined;
}

/**
 * Gives each caller of the data source's SQLite connection its own BusyRetryingQueryRunner, all
 * sharing one ConnectionGate (TypeORM's better-sqlite3 driver would hand every caller one runner)
 * and one read-only connection for reads outside a transaction (SqliteConnections). Called before
 * `initialize()`, so migrations use it too; a no-op on PostgreSQL, whose runners each have a
 * pooled connection and whose writers wait for row locks in the server.
 */
export function retryBusySqlite(ds: DataSource, busy: BusyRetry = BUSY_RETRY): void {
  const driver = ds.driver;
  if (!(driver instanceof BetterSqlite3Driver)) {
    return;
  }
  INSTALLED.add(driver);
  driver.createQueryRunner = () => new BusyRetryingQueryRunner(driver, busy, connectionsOf(driver));
  // The read-only connection closes first: the writer, closing last, checkpoints and removes the WAL.
  const disconnect = driver.disconnect.bind(driver);
  driver.disconnect = (): Promise<void> => {
    CONNECTIONS.get(driver)?.close();
    CONNECTIONS.delete(driver);
    return disconnect();
  };
}
