import type { TestingModule } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import type { AppConfig } from '@libs/config';
import {
  HotStore,
  RetentionJob,
  admitUnit,
  finishUnit,
  outboxOfRunUnit,
  outboxUnit,
  resultUnit,
  webhookDeliveredUnit,
  webhookFailedUnit,
  type NewOutboxRow,
} from '@libs/persistence';
import { DIALECTS, storesModule, type TestDatabase } from './support/databases';
import { admission, completed, eventWithRun, newResult, T0 } from './support/run-rows';

jest.setTimeout(60_000);

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** "Now" for the job: a month after the old runs. */
const NOW = T0 + 30 * DAY;

function op(runId: string, sequence: number, createdAt: number, webhook: boolean): NewOutboxRow {
  return {
    delivery_id: `${runId}-d${sequence}`,
    run_id: runId,
    agent_id: 'agent-1',
    sequence,
    op: 'message.send',
    idempotency_key: `${runId}:${sequence}`,
    reply_target: null,
    target_delivery_id: null,
    result_sequence: sequence,
    payload: { text: `part ${sequence}` },
    created_at: createdAt,
    webhook_url: webhook ? 'https://hooks.example.com/x' : null,
    webhook_secret_env: webhook ? 'RUNNERHOST_SECRET_X' : null,
    webhook_state: webhook ? 'pending' : 'none',
  };
}

function retention(overrides: Partial<AppConfig['retention']>): AppConfig {
  return {
    retention: { deliveredOpsMs: 7 * DAY, runDataMs: 0, intervalMs: 60_000, batchSize: 2, ...overrides },
  } as AppConfig;
}

describe.each(DIALECTS)('retention job on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let hot: HotStore;
  let ds: DataSource;
  const runs: Record<string, string> = {};

  /** A run admitted at `at` with results 1..n; ended at `at + 1000` unless `running`. */
  async function run(name: string, at: number, results: number, running = false): Promise<string> {
    const { event, run: r } = eventWithRun(
      { received_at: at, conversation_id: `conv-${name}` },
      { created_at: at, started_at: at, conversation_id: `conv-${name}` },
    );
    await hot.write(() => admitUnit(admission(event, r)));
    for (let s = 1; s < results; s++) {
      await hot.write(() => resultUnit(newResult(r.run_id, s, { created_at: at + s }), null));
    }
    if (!running) {
      await hot.write(() =>
        finishUnit(
          newResult(r.run_id, results, { type: 'run.completed', created_at: at + 999 }),
          completed(at + 1000),
          null,
          null,
        ),
      );
    }
    runs[name] = r.run_id;
    return r.run_id;
  }

  const states = async (name: string) =>
    (await hot.read(outboxOfRunUnit(runs[name], 100))).map((o) => `${o.sequence}:${o.webhook_state}`);
  const count = async (table: string, name: string) =>
    Number((await ds.query(`SELECT COUNT(*) AS n FROM "${table}" WHERE "run_id" = '${runs[name]}'`))[0].n);

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, []);
    hot = moduleRef.get(HotStore);
    ds = moduleRef.get(DataSource);

    // Old and ended, webhook: 3 delivered, then one failed and the one after it failed with it.
    const hooked = await run('hooked', T0, 3);
    await hot.write(() => outboxUnit([1, 2, 3, 4, 5].map((s) => op(hooked, s, T0 + s, true))));
    for (const s of [1, 2, 3]) {
      await hot.write(() => webhookDeliveredUnit(`${hooked}-d${s}`, 1, T0 + 10 + s, null));
    }
    const [fourth] = (await hot.read(outboxOfRunUnit(hooked, 100))).filter((o) => o.sequence === 4);
    await hot.write(() => webhookFailedUnit(fourth, 15, 'timeout'));
    // Old and ended, no webhook: every op settled at once.
    const plain = await run('plain', T0 + 100, 2);
    await hot.write(() => outboxUnit([1, 2, 3, 4].map((s) => op(plain, s, T0 + 100 + s, false))));
    // Old, ended, its webhook op still pending: the outbox is the queue, it stays.
    const waiting = await run('waiting', T0 + 200, 1);
    await hot.write(() => outboxUnit([op(waiting, 1, T0 + 201, true)]));
    // Old but still running: nothing of it goes.
    const running = await run('running', T0 + 300, 2, true);
    await hot.write(() => outboxUnit([1, 2].map((s) => op(running, s, T0 + 300 + s, false))));
    // Recent: within the retention.
    const recent = await run('recent', NOW - HOUR, 2);
    await hot.write(() => outboxUnit([1, 2].map((s) => op(recent, s, NOW - HOUR + s, false))));
  });

  afterAll(async () => {
    await moduleRef?.close();
    await db?.dispose();
  });

  it('deletes settled ops of ended runs older than the retention, in batches, and nothing else', async () => {
    const job = new RetentionJob(hot, retention({}));
    const writes = jest.spyOn(hot, 'write');
    const counts = await job.runOnce(NOW);
    expect(counts).toEqual({ delivered_ops: 7, results: 0, event_log: 0 });
    // Batches of 2: 2 + 2 + 2 + 1 — never one DELETE of everything.
    expect(writes).toHaveBeenCalledTimes(4);
    writes.mockRestore();

    expect(await states('hooked')).toEqual(['4:failed', '5:failed']); // listed for the admin: kept
    expect(await states('plain')).toEqual([]);
    expect(await states('waiting')).toEqual(['1:pending']);
    expect(await states('running')).toEqual(['1:none', '2:none']);
    expect(await states('recent')).toEqual(['1:none', '2:none']);
    // Results and the event log are kept unless RETENTION_RUN_DATA_DAYS is set.
    expect(await count('run_results', 'hooked')).toBe(3);
    expect(await count('event_log', 'hooked')).toBe(1);

    expect(await job.runOnce(NOW)).toEqual({ delivered_ops: 0, results: 0, event_log: 0 }); // idempotent
  });

  it('with a run-data retention: results of ended runs and old event-log rows go too; runs stay', async () => {
    const job = new RetentionJob(hot, retention({ runDataMs: 7 * DAY, batchSize: 3 }));
    const counts = await job.runOnce(NOW);
    // Results: hooked 3 + plain 2 + waiting 1 (the running run's and the recent run's stay).
    // Event log: the four old admissions (running included: the log is history, not run state).
    expect(counts).toEqual({ delivered_ops: 0, results: 6, event_log: 4 });
    for (const name of ['hooked', 'plain', 'waiting']) {
      expect(await count('run_results', name)).toBe(0);
      expect(await count('runs', name)).toBe(1);
    }
    expect(await count('run_results', 'running')).toBe(1);
    expect(await count('run_results', 'recent')).toBe(2);
    expect(await count('event_log', 'recent')).toBe(1);
    expect(await count('event_log', 'running')).toBe(0);
  });

  it('keeps everything when both retentions are 0 (the job does not even start)', async () => {
    const job = new RetentionJob(hot, retention({ deliveredOpsMs: 0, runDataMs: 0 }));
    job.onApplicationBootstrap();
    expect(await job.runOnce(NOW + 365 * DAY)).toEqual({ delivered_ops: 0, results: 0, event_log: 0 });
    expect(await states('recent')).toEqual(['1:none', '2:none']);
    await job.onModuleDestroy();
  });

  it("keeps each table's newest row, even past the retention: its id is where new ids start (docs/durability.md, Row ids)", async () => {
    const newest = async (table: string) => Number((await ds.query(`SELECT MAX("id") AS m FROM "${table}"`))[0].m);
    const before = {
      ops: await newest('delivery_outbox'),
      results: await newest('run_results'),
      log: await newest('event_log'),
    };
    const job = new RetentionJob(hot, retention({ runDataMs: 7 * DAY }));
    // A year on, every row of an ended run is past both retentions; the newest of each table stays.
    expect(await job.runOnce(NOW + 365 * DAY)).toEqual({ delivered_ops: 1, results: 1, event_log: 0 });
    expect(await states('recent')).toEqual(['2:none']);
    expect(await count('run_results', 'recent')).toBe(1);
    expect(await count('event_log', 'recent')).toBe(1);
    expect(await newest('delivery_outbox')).toBe(before.ops);
    expect(await newest('run_results')).toBe(before.results);
    expect(await newest('event_log')).toBe(before.log);
    // The next rows get ids above every id given before.
    const next = await run('next', NOW + 365 * DAY, 1);
    await hot.write(() => outboxUnit([op(next, 1, NOW + 365 * DAY, false)]));
    expect(await newest('delivery_outbox')).toBe(before.ops + 1);
    expect(await newest('run_results')).toBe(before.results + 1);
    expect(await newest('event_log')).toBe(before.log + 1);
  });
});
