/**
 * Multi-row inserts for the one writer (docs/durability.md#the-one-writer): inside a group, the
 * rows of a batchable INSERT (`HotStatement.rows`: results, deltas, runs, audit, model usage,
 * delivery ops) are held and written as one `INSERT … VALUES (…), (…)` per statement — so the
 * deltas of one run that arrive in one tick are one statement, each row keeping its own
 * sequence. Held rows are written before the next statement that is not a batchable insert
 * (every read, update, or insert whose result a unit uses, sees them) and before COMMIT; so the
 * only reordering is between inserts into different tables with nothing reading in between.
 * A held insert answers `{ changes: 1 }` at once: batchable inserts are those whose result no
 * unit reads. If a held row fails, the whole group fails and the writer replays its units one by
 * one (write-queue.ts), so only the unit that brought it fails.
 */
import { multiRowInsert, type HotStatement } from './hot-sql';
import type { Changes, Op, SqlValue } from './unit';

/** Rows per statement at most (well below the bound-parameter limits of both databases). */
export const MAX_ROWS_PER_INSERT = 64;
const MAX_PARAMS_PER_INSERT = 16_000;

export interface HeldStatement {
  stmt: HotStatement;
  params: SqlValue[];
  rows: number;
}

const HELD: Changes = { changes: 1 };

export class InsertBatch {
  private readonly held = new Map<string, { stmt: HotStatement; rows: (readonly SqlValue[])[] }>();
  private readonly shapes = new Map<string, HotStatement>();

  /** Holds the op when it is a batchable insert (and answers for it); undefined when it must run now. */
  hold(op: Op): Changes | undefined {
    if (op.kind !== 'run' || !op.stmt.rows) {
      return undefined;
    }
    const h = this.held.get(op.stmt.name);
    if (h) {
      h.rows.push(op.params);
    } else {
      this.held.set(op.stmt.name, { stmt: op.stmt, rows: [op.params] });
    }
    return HELD;
  }

  /** True when rows of this statement are held. */
  holds(s: HotStatement): boolean {
    return this.held.has(s.name);
  }

  get empty(): boolean {
    return this.held.size === 0;
  }

  /** The held rows as statements to run now, in the order their statements were first held; clears them. */
  take(): HeldStatement[] {
    const out: HeldStatement[] = [];
    for (const { stmt, rows } of this.held.values()) {
      const perInsert = Math.max(1, Math.min(MAX_ROWS_PER_INSERT, Math.floor(MAX_PARAMS_PER_INSERT / rows[0].length)));
      for (let i = 0; i < rows.length; i += perInsert) {
        const chunk = rows.slice(i, i + perInsert);
        out.push({ stmt: this.shape(stmt, chunk.length), params: chunk.flat(), rows: chunk.length });
      }
    }
    this.held.clear();
    return out;
  }

  /** Forgets held rows (the group is rolled back). */
  clear(): void {
    this.held.clear();
  }

  private shape(s: HotStatement, n: number): HotStatement {
    if (n === 1) {
      return s;
    }
    const key = `${s.name}#${n}`;
    let m = this.shapes.get(key);
    if (!m) {
      m = multiRowInsert(s, n);
      this.shapes.set(key, m);
    }
    return m;
  }
}
