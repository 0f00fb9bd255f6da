import type { Database, Statement } from 'better-sqlite3';
import type { HotStatement } from './hot-sql';
import { InsertBatch } from './insert-batch';
import { FenceCache } from './run-fence';
import type { Op, Unit } from './unit';
import type { WriterDriver } from './write-queue';

/**
 * Hot statements on a better-sqlite3 connection: each prepared once. Groups run synchronously
 * inside one transaction, so nothing else on the event loop — not even a microtask — can issue
 * a statement between BEGIN and COMMIT, and a reader on this connection never sees an
 * uncommitted row.
 */
export class SqliteHot implements WriterDriver {
  private readonly prepared = new Map<string, Statement>();
  private readonly batch = new InsertBatch();
  private readonly fences = new FenceCache();

  constructor(readonly db: Database) {}

  statement(s: HotStatement): Statement {
    let p = this.prepared.get(s.name);
    if (!p) {
      p = this.db.prepare(s.sqlite);
      this.prepared.set(s.name, p);
    }
    return p;
  }

  ready(): boolean {
    return !this.db.inTransaction;
  }

  step(op: Op): unknown {
    const st = this.statement(op.stmt);
    switch (op.kind) {
      case 'run':
        return { changes: st.run(...op.params).changes };
      case 'get':
        return st.get(...op.params);
      case 'all':
        return st.all(...op.params);
    }
  }

  /** Runs a unit outside the writer: for reads only (a read-only unit needs no transaction). */
  read<T>(unit: Unit<T>): T {
    let r = unit.next();
    while (!r.done) {
      r = unit.next(this.step(r.value));
    }
    return r.value;
  }

  runGroup(units: readonly (() => Unit<unknown>)[]): unknown[] {
    this.db.exec('BEGIN IMMEDIATE');
    this.fences.reset();
    try {
      const out = units.map((u) => this.drive(u()));
      this.flush();
      this.db.exec('COMMIT');
      return out;
    } catch (e) {
      this.batch.clear();
      if (this.db.inTransaction) {
        this.db.exec('ROLLBACK');
      }
      throw e;
    }
  }

  /** Steps a unit of a group: batchable inserts are held (insert-batch.ts), anything else runs after them. */
  private drive<T>(unit: Unit<T>): T {
    let r = unit.next();
    while (!r.done) {
      const op = r.value;
      const held = this.batch.hold(op) ?? this.fences.answer(op);
      if (held) {
        r = unit.next(held);
        continue;
      }
      if (this.batch.mustFlush(op.stmt)) {
        this.flush();
      }
      const result = this.step(op);
      this.fences.ran(op, result);
      r = unit.next(result);
    }
    return r.value;
  }

  private flush(): void {
    if (!this.batch.empty) {
      for (const h of this.batch.take()) {
        this.statement(h.stmt).run(...h.params);
      }
    }
  }

  close(): void {
    // The connection belongs to the data source; it closes it.
  }
}
