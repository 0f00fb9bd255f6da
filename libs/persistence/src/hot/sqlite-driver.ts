import { writeFileSync } from 'node:fs';
import type { Database, Statement } from 'better-sqlite3';
import { isSqliteBusy } from '../busy-retry';
import type { HotStatement } from './hot-sql';
import { InsertBatch, type HeldStatement } from './insert-batch';
import { FenceCache } from './run-fence';
import type { Op, Unit } from './unit';
import { WriterBusy, type WriterDriver } from './write-queue';

/**
 * The SQLite text of a hot statement as prepared: a bound `LIMIT ?` / `OFFSET ?` becomes `+?`.
 * SQLite's planner reads a LIMIT that is a lone parameter, so it marks the statement to be
 * re-prepared whenever that parameter is bound — and better-sqlite3 binds every parameter on every
 * run: each run of such a statement parsed and planned it again (7–20 µs, more than the query;
 * docs/benchmarks.md). A unary plus is an expression the planner does not read: the value, the
 * rows and the error for a limit that is not an integer stay the same.
 */
export function sqliteText(sql: string): string {
  return sql.replace(/\b(LIMIT|OFFSET)\s+\?(?!\s*[+\-*/])/g, '$1 +?');
}

/**
 * Hot statements on a better-sqlite3 connection: each prepared once. Groups run synchronously
 * inside one transaction, so nothing else on the event loop — not even a microtask — can issue
 * a statement between BEGIN and COMMIT. Reads outside a group (`read`) see only committed rows,
 * never those of an admin transaction open on the writer connection `db` (docs/durability.md):
 * they run on `db` while no transaction is open on it, else on `reader`, the host's read-only
 * connection when it has one (sqlite-query-runner.ts SqliteConnections). Without one
 * (`:memory:`) they run on `db`.
 */
export class SqliteHot implements WriterDriver {
  private readonly prepared = new Map<string, Statement>();
  private readonly batch = new InsertBatch();
  private readonly fences = new FenceCache();
  /** The running group's BEGIN IMMEDIATE was issued (runGroup). */
  private open = false;

  /** Per-statement time, only when SQLITE_STMT_PROFILE names a file (written at exit); off by default. */
  private readonly timing = process.env.SQLITE_STMT_PROFILE
    ? new StatementTiming(process.env.SQLITE_STMT_PROFILE)
    : undefined;

  /** The read connection's prepared statements: the writer's own when reads run on `db` (`:memory:`). */
  private readonly readPrepared: Map<string, Statement>;

  constructor(
    readonly db: Database,
    private readonly reader: Database = db,
  ) {
    this.readPrepared = reader === db ? this.prepared : new Map<string, Statement>();
  }

  statement(s: HotStatement): Statement {
    return preparedOn(this.db, this.prepared, s);
  }

  ready(): boolean {
    return !this.db.inTransaction;
  }

  step(op: Op): unknown {
    return this.stepWith(this.db, this.prepared, op);
  }

  /** One op's statement on `db` (its prepared statements in `cache`), timed when profiling. */
  private stepWith(db: Database, cache: Map<string, Statement>, op: Op): unknown {
    if (op.stmt.sqliteChain) {
      return this.stepChain(db, cache, op, op.stmt.sqliteChain);
    }
    if (this.timing) {
      const t0 = process.hrtime.bigint();
      const r = stepOn(preparedOn(db, cache, op.stmt), op);
      this.timing.add(op.stmt.name, t0);
      return r;
    }
    return stepOn(preparedOn(db, cache, op.stmt), op);
  }

  /**
   * A statement SQLite runs as its chain (HotStatement.sqliteChain): each step with its slice of
   * the parameters; one that inserted nothing ends it with the empty answer of `op.kind`.
   */
  private stepChain(
    db: Database,
    cache: Map<string, Statement>,
    op: Op,
    chain: NonNullable<HotStatement['sqliteChain']>,
  ): unknown {
    let at = 0;
    for (const [i, step] of chain.entries()) {
      const params = op.params.slice(at, at + step.params);
      at += step.params;
      if (i === chain.length - 1) {
        return this.stepWith(db, cache, { kind: op.kind, stmt: step.stmt, params });
      }
      const { changes } = this.stepWith(db, cache, { kind: 'run', stmt: step.stmt, params }) as { changes: number };
      if (changes === 0) {
        return op.kind === 'run' ? { changes: 0 } : op.kind === 'get' ? undefined : [];
      }
    }
    throw new Error(`${op.stmt.name}: an empty sqliteChain`);
  }

  /**
   * Runs a unit outside the writer, on the read connection: for reads only (a read-only unit needs
   * no transaction; a write there fails, "attempt to write a readonly database"). Each statement
   * reads the last committed snapshot and ends its read when it returns (get/all run it whole).
   */
  read<T>(unit: Unit<T>): T {
    let r = unit.next();
    while (!r.done) {
      r = unit.next(this.readStep(r.value));
    }
    return r.value;
  }

  /**
   * One statement of a read. While no transaction is open on the writer connection `db` (the usual
   * case: its groups run synchronously, and admin transactions are rare), that connection holds no
   * uncommitted row, so a statement SQLite reports as read-only (`Statement.readonly`) runs there:
   * it sees exactly what the read connection would — the last commit — but in the writer's page
   * cache, which its own commits keep warm, where the read connection's cache is dropped at every
   * commit of the writer (docs/benchmarks.md, "Hot reads on the writer connection when it is
   * free"). An open transaction on `db`, a statement that would write, or a chain: the read
   * connection, as before (a write there fails, "attempt to write a readonly database").
   */
  private readStep(op: Op): unknown {
    const onWriter =
      this.reader !== this.db &&
      !op.stmt.sqliteChain &&
      !this.db.inTransaction &&
      preparedOn(this.db, this.prepared, op.stmt).readonly;
    return onWriter ? this.stepWith(this.db, this.prepared, op) : this.stepWith(this.reader, this.readPrepared, op);
  }

  /**
   * Runs the units as one transaction. `BEGIN IMMEDIATE` is issued before the group's first
   * statement, not before its units start: a group whose only statement is one held insert — the
   * audit row of a read call, alone at one call at a time (docs/durability.md#audit-rows-of-read-calls)
   * — runs it in autocommit instead: one statement is one transaction in SQLite, taking the same
   * writer lock (with the same busy wait) and committing the same WAL frames at the same
   * `synchronous` level, without the `BEGIN`/`COMMIT` statements around it
   * (docs/benchmarks.md, "StateGet at c1: the audit row in autocommit"). A group with no statement
   * at all (a barrier) touches the database not at all.
   */
  runGroup(units: readonly (() => Unit<unknown>)[]): unknown[] {
    const t0 = this.timing?.groupStart();
    this.fences.reset();
    try {
      const out = this.driveGroup(units);
      if (!this.open && this.autocommit()) {
        this.timing?.add('group', t0!);
        return out;
      }
      this.flush();
      const t1 = this.timing && process.hrtime.bigint();
      this.db.exec('COMMIT');
      this.timing?.add('COMMIT', t1!);
      this.timing?.add('group', t0!);
      return out;
    } catch (e) {
      this.batch.clear();
      if (this.db.inTransaction) {
        this.db.exec('ROLLBACK');
      }
      throw e;
    } finally {
      this.open = false;
    }
  }

  /**
   * The group stepped no statement: when its held rows are one statement (or none), runs it alone
   * in autocommit and answers true; else begins and answers false (the caller flushes and
   * commits). An autocommit statement that meets the writer lock busy after the busy timeout wrote
   * nothing: WriterBusy, as for BEGIN IMMEDIATE.
   */
  private autocommit(): boolean {
    if (this.batch.empty) {
      return true;
    }
    const held = this.batch.pending();
    if (held.length !== 1) {
      this.begin();
      return false;
    }
    this.batch.clear();
    try {
      this.runHeld(held);
    } catch (e) {
      throw busyAsWriterBusy(e);
    }
    return true;
  }

  /**
   * BEGIN IMMEDIATE (once per group, before its first statement) takes the writer lock. Another
   * connection holding it (the checkpoint worker's TRUNCATE, docs/durability.md#sqlite) makes
   * SQLite wait up to the connection's short busy timeout (SQLITE_BUSY_TIMEOUT_MS, blocking this
   * thread) and then fail with SQLITE_BUSY: that is WriterBusy — no unit ran, so the write queue
   * retries the whole group later, off this thread.
   */
  private begin(): void {
    if (this.open) {
      return;
    }
    const t0 = this.timing && process.hrtime.bigint();
    try {
      this.db.exec('BEGIN IMMEDIATE');
      this.open = true;
      this.timing?.add('BEGIN', t0!);
    } catch (e) {
      throw busyAsWriterBusy(e);
    }
  }

  /**
   * Steps a group's units in order. With more than one unit, each is first stepped to its first
   * statement (a unit computes nothing but statements: unit.ts): when they are a run's last results
   * and its end, the end with its fence runs first and answers the results' fences
   * (FenceCache.hoist) — one fence statement fewer in the group, as on PostgreSQL. Running the end
   * first changes nothing the results write or read (their fence tests the lease, not the status;
   * no trigger reads the run's status); when it changed nothing, their own fences run as before.
   */
  private driveGroup(units: readonly (() => Unit<unknown>)[]): unknown[] {
    if (units.length === 1) {
      return [this.drive(units[0]())];
    }
    const started = units.map((u) => {
      const unit = u();
      return { unit, first: unit.next() };
    });
    const hoisted = this.fences.hoist(started.flatMap((s) => (s.first.done ? [] : [s.first.value])));
    if (hoisted) {
      this.begin();
      this.fences.prefetched(this.step(hoisted));
    }
    return started.map((s) => this.drive(s.unit, s.first));
  }

  /**
   * Steps a unit of a group: batchable inserts are held (insert-batch.ts), advisory locks answered
   * (NO_LOCK), anything else runs after them.
   */
  private drive<T>(unit: Unit<T>, first: IteratorResult<Op, T> = unit.next()): T {
    let r = first;
    while (!r.done) {
      const op = r.value;
      const held = this.batch.hold(op) ?? (op.stmt.advisory ? NO_LOCK : this.fences.answer(op));
      if (held) {
        r = unit.next(held);
        continue;
      }
      this.begin();
      if (this.batch.mustFlush(op.stmt)) {
        this.flush();
      }
      const result = this.step(op);
      this.fences.ran(op, result);
      r = unit.next(result);
    }
    return r.value;
  }

  /** Writes the held rows inside the group's transaction (open: begin() ran). */
  private flush(): void {
    if (!this.batch.empty) {
      this.runHeld(this.batch.take());
    }
  }

  private runHeld(held: readonly HeldStatement[]): void {
    for (const h of held) {
      const t0 = this.timing && process.hrtime.bigint();
      this.statement(h.stmt).run(...h.params);
      this.timing?.add(`${h.stmt.name.replace(/_x\d+$/, '')}×${h.rows}`, t0!);
    }
  }

  close(): void {
    // The connection belongs to the data source; it closes it.
  }
}

/**
 * The answer to a transaction advisory lock op (HotStatement.advisory: SQL.lockConversation,
 * lockKeys) in a group: SQLite has one writer, whose group holds the database's writer lock from
 * BEGIN IMMEDIATE to COMMIT, so those locks are no-ops there — their SQLite text only selects its
 * parameters, and no unit reads the row (docs/benchmarks.md, "Fewer SQLite statements per run").
 * Not stepped: one statement fewer per admission.
 */
const NO_LOCK = Object.freeze({ changes: 0 });

/** A hot statement prepared on `db`, once (`cache` is that connection's). */
function preparedOn(db: Database, cache: Map<string, Statement>, s: HotStatement): Statement {
  let p = cache.get(s.name);
  if (!p) {
    p = db.prepare(sqliteText(s.sqlite));
    cache.set(s.name, p);
  }
  return p;
}

/** Runs one op's statement whole (no statement is left open: its read ends with it). */
function stepOn(st: Statement, op: Op): unknown {
  switch (op.kind) {
    case 'run':
      return { changes: st.run(...op.params).changes };
    case 'get':
      return st.get(...op.params);
    case 'all':
      return st.all(...op.params);
  }
}

/**
 * SQLITE_BUSY after the busy timeout (the writer lock held elsewhere, nothing written) as
 * WriterBusy; any other error as it is.
 */
function busyAsWriterBusy(e: unknown): unknown {
  return isSqliteBusy(e) ? new WriterBusy(e instanceof Error ? e.message : String(e)) : e;
}

/** SQLITE_STMT_PROFILE: count and total time per statement name, written as JSON when the process exits. */
class StatementTiming {
  private readonly by = new Map<string, { n: number; ns: bigint }>();
  /** The statements of the running group, and how many groups ran each sequence of statements. */
  private names: string[] = [];
  private readonly shapes = new Map<string, number>();

  constructor(file: string) {
    process.on('exit', () => {
      const out: { name: string; n: number; us: number }[] = [...this.by].map(([name, t]) => ({
        name,
        n: t.n,
        us: Number(t.ns / 1000n),
      }));
      for (const [shape, n] of this.shapes) {
        out.push({ name: `group: ${shape}`, n, us: 0 });
      }
      writeFileSync(
        `${file}.${process.pid}.json`,
        JSON.stringify(
          out.sort((a, b) => b.us - a.us),
          null,
          1,
        ),
      );
    });
  }

  groupStart(): bigint {
    this.names = [];
    return process.hrtime.bigint();
  }

  add(name: string, t0: bigint): void {
    if (name === 'group') {
      const shape = this.names.join(' ');
      this.shapes.set(shape, (this.shapes.get(shape) ?? 0) + 1);
      this.names = [];
    } else {
      this.names.push(name);
    }
    const t = this.by.get(name) ?? { n: 0, ns: 0n };
    t.n++;
    t.ns += process.hrtime.bigint() - t0;
    this.by.set(name, t);
  }
}
