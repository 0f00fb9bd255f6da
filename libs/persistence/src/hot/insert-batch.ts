/**
 * Multi-row inserts for the one writer (docs/durability.md#the-one-writer): inside a group, the
 * rows of a batchable INSERT (`HotStatement.rows`: results, deltas, runs, audit, model usage,
 * delivery ops) are held and written as one `INSERT … VALUES (…), (…)` per statement — so the
 * deltas of one run that arrive in one tick are one statement, each row keeping its own
 * sequence. Held rows are written before the next statement that may read them — one that is not
 * a batchable insert and does not declare the tables it reads (`HotStatement.reads`), or declares
 * a table of held rows — and before COMMIT; so the only reordering is between inserts and
 * statements that do not read their tables.
 * A held insert answers `{ changes: 1 }` at once: batchable inserts are those whose result no
 * unit reads. If a held row fails, the whole group fails and the writer replays its units one by
 * one (write-queue.ts), so only the unit that brought it fails.
 */
import { createHash } from 'node:crypto';
import { ReleasingMap } from '@libs/streams';
import { multiRowInsert, type HotStatement } from './hot-sql';
import { joined, type Changes, type Op, type SqlValue } from './unit';

/** Rows per statement at most (well below the bound-parameter limits of both databases). */
export const MAX_ROWS_PER_INSERT = 64;
const MAX_PARAMS_PER_INSERT = 16_000;

export interface HeldStatement {
  stmt: HotStatement;
  params: SqlValue[];
  rows: number;
  /** The table the rows go to (a combined statement: its first part's). */
  table: string;
}

const HELD: Changes = { changes: 1 };

export class InsertBatch {
  /**
   * Cleared after every flush, and the writer's for the process: a ReleasingMap, so the rows of a
   * group are not kept for the young-generation GC by a table it outgrew (libs/streams releasing-map.ts).
   */
  private readonly held = new ReleasingMap<string, { stmt: HotStatement; rows: (readonly SqlValue[])[] }>();
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

  /**
   * Whether the held rows must be written before `s` runs: some are held and `s` may read them —
   * it declares no tables (`HotStatement.reads`: then it may read any), or rows of a table it
   * declares are held.
   */
  mustFlush(s: HotStatement): boolean {
    if (this.held.size === 0) {
      return false;
    }
    const reads = s.reads;
    if (!reads) {
      return true;
    }
    for (const h of this.held.values()) {
      if (reads.includes(h.stmt.rows!.table)) {
        return true;
      }
    }
    return false;
  }

  get empty(): boolean {
    return this.held.size === 0;
  }

  /** The held rows as statements to run now, in the order their statements were first held; clears them. */
  take(): HeldStatement[] {
    const out = this.pending();
    this.held.clear();
    return out;
  }

  /** What take() would answer, the rows still held. */
  pending(): HeldStatement[] {
    const out: HeldStatement[] = [];
    for (const { stmt, rows } of this.held.values()) {
      const perInsert = Math.max(1, Math.min(MAX_ROWS_PER_INSERT, Math.floor(MAX_PARAMS_PER_INSERT / rows[0].length)));
      for (let i = 0; i < rows.length; i += perInsert) {
        const chunk = rows.slice(i, i + perInsert);
        out.push({
          stmt: this.shape(stmt, chunk.length),
          params: joined(chunk),
          rows: chunk.length,
          table: stmt.rows!.table,
        });
      }
    }
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

/** Bound parameters of one combined statement at most (PostgreSQL's limit is 65,535). */
const MAX_PARAMS_PER_COMBINED = 32_000;
/**
 * Held rows a statement carries at most (PgInsertCombiner.carrier): the few rows of a small group
 * (c1: a run row and its snapshot; an end's results and delivery op). A large group's rows are
 * written as before: each count of rows is a shape of its own, and with the carrier's kinds on top
 * they would fill the named shapes (MAX_NAMED_COMBINED) and be parsed each time.
 */
export const MAX_CARRIED_ROWS = 8;
/** Combined shapes prepared by name at most; others run unnamed (parsed each time): bounded server memory. */
const MAX_NAMED_COMBINED = 256;

/**
 * PostgreSQL: the held inserts of a flush as few statements as possible — several tables' inserts
 * in one statement of data-modifying CTEs (`WITH w1 AS (INSERT …), w2 AS (INSERT …) INSERT …`),
 * so the rows a unit group holds cost one round trip, not one per table (a table's chunks of
 * MAX_ROWS_PER_INSERT rows stay in separate statements, in order). The parts are plain
 * inserts with at most `ON CONFLICT DO NOTHING` and no RETURNING, read by none of the others (no
 * foreign keys between the hot tables), so running them as one statement changes nothing but the
 * round trips.
 */
export class PgInsertCombiner {
  private readonly shapes = new Map<string, HotStatement>();
  /** Per statement: its parameter count when held inserts may ride on it (carries), else null. */
  private readonly carrierMarks = new WeakMap<HotStatement, number | null>();

  /** Whether held inserts may ride on `s` at all (checked before the held rows are gathered). */
  canCarry(s: HotStatement): boolean {
    return this.marksOf(s) !== null;
  }

  combine(held: readonly HeldStatement[]): HeldStatement[] {
    const out: HeldStatement[] = [];
    let group: HeldStatement[] = [];
    let params = 0;
    const close = () => {
      if (group.length > 0) {
        out.push(group.length === 1 ? group[0] : this.merged(group));
      }
      group = [];
      params = 0;
    };
    for (const h of held) {
      // One part per table: the parts of a statement run in no set order, and a table's chunks
      // keep their order (ids in arrival order) only as statements of their own.
      if (params + h.params.length > MAX_PARAMS_PER_COMBINED || group.some((g) => g.table === h.table)) {
        close();
      }
      group.push(h);
      params += h.params.length;
    }
    close();
    return out;
  }

  /**
   * The held inserts and the statement `s` that runs next as one statement (`s` last, the inserts
   * as data-modifying CTEs before it, parameters in that order), or null when they cannot be:
   * - `s` must not see the held rows (the caller asks only when it does not have to write them
   *   first: InsertBatch.mustFlush), and in one statement it does not — every part runs on the
   *   statement's one snapshot. Its result (rows, changed-row count) is its own: PostgreSQL
   *   answers for the main statement only.
   * - `s` takes no lock of the one lock order (a fence, advisory keys, a run row, a lease: run-
   *   fence.ts): those stay statements of their own, and no insert is added to a lock's wait.
   * - `s` has no WITH of its own, the held rows fit one statement (one part per table, within
   *   the parameter bound) and are few (MAX_CARRIED_ROWS): otherwise they are written as before
   *   (combine).
   * So the rows a group's last unit would write before COMMIT ride on a statement it runs anyway:
   * one round trip fewer (docs/benchmarks.md, issue 16 round 6).
   */
  carrier(held: readonly HeldStatement[], s: HotStatement): HotStatement | null {
    const marks = this.marksOf(s);
    if (held.length === 0 || marks === null) {
      return null;
    }
    if (
      new Set(held.map((h) => h.table)).size !== held.length ||
      held.reduce((n, h) => n + h.rows, 0) > MAX_CARRIED_ROWS
    ) {
      return null;
    }
    const params = held.reduce((n, h) => n + h.params.length, 0) + marks;
    if (params > MAX_PARAMS_PER_COMBINED) {
      return null;
    }
    const key = [...held.map((h) => h.stmt.name), s.name].join(',');
    let c = this.shapes.get(key);
    if (!c) {
      c = withInserts([...held.map((h) => h.stmt), s]);
      if (this.shapes.size < MAX_NAMED_COMBINED) {
        this.shapes.set(key, c);
      } else {
        c = { ...c, name: '' };
      }
    }
    return c;
  }

  /** carries(s) and markCount(s.pg), worked out once per statement. */
  private marksOf(s: HotStatement): number | null {
    let m = this.carrierMarks.get(s);
    if (m === undefined) {
      m = carries(s) ? markCount(s.pg) : null;
      this.carrierMarks.set(s, m);
    }
    return m;
  }

  private merged(parts: readonly HeldStatement[]): HeldStatement {
    const key = parts.map((p) => p.stmt.name).join(',');
    let s = this.shapes.get(key);
    if (!s) {
      s = withInserts(parts.map((p) => p.stmt));
      if (this.shapes.size < MAX_NAMED_COMBINED) {
        this.shapes.set(key, s);
      } else {
        s = { ...s, name: '' };
      }
    }
    return {
      stmt: s,
      params: joined(parts.map((p) => p.params)),
      rows: parts.reduce((n, p) => n + p.rows, 0),
      table: parts[0].table,
    };
  }
}

/** Whether held inserts may ride on `s` (PgInsertCombiner.carrier): a named statement that reads declared tables and takes no lock of the one lock order. */
function carries(s: HotStatement): boolean {
  return (
    s.name !== '' &&
    s.reads !== undefined &&
    !s.rows &&
    !s.fence &&
    !s.advisory &&
    !s.relets &&
    s.lockRun === undefined &&
    s.lockKey === undefined &&
    s.lease === undefined &&
    // A group's lock statement (GROUP_KEYS, GROUP_LOCKS) is none of the above, but takes locks.
    !s.pg.includes('pg_advisory') &&
    !/^\s*WITH\b/i.test(s.pg)
  );
}

/** The highest `$n` mark of a PostgreSQL text: its parameter count. */
function markCount(pg: string): number {
  let most = 0;
  for (const m of pg.matchAll(/\$(\d+)/g)) {
    most = Math.max(most, Number(m[1]));
  }
  return most;
}

/** One PostgreSQL statement running the given inserts (their `pg` text with `$n` marks), parameters in order. */
export function withInserts(parts: readonly HotStatement[]): HotStatement {
  let offset = 0;
  const texts = parts.map((p) => {
    let most = 0;
    const text = p.pg.replace(/\$(\d+)/g, (_m, d: string) => {
      const n = Number(d);
      most = Math.max(most, n);
      return `$${n + offset}`;
    });
    offset += most;
    return text;
  });
  const last = texts.pop()!;
  const pg = `WITH ${texts.map((t, i) => `w${i + 1} AS (${t})`).join(', ')} ${last}`;
  const name = `hot_w_${createHash('sha256').update(pg).digest('hex').slice(0, 24)}`;
  return { name, sqlite: '', pg };
}
