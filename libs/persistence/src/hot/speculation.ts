/**
 * The PostgreSQL writer's guesses (docs/durability.md#the-writers-transactions-on-postgresql): a
 * statement whose answer decides whether the unit goes on is written without waiting for it, on
 * the guess that its answer is the usual one, in a form that fails the transaction (SQLSTATE
 * MISSED_SQLSTATE, `rh_expected`: migration 1767750000000) when it is not. The group is then
 * rolled back and run again with every answer awaited (pg-driver.ts), so a wrong guess costs
 * round trips, never a different outcome. Two guesses: a run's end matched its row (it had not
 * ended yet, its lease is still this process's), and no steering item is queued on the run at its
 * end (Op.finalIf). SQLite steps its units in process and guesses nothing.
 */
import { riding, SQL, type HotStatement } from './hot-sql';
import { finishRunFenced } from './run-fence';

/** The SQLSTATE of a guess that missed (`rh_expected`). */
export const MISSED_SQLSTATE = 'RH412';

/** A group's guess missed: its transaction was rolled back, nothing of it was written. */
export class SpeculationMissed extends Error {
  constructor(override readonly cause: unknown) {
    super(`speculation missed: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'SpeculationMissed';
  }
}

/** PostgreSQL SQL: `value` (an expression) when it is `expected`, else the statement fails (MISSED_SQLSTATE). */
export function expectedSql(value: string, expected: number, what: string): string {
  return `"rh_expected"(${value}, ${expected}, '${what}')`;
}

const ENDS = new Set<HotStatement>([
  SQL.finishRun,
  SQL.finishRunLocking,
  finishRunFenced(false),
  finishRunFenced(true),
]);
const RIDING = new Map<HotStatement, HotStatement>();

/**
 * The form of a run's end (SQL.finishRun, SQL.finishRunLocking, finishRunFenced) the PostgreSQL
 * writer writes without waiting for its answer: the same UPDATE, failing with MISSED_SQLSTATE
 * unless it matched the run's row — so the unit is handed "one row changed" at once, and the
 * statements behind it are written right after it. Same parameters. Undefined for any other
 * statement.
 */
export function ridingEnd(s: HotStatement): HotStatement | undefined {
  let r = RIDING.get(s);
  if (r === undefined && ENDS.has(s)) {
    r = riding(s, (changed) => expectedSql(changed, 1, 'rows of the run end'));
    RIDING.set(s, r);
  }
  return r;
}
