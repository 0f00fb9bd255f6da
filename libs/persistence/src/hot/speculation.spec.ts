import { SQL } from './hot-sql';
import { FENCE_RUN, finishRunFenced } from './run-fence';
import { expectedSql, ridingEnd } from './speculation';
import { STEERING_SQL } from './steering-sql';

/** The `$n` marks of a PostgreSQL text, in order of first use. */
const marks = (pg: string): number => Math.max(0, ...[...pg.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));

describe('ridingEnd: the run end written without waiting for its answer (PostgreSQL)', () => {
  const ends = [SQL.finishRun, SQL.finishRunLocking, finishRunFenced(false), finishRunFenced(true)];

  it.each(ends.map((s) => [s.name, s] as const))(
    '%s: the same UPDATE, checked to match one row, same parameters',
    (_n, s) => {
      const r = ridingEnd(s)!;
      expect(r.name).toBe(`${s.name}_riding`);
      // The statement itself, as a data-modifying CTE whose matched rows the check counts.
      expect(r.pg).toContain(s.pg.replace(/\s+RETURNING[\s\S]*$/, ''));
      expect(r.pg).toMatch(/^WITH "f" AS \(UPDATE "runs"/);
      expect(r.pg).toContain(`"rh_expected"((SELECT count(*) FROM "f"), 1,`);
      expect(marks(r.pg)).toBe(marks(s.pg));
      // Made once per statement: its prepared name stays one statement on the server.
      expect(ridingEnd(s)).toBe(r);
    },
  );

  it("keeps the locking end's advisory lock in its RETURNING (taken only when it matched)", () => {
    expect(ridingEnd(SQL.finishRunLocking)!.pg).toMatch(/RETURNING pg_advisory_xact_lock\(hashtext\(\$8\)\) AS "k"\)/);
  });

  it('is undefined for any other statement (fences ride as ridingFence)', () => {
    expect(ridingEnd(FENCE_RUN)).toBeUndefined();
    expect(ridingEnd(SQL.insertResult)).toBeUndefined();
    expect(ridingEnd(STEERING_SQL.appendTranscriptAndQueue)).toBeUndefined();
  });
});

describe("the end's transcript append as its last statement (Op.finalIf)", () => {
  it('answers what appendTranscriptAndQueue answers, with the same parameters, but fails unless none is queued', () => {
    const plain = STEERING_SQL.appendTranscriptAndQueue;
    const last = STEERING_SQL.appendTranscriptNoneQueued;
    expect(marks(last.pg)).toBe(marks(plain.pg));
    expect(last.reads).toEqual(plain.reads);
    expect(last.pg).toContain(
      `${expectedSql(`(SELECT COUNT(*) FROM "steering_items" WHERE "run_id" = $${marks(plain.pg)} AND "state" = 'queued')`, 0, 'steering items queued on the run')} AS "queued"`,
    );
    // Without the check, the very text of appendTranscriptAndQueue.
    expect(last.pg.replace(/"rh_expected"\((.*), 0, '[^']*'\) AS "queued"/s, '$1 AS "queued"')).toBe(plain.pg);
  });
});
