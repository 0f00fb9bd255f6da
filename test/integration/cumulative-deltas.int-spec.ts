import type { TestingModule } from '@nestjs/testing';
import { getRepositoryToken } from '@nestjs/typeorm';
import { DataSource, type Repository } from 'typeorm';
import {
  CumulativeDeltas,
  HotStore,
  RunEntity,
  RunsRepository,
  Transactions,
  type JsonObject,
  type NewResult,
} from '@libs/persistence';
import { DIALECTS, type TestDatabase, storesModule } from './support/databases';

jest.setTimeout(120_000);

const T0 = 1_760_000_000_000;

/** An N-delta message sent cumulatively (every delta with all_content), then completed. */
function message(runId: string, n: number, size: number): NewResult[] {
  let text = '';
  const rows: NewResult[] = [];
  for (let i = 1; i <= n; i++) {
    const content = `${String.fromCharCode(97 + (i % 26)).repeat(size - 1)}é`;
    text += content;
    rows.push({
      run_id: runId,
      sequence: i,
      type: 'message.delta',
      data: { chunk: { role: 'assistant', content, all_content: text, msg_sequence: 1 } },
      usage: null,
      source: 'runner',
      timestamp: T0 + i,
      created_at: T0 + i,
    });
  }
  rows.push({
    run_id: runId,
    sequence: n + 1,
    type: 'message.completed',
    data: { message: { role: 'assistant', content: text } },
    usage: { output_tokens: n },
    source: 'runner',
    timestamp: T0 + n + 1,
    created_at: T0 + n + 1,
  });
  return rows;
}

const jsonChars = (rows: readonly NewResult[]) => rows.reduce((s, r) => s + JSON.stringify(r.data).length, 0);
const sent = (r: NewResult) => ({ ...r, created_at: undefined });

describe.each(DIALECTS)(
  'cumulative deltas stored linearly on %s (docs/durability.md#cumulative-deltas)',
  (_n, factory) => {
    let db: TestDatabase;
    let moduleRef: TestingModule;
    let ds: DataSource;
    let hot: HotStore;
    let runs: RunsRepository;
    let runRows: Repository<RunEntity>;

    beforeAll(async () => {
      db = await factory();
      moduleRef = await storesModule(db, [Transactions, RunsRepository]);
      ds = moduleRef.get(DataSource);
      hot = moduleRef.get(HotStore);
      runs = moduleRef.get(RunsRepository);
      runRows = moduleRef.get<Repository<RunEntity>>(getRepositoryToken(RunEntity));
    });

    afterAll(async () => {
      await moduleRef?.close();
      await db?.dispose();
    });

    /** Writes the results as the run path does: each through the run's rule, in order. */
    async function ingest(rows: readonly NewResult[]): Promise<void> {
      const rule = new CumulativeDeltas();
      for (const r of rows) {
        await runs.insertResult({ ...r, data: rule.store(r.sequence, r.type, r.data) as JsonObject });
      }
    }

    async function storedChars(runId: string): Promise<number> {
      const param = db.config.type === 'postgres' ? '$1' : '?';
      const [r] = await ds.query<{ n: string | number }[]>(
        `SELECT SUM(LENGTH("data")) AS "n" FROM "run_results" WHERE "run_id" = ${param}`,
        [runId],
      );
      return Number(r.n);
    }

    /** A reader of its own (nothing shared with earlier reads: every row comes from the database). */
    const fresh = () => new RunsRepository(runRows, hot);

    it('stores an N-delta cumulative message in space linear in N, the old storage quadratic', async () => {
      const perDelta = 40;
      const bound = (n: number) => n * (perDelta + 120) + 4 * 64 * 1024;
      for (const n of [200, 2000]) {
        const runId = `run-linear-${n}`;
        const rows = message(runId, n, perDelta);
        await ingest(rows);
        const now = await storedChars(runId);
        expect(now).toBeLessThan(bound(n));
        if (n === 2000) {
          expect(jsonChars(rows)).toBeGreaterThan(10 * bound(n)); // what every all_content stored whole takes
        }
        const read = await fresh().resultsAfter(runId, 0, n + 10);
        expect(read.length).toBe(n + 1);
        expect(read.every((r, i) => JSON.stringify(r) === JSON.stringify(sent(rows[i])))).toBe(true);
      }
    });

    it('replays from every position exactly what was sent, across checkpoints', async () => {
      const runId = 'run-replay';
      const rows = message(runId, 400, 200); // 80,000 characters: past a 64 KiB checkpoint
      await ingest(rows);
      const [{ n: full }] = await ds.query<{ n: string | number }[]>(
        `SELECT COUNT(*) AS "n" FROM "run_results" WHERE "run_id" = '${runId}' AND "data" LIKE '%all_content%'`,
      );
      expect(Number(full)).toBeGreaterThan(1); // the first delta and at least one checkpoint
      for (let after = 0; after <= rows.length; after++) {
        const page = await fresh().resultsAfter(runId, after, 5);
        const want = rows.slice(after, after + 5).map(sent);
        expect(page.length).toBe(want.length);
        expect(page.every((r, i) => JSON.stringify(r) === JSON.stringify(want[i]))).toBe(true);
      }
      // And the shared reader (its committed-results cache) answers the same.
      const all = await runs.resultsAfter(runId, 0, 1000);
      expect(all.every((r, i) => JSON.stringify(r) === JSON.stringify(sent(rows[i])))).toBe(true);
      expect(all.some((r) => '~a' in r.data)).toBe(false);
    });
  },
);
