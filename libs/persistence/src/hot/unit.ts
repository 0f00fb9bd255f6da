/**
 * A unit of work for the one writer, written once for both dialects: a generator that yields
 * statements and receives their results. The SQLite driver steps it synchronously inside the
 * batch transaction (nothing else can run between its statements), the PostgreSQL driver steps
 * it with awaits on the writer's own connection. A unit must only touch the database through
 * what it yields: the writer may run it twice (once in a group, once alone after the group
 * failed), so side effects belong after its promise resolves.
 */
import type { HotStatement } from './hot-sql';

export type SqlValue = string | number | null;

export interface Changes {
  changes: number;
}

/**
 * Locks a unit takes later in its transaction, declared on its first op so that the PostgreSQL
 * writer takes them with the rest of its group's locks, in the one lock order
 * (run-fence.ts GROUP_LOCKS, docs/scale-out.md#one-lock-order): transaction advisory lock keys
 * (lockConversation's kind) and run rows. Drivers that take no locks ignore it.
 */
export interface LaterLocks {
  keys?: readonly string[];
  runs?: readonly string[];
}

export type Op = (
  | { kind: 'run'; stmt: HotStatement; params: readonly SqlValue[] }
  | { kind: 'get'; stmt: HotStatement; params: readonly SqlValue[] }
  | { kind: 'all'; stmt: HotStatement; params: readonly SqlValue[] }
) & {
  locks?: LaterLocks;
  /**
   * The unit's last statement: it returns as soon as it has the answer, so the PostgreSQL writer
   * may write COMMIT with it when it is the group's last, and in an earlier unit write it without
   * waiting, the unit returning after COMMIT (pg-driver.ts). Only for a statement a
   * top-level unit returns right after (`lastOne`); a unit that yields after it fails its group.
   */
  final?: true;
  /**
   * A form of the statement that answers the same, but fails the transaction (speculation.ts)
   * unless its answer lets the unit return right after it: the PostgreSQL writer may write that
   * form as the unit's last statement (as Op.final: COMMIT with it in the group's last unit,
   * without waiting in an earlier one), and runs the group again with every answer awaited when
   * it fails (pg-driver.ts). Same parameters.
   */
  finalIf?: HotStatement;
};

export type Unit<T> = Generator<Op, T, unknown>;

/** Runs a statement; yields the number of rows it changed. `locks`: see LaterLocks. */
export function* exec(
  stmt: HotStatement,
  params: readonly SqlValue[],
  locks?: LaterLocks,
): Generator<Op, number, unknown> {
  return ((yield locks ? { kind: 'run', stmt, params, locks } : { kind: 'run', stmt, params }) as Changes).changes;
}

/** The first row of a query (or of a RETURNING clause), if any. `locks`: see LaterLocks. */
export function* one<R>(
  stmt: HotStatement,
  params: readonly SqlValue[],
  locks?: LaterLocks,
): Generator<Op, R | undefined, unknown> {
  return (yield locks ? { kind: 'get', stmt, params, locks } : { kind: 'get', stmt, params }) as R | undefined;
}

/** `one` for a unit's last statement (Op.final): the unit returns right after its answer. */
export function* lastOne<R>(stmt: HotStatement, params: readonly SqlValue[]): Generator<Op, R | undefined, unknown> {
  return (yield { kind: 'get', stmt, params, final: true }) as R | undefined;
}

/**
 * `one`, with the form of the statement that fails unless the unit returns right after its answer
 * (Op.finalIf).
 */
export function* oneFinalIf<R>(
  stmt: HotStatement,
  params: readonly SqlValue[],
  finalIf: HotStatement,
): Generator<Op, R | undefined, unknown> {
  return (yield { kind: 'get', stmt, params, finalIf }) as R | undefined;
}

export function* rows<R>(stmt: HotStatement, params: readonly SqlValue[]): Generator<Op, R[], unknown> {
  return (yield { kind: 'all', stmt, params }) as R[];
}

/**
 * The parameter lists one after another, as one new list (a multi-row or combined statement's).
 * A plain loop: `Array.prototype.flat` / `flatMap` took 40 µs of a PostgreSQL c1 run's host CPU
 * in a profile (docs/benchmarks.md, round 19).
 */
export function joined(lists: readonly (readonly SqlValue[])[]): SqlValue[] {
  let n = 0;
  for (const l of lists) {
    n += l.length;
  }
  const out = new Array<SqlValue>(n);
  let i = 0;
  for (const l of lists) {
    for (const v of l) {
      out[i++] = v;
    }
  }
  return out;
}

/** SQLite binds no booleans; PostgreSQL reads '1'/'0' as booleans. */
export function bool(v: boolean | null | undefined): number | null {
  return v === null || v === undefined ? null : v ? 1 : 0;
}

/**
 * JSON texts of large objects, by object: made once by the writer and read again by whoever sends
 * the same object (a huge `message.final` op's payload and its live SSE frame,
 * docs/delivery.md#long-answers), so that a 16 MiB text is not serialised twice. Only for objects
 * never changed after they are written (op payloads); smaller texts are not kept.
 */
const largeJson = new WeakMap<object, string>();
/** JSON texts at least this long are kept for `writtenJson`. */
export const LARGE_JSON_CHARS = 1 << 20;

export function json(v: unknown): string | null {
  if (v === null || v === undefined) {
    return null;
  }
  const text = JSON.stringify(v);
  if (text.length >= LARGE_JSON_CHARS && typeof v === 'object') {
    largeJson.set(v, text);
  }
  return text;
}

/** The JSON text `json` made of this object when it was large, else undefined (serialise it yourself). */
export function writtenJson(v: object): string | undefined {
  return largeJson.get(v);
}

/**
 * Bound parameters of a row in column order: null for missing, 0/1 for booleans, JSON text for
 * objects. `over`: columns whose value replaces the row's (its keys win, even when undefined) —
 * instead of a spread copy of a wide row, which V8 (Node 20) builds on a slow path
 * (docs/benchmarks.md, "Fewer SQLite statements per run").
 */
export function rowParams<K extends string>(
  columns: readonly K[],
  row: Partial<Record<K, unknown>>,
  over?: Partial<Record<K, unknown>>,
): SqlValue[] {
  return columns.map((c) => {
    const v = over !== undefined && c in over ? over[c] : row[c];
    if (v === undefined || v === null) {
      return null;
    }
    if (typeof v === 'boolean') {
      return bool(v);
    }
    return typeof v === 'object' ? json(v) : (v as SqlValue);
  });
}
