import type { TestingModule } from '@nestjs/testing';
import { Client } from 'pg';
import { DataSource, In } from 'typeorm';
import {
  ContextRepository,
  ENTITIES,
  EventLogEntity,
  HotStore,
  RunEntity,
  RunResultEntity,
  RunsRepository,
  StateEntryEntity,
  StoresRepository,
  TranscriptEntity,
  Transactions,
  resultUnit,
  type AdmitOutcome,
  type NewResult,
  type NewTranscriptRow,
  type Unit,
  type WriterStats,
} from '@libs/persistence';
import {
  DIALECTS,
  PERSISTENT_DIALECTS,
  driverError,
  isPostgres,
  type TestDatabase,
  storesModule,
  UNIQUE_VIOLATION,
} from './support/databases';
import { admission, completed, eventWithRun, logOf, newResult, T0, transcriptRow } from './support/run-rows';

jest.setTimeout(60_000);

/** Writes a result, then fails: the writer must not keep the row. */
function* writesThenThrows(r: NewResult): Unit<void> {
  yield* resultUnit(r, null);
  throw new Error('unit failed on purpose');
}

/** Two results in one unit; the second may conflict, taking the first down with it. */
function* twoResults(a: NewResult, b: NewResult): Unit<void> {
  yield* resultUnit(a, null);
  yield* resultUnit(b, null);
}

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Names of the statements the hot store runs from now on (its prepared statements on either dialect). */
function executedStatements(hot: HotStore): { names: string[]; restore: () => void } {
  const names: string[] = [];
  if (hot.dialect === 'postgres') {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with the client as `this` below
    const originalQuery = Client.prototype.query;
    const spy = jest.spyOn(Client.prototype, 'query').mockImplementation(function (this: Client, ...args: unknown[]) {
      const config = args[0] as { name?: string } | string;
      if (typeof config === 'object' && config.name) {
        names.push(config.name);
      }
      return (originalQuery as (...a: unknown[]) => never).apply(this, args);
    });
    return { names, restore: () => spy.mockRestore() };
  }
  const sqlite = (hot as unknown as { sqlite: { statement: (s: { name: string }) => unknown } }).sqlite;
  const statement = sqlite.statement.bind(sqlite);
  sqlite.statement = (s) => {
    names.push(s.name);
    return statement(s);
  };
  return { names, restore: () => delete (sqlite as { statement?: unknown }).statement };
}

/** The writer's counters gained since `before`. */
function gained(hot: HotStore, before: WriterStats): WriterStats {
  const now = hot.writerStats;
  return {
    units: now.units - before.units,
    commits: now.commits - before.commits,
    replays: now.replays - before.replays,
  };
}

/** How each promise settled, in submission order. */
async function settle<T>(promises: Promise<T>[]): Promise<Array<{ ok: T } | { error: unknown }>> {
  return Promise.all(
    promises.map((p) =>
      p.then(
        (ok) => ({ ok }),
        (error: unknown) => ({ error }),
      ),
    ),
  );
}

describe.each(DIALECTS)('hot store on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let hot: HotStore;
  let runs: RunsRepository;
  let stores: StoresRepository;
  let tx: Transactions;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [Transactions, ContextRepository, RunsRepository, StoresRepository]);
    ds = moduleRef.get(DataSource);
    hot = moduleRef.get(HotStore);
    runs = moduleRef.get(RunsRepository);
    stores = moduleRef.get(StoresRepository);
    tx = moduleRef.get(Transactions);
  });

  afterAll(async () => {
    await moduleRef?.close();
    await db?.dispose();
  });

  beforeEach(async () => {
    await hot.drain();
    for (const entity of ENTITIES) {
      await ds.getRepository(entity).clear();
    }
  });

  const resultRows = (runId: string) =>
    ds.getRepository(RunResultEntity).find({ where: { run_id: runId }, order: { sequence: 'ASC' } });

  it('runs on the dialect it was configured for', () => {
    expect(hot.dialect).toBe(db.config.type === 'postgres' ? 'postgres' : 'sqlite');
  });

  describe('group commit', () => {
    it('commits 200 units submitted in one tick in one transaction; each resolves once its rows are readable', async () => {
      const before = { ...hot.writerStats };
      const { event, run } = eventWithRun();
      await runs.admit(admission(event, run));
      const afterAdmit = { ...hot.writerStats };
      expect(gained(hot, before)).toEqual({ units: 1, commits: 1, replays: 0 });

      const seen = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          runs.insertResult(newResult(run.run_id, i + 1)).then(async () => {
            // Read through TypeORM: on PostgreSQL another connection than the writer's.
            const row = await ds.getRepository(RunResultEntity).findOneBy({ run_id: run.run_id, sequence: i + 1 });
            return row?.sequence ?? null;
          }),
        ),
      );

      expect(seen).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
      const stats = gained(hot, afterAdmit);
      expect(stats.units).toBe(200);
      expect(stats.replays).toBe(0);
      // Everything pending when the writer flushes goes into one transaction (at most maxBatch, 256).
      expect(stats.commits).toBe(1);
      expect(await runs.lastSequence(run.run_id)).toBe(200);
    });
  });

  describe('isolation within a group', () => {
    it('rejects only the failing units; the others of the group commit; nothing of a failing unit is written', async () => {
      await runs.insertResult(newResult('run-a', 1, { data: { original: true } }));
      const before = { ...hot.writerStats };

      // A duplicate (run_id, sequence), after a result of another run in the same unit.
      const duplicate = hot.write(() =>
        twoResults(newResult('run-c', 1), newResult('run-a', 1, { data: { original: false } })),
      );
      const outcomes = await settle<unknown>([
        runs.insertResult(newResult('run-a', 2)),
        duplicate,
        runs.insertResult(newResult('run-b', 1)),
        hot.write(() => writesThenThrows(newResult('run-d', 1))),
        stores.stateSet('scope-1', 'k', '"v"'),
        runs.insertResult(newResult('run-a', 3)),
      ]);

      expect(outcomes.map((o) => ('ok' in o ? 'ok' : 'error'))).toEqual(['ok', 'error', 'ok', 'error', 'ok', 'ok']);
      expect((await driverError(duplicate)).code).toMatch(UNIQUE_VIOLATION);
      expect(outcomes[3]).toEqual({ error: new Error('unit failed on purpose') });
      // One group, rolled back whole, then replayed one unit per transaction.
      expect(gained(hot, before)).toMatchObject({ units: 6, replays: 1 });

      expect((await resultRows('run-a')).map((r) => [r.sequence, r.data])).toEqual([
        [1, { original: true }],
        [2, { n: 2 }],
        [3, { n: 3 }],
      ]);
      expect(await resultRows('run-b')).toHaveLength(1);
      expect(await resultRows('run-c')).toEqual([]);
      expect(await resultRows('run-d')).toEqual([]);
      expect(await stores.stateGet('scope-1', 'k')).toBe('"v"');
    });

    it('keeps the writer working after a group failed', async () => {
      await settle([
        hot.write(() => writesThenThrows(newResult('run-x', 1))),
        runs.insertResult(newResult('run-y', 1)),
      ]);

      await runs.insertResult(newResult('run-x', 1));
      expect(await runs.lastSequence('run-x')).toBe(1);
      expect(await runs.lastSequence('run-y')).toBe(1);
    });
  });

  describe('the event claim and its log row (one statement on PostgreSQL, two on SQLite)', () => {
    it('writes the log row with every column as given, its id the event_seq; a duplicate writes none', async () => {
      const { event, run } = eventWithRun({ idempotency_key: 'idem-log' });
      const log = {
        ...logOf(event),
        event_time: T0 - 5,
        bot_id: 'bot-1',
        actor_type: 'user',
        actor_id: 'u-1',
        subject_id: 's-1',
        metadata: { from: 'spec' },
      };
      const outcome = await runs.admit({ ...admission(event, run), log });
      expect(outcome).toMatchObject({ admitted: true, disposition: 'started', run_id: run.run_id });
      const rows = await ds.getRepository(EventLogEntity).find();
      expect(rows).toHaveLength(1);
      expect(Number(rows[0].id)).toBe((outcome as { event_seq: number }).event_seq);
      expect({ ...rows[0], id: 0 }).toEqual({
        ...log,
        id: 0,
        event_time: T0 - 5,
        run_id: run.run_id,
        metadata: { from: 'spec' },
      });
      // The same key under another event id: the recorded event answers, no row is added.
      const copy = eventWithRun({ idempotency_key: 'idem-log' });
      const again = await runs.admit({
        ...admission(copy.event, copy.run),
        log: { ...log, event_id: copy.event.event_id },
      });
      expect(again).toMatchObject({ admitted: false, existing: { event_id: event.event_id } });
      expect(await ds.getRepository(EventLogEntity).count()).toBe(1);
    });
  });

  describe('concurrent duplicate admission', () => {
    async function admitEight(dup: 'event_id' | 'idempotency_key'): Promise<AdmitOutcome[]> {
      const first = eventWithRun({ idempotency_key: dup === 'idempotency_key' ? 'idem-race' : null });
      const admissions = Array.from({ length: 8 }, (_, i) => {
        if (i === 0) {
          return admission(first.event, first.run, transcriptRow('user', 'first'));
        }
        const { event, run } =
          dup === 'event_id'
            ? eventWithRun({ event_id: first.event.event_id })
            : eventWithRun({ idempotency_key: 'idem-race' });
        return admission(event, run, transcriptRow('user', `copy ${i}`));
      });
      return Promise.all(admissions.map((a) => runs.admit(a)));
    }

    it.each(['event_id', 'idempotency_key'] as const)(
      'admits exactly one of 8 submitted at once with the same %s; the 7 others get the recorded event',
      async (dup) => {
        const outcomes = await admitEight(dup);

        const admitted = outcomes.filter((o) => o.admitted);
        const refused = outcomes.filter((o): o is Extract<AdmitOutcome, { admitted: false }> => !o.admitted);
        expect(admitted).toMatchObject([{ admitted: true, transcript_seq: 1 }]);
        expect(refused).toHaveLength(7);
        const runRows = await ds.getRepository(RunEntity).find();
        expect(runRows).toHaveLength(1);
        const recorded = (await runs.getEvent(runRows[0].event_id))!;
        expect(recorded.run_id).toBe(runRows[0].run_id);
        for (const r of refused) {
          expect(r.existing).toEqual(recorded);
        }
        expect(await ds.getRepository(EventLogEntity).count()).toBe(1);
        expect((await ds.getRepository(TranscriptEntity).find()).map((t) => [t.seq, t.content])).toEqual([
          [1, 'first'],
        ]);
      },
    );

    it('re-admits a failed event once when 8 retries of it arrive at once', async () => {
      const failed = eventWithRun({ disposition: 'failed', idempotency_key: 'idem-retry-race' }, { status: 'failed' });
      // Failed at admission: its run comes with its terminal result.
      await runs.admit({ ...admission(failed.event, failed.run), terminal: newResult(failed.run.run_id, 1) });

      const retries = Array.from({ length: 8 }, () => {
        const { run } = eventWithRun({}, { event_id: failed.event.event_id });
        const event = { ...failed.event, disposition: 'started', run_id: run.run_id, received_at: T0 + 1 };
        return { ...admission(event, run), readmit: true };
      });
      const outcomes = await Promise.all(retries.map((r) => runs.admit(r)));

      expect(outcomes.filter((o) => o.admitted)).toHaveLength(1);
      const winner = retries[outcomes.findIndex((o) => o.admitted)];
      for (const o of outcomes.filter((x): x is Extract<AdmitOutcome, { admitted: false }> => !x.admitted)) {
        expect(o.existing).toEqual(winner.event);
      }
      expect(await runs.getEvent(failed.event.event_id)).toEqual(winner.event);
      expect((await ds.getRepository(RunEntity).find()).map((r) => r.run_id).sort()).toEqual(
        [failed.run.run_id, winner.run!.run_id].sort(),
      );
      expect(await ds.getRepository(EventLogEntity).count()).toBe(2);
    });
  });

  describe('the end of a run', () => {
    async function running(): Promise<string> {
      const { event, run } = eventWithRun();
      await runs.admit(admission(event, run));
      return run.run_id;
    }

    const state = (value: string) => ({ scope_key: 'scope-run', state_key: 'answer', value });
    const assistant = (runId: string, text: string): NewTranscriptRow =>
      transcriptRow('assistant', text, { run_id: runId });

    it('writes status, terminal result, state write and assistant row in one commit', async () => {
      const runId = await running();
      const before = { ...hot.writerStats };

      const terminal = newResult(runId, 4, { type: 'run.completed', data: { text: 'done' } });
      expect(await runs.endIfActive(terminal, completed(), state('"done"'), assistant(runId, 'done'))).toBe(true);

      expect(gained(hot, before)).toEqual({ units: 1, commits: 1, replays: 0 });
      expect(await runs.get(runId)).toMatchObject({
        status: 'completed',
        finished_at: T0 + 1000,
        usage: { tokens: 3 },
      });
      expect((await runs.resultsAfter(runId, 0, 10)).map((r) => [r.sequence, r.type])).toEqual([[4, 'run.completed']]);
      expect(await stores.stateGet('scope-run', 'answer')).toBe('"done"');
      expect((await ds.getRepository(TranscriptEntity).find()).map((t) => [t.role, t.content, t.run_id])).toEqual([
        ['assistant', 'done', runId],
      ]);
    });

    it('writes none of the four when one of them fails (the assistant row is refused)', async () => {
      const runId = await running();
      const broken = { ...assistant(runId, 'broken'), role: null } as unknown as NewTranscriptRow;

      await driverError(
        runs.endIfActive(newResult(runId, 1, { type: 'run.completed' }), completed(), state('"x"'), broken),
      );

      expect(await runs.status(runId)).toBe('running');
      expect(await resultRows(runId)).toEqual([]);
      expect(await stores.stateGet('scope-run', 'answer')).toBeNull();
      expect(await ds.getRepository(TranscriptEntity).count()).toBe(0);
    });

    it('a second finish of the same run returns false and writes nothing', async () => {
      const runId = await running();
      expect(
        await runs.endIfActive(
          newResult(runId, 2, { type: 'run.completed' }),
          completed(),
          state('"first"'),
          assistant(runId, 'first'),
        ),
      ).toBe(true);

      const again = await runs.endIfActive(
        newResult(runId, 3, { type: 'run.failed' }),
        { status: 'failed', status_reason: 'late', error_code: 'LATE', retryable: false, finished_at: T0 + 5000 },
        state('"second"'),
        assistant(runId, 'second'),
      );

      expect(again).toBe(false);
      expect(await runs.get(runId)).toMatchObject({ status: 'completed', finished_at: T0 + 1000, error_code: null });
      expect((await resultRows(runId)).map((r) => r.sequence)).toEqual([2]);
      expect(await stores.stateGet('scope-run', 'answer')).toBe('"first"');
      expect((await ds.getRepository(TranscriptEntity).find()).map((t) => t.content)).toEqual(['first']);
    });

    it('two finishes submitted at once: exactly one wins', async () => {
      const runId = await running();

      const both = await Promise.all([
        runs.endIfActive(newResult(runId, 1, { type: 'run.completed' }), completed(), null, assistant(runId, 'a')),
        runs.endIfActive(newResult(runId, 2, { type: 'run.cancelled' }), completed(), null, assistant(runId, 'b')),
      ]);

      expect(both).toEqual([true, false]);
      expect((await resultRows(runId)).map((r) => r.type)).toEqual(['run.completed']);
      expect((await ds.getRepository(TranscriptEntity).find()).map((t) => t.content)).toEqual(['a']);
    });
  });

  describe('admin transactions', () => {
    it('a hot write submitted during an admin transaction is not part of it: it survives its rollback', async () => {
      const order: string[] = [];
      let hotWrite: Promise<void> = Promise.resolve();

      const admin = tx.run(async (m) => {
        await m.insert(StateEntryEntity, { scope_key: 'admin', state_key: 'k', value: '"admin"', updated_at: T0 });
        hotWrite = runs.insertResult(newResult('run-hot', 1)).then(() => {
          order.push('hot write committed');
        });
        if (isPostgres(ds)) {
          // The writer has a connection of its own: the open admin transaction does not hold it up
          // (awaiting the write here would never end on SQLite, whose writer waits for this transaction).
          await hotWrite;
        } else {
          await delay(50);
        }
        order.push('admin transaction ending');
        throw new Error('roll the admin transaction back');
      });

      await expect(admin).rejects.toThrow('roll the admin transaction back');
      await hotWrite;

      expect(order).toEqual(
        isPostgres(ds)
          ? ['hot write committed', 'admin transaction ending']
          : // One shared connection: the writer waits for the admin transaction to end.
            ['admin transaction ending', 'hot write committed'],
      );
      expect(await resultRows('run-hot')).toHaveLength(1);
      expect(await ds.getRepository(StateEntryEntity).countBy({ scope_key: 'admin' })).toBe(0);
    });

    it('an admin transaction that commits keeps its rows, and hot writes around it keep theirs', async () => {
      const writes: Promise<void>[] = [runs.insertResult(newResult('run-hot', 1))];
      const admin = tx.run(async (m) => {
        writes.push(runs.insertResult(newResult('run-hot', 2)));
        await m.insert(StateEntryEntity, { scope_key: 'admin', state_key: 'k', value: '"admin"', updated_at: T0 });
        await delay(20);
        writes.push(runs.insertResult(newResult('run-hot', 3)));
        return 'done';
      });
      writes.push(runs.insertResult(newResult('run-hot', 4)));

      expect(await admin).toBe('done');
      await Promise.all(writes);

      expect((await resultRows('run-hot')).map((r) => r.sequence)).toEqual([1, 2, 3, 4]);
      expect(await ds.getRepository(StateEntryEntity).countBy({ scope_key: 'admin' })).toBe(1);
    });

    it('an admin transaction beginning while the writer moves to its next group fails no hot write', async () => {
      // 769 units: four groups (256 + 256 + 256 + 1). The admin transaction is started by code
      // resuming after the first group committed (as a handler awaiting a hot write would), a
      // varying number of microtasks later, so its BEGIN lands at every point of the writer's
      // move to its next group, including between its readiness check and its own BEGIN.
      const failures: string[] = [];
      const before = { ...hot.writerStats };
      for (let hops = 0; hops < 12; hops++) {
        const runId = `run-hops-${hops}`;
        const writes = Array.from({ length: 769 }, (_, i) => runs.insertResult(newResult(runId, i + 1)));
        const admin = writes[0]
          .then(async () => {
            for (let k = 0; k < hops; k++) {
              await Promise.resolve();
            }
            return tx.run(async (m) => {
              await m.insert(StateEntryEntity, { scope_key: 'admin', state_key: runId, value: '1', updated_at: T0 });
              await delay(5);
              throw new Error('roll the admin transaction back');
            });
          })
          .catch((e: Error) => e.message);
        const settled = await settle(writes);
        failures.push(
          ...settled.flatMap((o, i) => ('error' in o ? [`hops=${hops} #${i + 1}: ${String(o.error)}`] : [])),
        );
        expect(await admin).toBe('roll the admin transaction back');
        await hot.drain();
      }

      expect(failures).toEqual([]);
      // No group failed either (a failed group is replayed as one transaction per unit).
      expect(gained(hot, before).replays).toBe(0);
      expect(await ds.getRepository(StateEntryEntity).countBy({ scope_key: 'admin' })).toBe(0);
    });
  });

  describe('ordering', () => {
    it('commits results in submission order per run, interleaved over several runs and groups', async () => {
      const runIds = ['run-o1', 'run-o2', 'run-o3'];
      const resolved: string[] = [];
      const submitted: string[] = [];
      const writes: Promise<unknown>[] = [];
      const submit = (runId: string, seq: number) => {
        submitted.push(`${runId}#${seq}`);
        writes.push(runs.insertResult(newResult(runId, seq)).then(() => resolved.push(`${runId}#${seq}`)));
      };

      for (let seq = 1; seq <= 100; seq++) {
        for (const [i, runId] of runIds.entries()) {
          // The runs drift apart: not every run writes at every step.
          if ((seq + i) % 7 !== 0) {
            submit(runId, seq);
          }
        }
        if (seq === 50) {
          // A failing unit in the middle: its group is replayed unit by unit.
          writes.push(hot.write(() => writesThenThrows(newResult('run-bad', 1))).catch(() => undefined));
        }
        if (seq % 30 === 0) {
          // Let the writer flush: the rest lands in later groups.
          await new Promise((r) => setImmediate(r));
        }
      }
      await Promise.all(writes);

      expect(resolved).toEqual(submitted);
      const rows = await ds.getRepository(RunResultEntity).find({ order: { id: 'ASC' } });
      expect(rows.map((r) => `${r.run_id}#${r.sequence}`)).toEqual(submitted);
      for (const runId of runIds) {
        const seqs = (await runs.resultsAfter(runId, 0, 1000)).map((r) => r.sequence);
        expect(seqs).toEqual(submitted.filter((s) => s.startsWith(`${runId}#`)).map((s) => Number(s.split('#')[1])));
      }
      expect(await resultRows('run-bad')).toEqual([]);
    });

    it('writes the results of a run that arrive in one tick as one INSERT, each with its own sequence', async () => {
      const executed = executedStatements(hot);
      try {
        await Promise.all(Array.from({ length: 40 }, (_, i) => runs.insertResult(newResult('run-tick', i + 1))));
        await Promise.all([runs.insertResult(newResult('run-tick', 41)), runs.insertResult(newResult('run-other', 1))]);
      } finally {
        executed.restore();
      }

      // One statement for the 40 rows of the first tick; one for the two runs' rows of the second.
      expect(executed.names.filter((n) => n.startsWith('hot_insert_result'))).toEqual([
        'hot_insert_result_x40',
        'hot_insert_result_x2',
      ]);
      expect((await runs.resultsAfter('run-tick', 0, 100)).map((r) => r.sequence)).toEqual(
        Array.from({ length: 41 }, (_, i) => i + 1),
      );
      expect((await runs.resultsAfter('run-tick', 38, 100)).map((r) => r.sequence)).toEqual([39, 40, 41]);
      expect(await resultRows('run-other')).toHaveLength(1);
    });

    it('crosses the batch limit (more than 256 pending units) without reordering', async () => {
      const before = { ...hot.writerStats };
      const order: number[] = [];

      await Promise.all(
        Array.from({ length: 600 }, (_, i) =>
          runs.insertResult(newResult('run-big', i + 1)).then(() => order.push(i + 1)),
        ),
      );

      expect(order).toEqual(Array.from({ length: 600 }, (_, i) => i + 1));
      const stats = gained(hot, before);
      expect(stats.commits).toBeGreaterThanOrEqual(3);
      expect(stats.commits).toBeLessThan(600);
      const rows = await ds.getRepository(RunResultEntity).find({ where: { run_id: 'run-big' }, order: { id: 'ASC' } });
      expect(rows.map((r) => r.sequence)).toEqual(order);
    });
  });
});

/**
 * Scale-out (many processes on PostgreSQL; docs/deployment.md#one-host-process-per-database): each
 * process has its own writer. Two modules on one database stand for two host processes.
 */
describe.each(PERSISTENT_DIALECTS)('two writers on one database (two host processes) on %s', (_name, factory) => {
  let db: TestDatabase;
  let modules: TestingModule[] = [];
  let ds: DataSource;

  beforeAll(async () => {
    db = await factory();
    modules = [
      await storesModule(db, [ContextRepository, RunsRepository]),
      await storesModule(db, [ContextRepository, RunsRepository]),
    ];
    ds = modules[0].get(DataSource);
  });

  afterAll(async () => {
    for (const m of modules) {
      await m.close();
    }
    await db?.dispose();
  });

  it('give concurrent appends to one conversation distinct, gapless seqs and reject none', async () => {
    const [a, b] = modules.map((m) => m.get(ContextRepository));
    const failures: string[] = [];
    const appendMany = async (context: ContextRepository, who: string) => {
      for (let i = 0; i < 40; i++) {
        await context
          .appendTranscript(transcriptRow('user', `${who} ${i}`, { conversation_id: 'conv-shared' }))
          .catch((e: unknown) => failures.push(`${who} ${i}: ${String(e)}`));
      }
    };

    await Promise.all([appendMany(a, 'a'), appendMany(b, 'b')]);

    expect(failures).toEqual([]);
    const seqs = (await ds.getRepository(TranscriptEntity).findBy({ conversation_id: 'conv-shared' })).map(
      (t) => t.seq,
    );
    expect(seqs.sort((x, y) => x - y)).toEqual(Array.from({ length: 80 }, (_, i) => i + 1));
  });

  it('admit one of two duplicate admissions racing on two writers, the other gets the recorded event', async () => {
    const [a, b] = modules.map((m) => m.get(RunsRepository));
    const first = eventWithRun({ idempotency_key: 'idem-two-writers' });
    const second = eventWithRun({ idempotency_key: 'idem-two-writers' });

    const outcomes = await Promise.all([
      a.admit(admission(first.event, first.run)),
      b.admit(admission(second.event, second.run)),
    ]);

    expect(outcomes.filter((o) => o.admitted)).toHaveLength(1);
    expect(
      await ds.getRepository(RunEntity).countBy({ event_id: In([first.event.event_id, second.event.event_id]) }),
    ).toBe(1);
  });
});
