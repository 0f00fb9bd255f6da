import { Query, type Client, type QueryConfig, type QueryResult } from 'pg';

/** The part of pg's connection (pg/lib/connection.js) a query writes its messages with. */
interface Wire {
  parse(m: { text: string; name?: string; types?: unknown }): void;
  bind(m: { portal?: string; statement?: string; values?: unknown[] }): void;
  execute(m: { portal?: string; rows?: number }): void;
  sync(): void;
  submittedNamedStatements: Record<string, string>;
}

/** pg's Query as it drives a statement (pg/lib/query.js): the steps overridden below. */
interface QueryInternals {
  name?: string;
  text?: string;
  types?: unknown;
  portal: string;
  hasBeenParsed(connection: Wire): boolean;
  prepare(connection: Wire): void;
  _getRows(connection: Wire, rows: number | undefined): void;
  handleCommandComplete(msg: { text?: string }, connection: Wire): void;
  handleError(err: Error, connection: Wire): void;
  callback?: (err: Error | null, res: QueryResult) => void;
}

/** pg's Query has the steps of pg/lib/query.js (its typings do not declare them). */
function driven(q: Query): q is Query & QueryInternals {
  return typeof (q as Partial<QueryInternals>).prepare === 'function';
}

/** The query's pg/lib/query.js steps; throws on a pg whose Query has none. */
function internalsOf(q: Query): QueryInternals {
  if (!driven(q)) {
    throw new Error('pg Query without prepare(): an unsupported pg version');
  }
  return q;
}

/**
 * This pg's Query has the steps RiderQuery overrides (pg 8's lib/query.js; checked once): if a pg
 * upgrade removes them, riders are sent in turn (RiderQuery.inTurn) instead of failing every write.
 */
export const RIDERS_IN_ONE_WRITE = driven(new Query('SELECT 1'));

/**
 * `BEGIN` wrote in the same socket write as the statement behind it failed, or the connection was
 * gone: PostgreSQL skips every message after an error up to the `Sync`, so the statement behind it
 * did not run, and no transaction is open on that connection for this group.
 */
export class BeginFailed extends Error {
  constructor(override readonly cause: unknown) {
    super(`BEGIN failed: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** An unnamed `BEGIN` / `COMMIT` in the extended protocol (no `Sync` of its own). */
function unnamed(wire: Wire, text: 'BEGIN' | 'COMMIT'): void {
  wire.parse({ text });
  wire.bind({});
  wire.execute({});
}

/**
 * One statement of the hot writer with `BEGIN` before it and/or `COMMIT` after it in the same
 * socket write and the same `Sync` (the extended protocol's batch, answered in order): one round
 * trip instead of two or three, the same statements in the same order. PostgreSQL runs the
 * messages up to the `Sync` in order and skips the rest after an error, so:
 * - `BEGIN` that fails (a dead session, one left in an aborted transaction) runs nothing behind it:
 *   the query fails with `BeginFailed`, and the group may run again on a new connection;
 * - the statement that fails after `BEGIN` leaves the transaction aborted, its `COMMIT` not run:
 *   the query fails with the statement's error, as an awaited statement did, and the caller
 *   rolls back;
 * - `COMMIT` that fails fails the query with its error (nothing committed).
 * The statement's own `Parse` (first use on the connection) goes before `BEGIN`'s, so pg records
 * the prepared statement from its own `ParseComplete`. A `BEGIN` inside the batch turns its
 * implicit transaction into the regular one the statements after the `Sync` go on in.
 */
export class RiderQuery extends Query {
  private answered = 0;
  /** `BEGIN` was answered: the transaction is open (a later error is the statement's). */
  begun = false;
  /** `COMMIT` was answered. */
  committed = false;
  /** The statement-count preload (bench/common/pg-statement-count.ts) counts these as statements of their own. */
  readonly riders: readonly string[];

  constructor(
    config: QueryConfig,
    readonly begin: boolean,
    readonly commit: boolean,
  ) {
    // Always the extended protocol: a statement without name or values would go as a simple query, without its riders.
    const extended: QueryConfig & { queryMode: 'extended' } = { ...config, queryMode: 'extended' };
    super(extended);
    this.riders = [...(begin ? ['BEGIN'] : []), ...(commit ? ['COMMIT'] : [])];
    const self = internalsOf(this);
    const prepare = self.prepare.bind(this);
    const getRows = self._getRows.bind(this);
    const complete = self.handleCommandComplete.bind(this);
    const failed = self.handleError.bind(this);
    self.prepare = (wire: Wire) => {
      if (begin) {
        if (self.name && self.text && !self.hasBeenParsed(wire)) {
          // Its own Parse first; prepare() below then sees it submitted and sends no second one.
          wire.parse({ text: self.text, name: self.name, types: self.types });
          wire.submittedNamedStatements[self.name] = self.text;
        }
        unnamed(wire, 'BEGIN');
      }
      prepare(wire);
    };
    self._getRows = (wire: Wire, rows: number | undefined) => {
      if (!commit) {
        getRows(wire, rows);
        return;
      }
      wire.execute({ portal: self.portal, rows });
      unnamed(wire, 'COMMIT');
      wire.sync();
    };
    self.handleCommandComplete = (msg, wire) => {
      const i = this.answered++;
      if (begin && i === 0) {
        this.begun = msg.text === 'BEGIN';
        return;
      }
      if (commit && i === (begin ? 2 : 1)) {
        // A COMMIT of an aborted transaction answers ROLLBACK: not a commit.
        this.committed = msg.text === 'COMMIT';
        if (!this.committed) {
          this.failure = new Error(`COMMIT answered ${String(msg.text)}`);
        }
        return;
      }
      complete(msg, wire);
    };
    self.handleError = (err: Error, wire: Wire) => {
      failed(begin && !this.begun ? new BeginFailed(err) : err, wire);
    };
  }

  /** Set when an answer says the batch did not do what it should although no error came. */
  failure: Error | null = null;

  /**
   * Sends the statement with its riders on `client` and resolves with the statement's result: in
   * one write when this pg's Query has the steps RiderQuery drives, else awaited in turn.
   */
  static run(
    client: Client,
    config: QueryConfig,
    begin: boolean,
    commit: boolean,
    oneWrite = RIDERS_IN_ONE_WRITE,
  ): Promise<QueryResult> {
    if (!oneWrite) {
      return RiderQuery.inTurn(client, config, begin, commit);
    }
    return new Promise((resolve, reject) => {
      const q = new RiderQuery(config, begin, commit);
      internalsOf(q).callback = (err, res) => {
        if (err) {
          reject(err);
        } else if (q.failure) {
          reject(q.failure);
        } else {
          resolve(res);
        }
      };
      client.query(q);
    });
  }

  /**
   * The same statements awaited one after another, with the same outcomes (`BeginFailed` when
   * `BEGIN` fails, the statement's own error, a `COMMIT` answered otherwise is a failure): the path
   * of a pg whose Query RiderQuery cannot drive — correct, two round trips per rider slower.
   */
  static async inTurn(client: Client, config: QueryConfig, begin: boolean, commit: boolean): Promise<QueryResult> {
    if (begin) {
      await client.query('BEGIN').catch((e: unknown) => {
        throw new BeginFailed(e);
      });
    }
    const result = await client.query(config);
    if (commit) {
      const done = await client.query('COMMIT');
      if (done.command !== 'COMMIT') {
        throw new Error(`COMMIT answered ${done.command}`);
      }
    }
    return result;
  }
}
