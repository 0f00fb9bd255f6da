import type { TestingModule } from '@nestjs/testing';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import {
  AuditEntity,
  ENTITIES,
  FencedError,
  HostProcessesRepository,
  HotStore,
  ModelUsageEntity,
  ModelsRepository,
  RunEntity,
  RunsRepository,
  StateEntryEntity,
  StorageEntryEntity,
  StoresRepository,
  type AdmissionRows,
  type RunEnd,
  type RunLease,
} from '@libs/persistence';
import { DIALECTS, isPostgres, storesModule, type TestDatabase } from './support/databases';
import { interruptedEnd as interrupted, logOf, newEvent, newResult, newRun, T0 } from './support/run-rows';

jest.setTimeout(60_000);

/**
 * Fenced host-API writes (docs/scale-out.md#fenced-host-api-writes) on both dialects: the state,
 * storage, model-usage and audit rows a host API call writes for a run land only while the run is
 * still running under the lease the call was granted for — the owner's own, or the one a process
 * that does not own the run read with its status (StoredRunGrants) — checked in the same
 * transaction as the write; and on PostgreSQL against a concurrent takeover (two connections).
 */

const completed: RunEnd = {
  status: 'completed',
  status_reason: null,
  error_code: null,
  retryable: null,
  usage: null,
  finished_at: T0 + 50,
};

function startRows(owner: string): AdmissionRows {
  const run = newRun({ owner_process_id: owner });
  const event = { ...newEvent({ run_id: run.run_id }), event_id: run.event_id };
  return { event, readmit: false, log: logOf(event), user: null, run, terminal: null, conversation: null };
}

const audit = (runId: string): Omit<AuditEntity, 'id'> => ({
  run_id: runId,
  runner_id: 'acme/echo/echo',
  plugin_id: 'acme/echo',
  action: 'state.set',
  resource: null,
  scope: 'conversation',
  outcome: 'allowed',
  error_code: null,
  duration_us: 1,
  created_at: T0,
});

describe.each(DIALECTS)('fenced host-API writes on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let hot: HotStore;
  let runs: RunsRepository;
  let stores: StoresRepository;
  let models: ModelsRepository;
  let processes: HostProcessesRepository;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [RunsRepository, StoresRepository, ModelsRepository, HostProcessesRepository]);
    ds = moduleRef.get(DataSource);
    hot = moduleRef.get(HotStore);
    runs = moduleRef.get(RunsRepository);
    stores = moduleRef.get(StoresRepository);
    models = moduleRef.get(ModelsRepository);
    processes = moduleRef.get(HostProcessesRepository);
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
    for (const id of ['p1', 'p2']) {
      await processes.register({ id, instance: id, http_address: 'h:1', grpc_address: 'h:2' });
    }
  });

  async function started(owner = 'p1'): Promise<{ runId: string; lease: RunLease }> {
    const o = await runs.admit(startRows(owner));
    if (!o.admitted || o.disposition !== 'started') {
      throw new Error(`expected a start, got ${JSON.stringify(o)}`);
    }
    return { runId: o.run_id!, lease: { run_id: o.run_id!, attempt: o.attempt!, owner_process_id: owner } };
  }

  const state = async (scope: string) =>
    (await ds.getRepository(StateEntryEntity).find({ where: { scope_key: scope } })).map((r) => [r.state_key, r.value]);
  const storage = async (owner: string) =>
    (await ds.getRepository(StorageEntryEntity).find({ where: { owner_key: owner } })).map((r) => r.key);
  const usage = (runId: string) => ds.getRepository(ModelUsageEntity).countBy({ run_id: runId });
  const audits = (runId: string) => ds.getRepository(AuditEntity).countBy({ run_id: runId });
  const usageRow = (runId: string) => ({
    run_id: runId,
    model_id: 'm1',
    operation: 'invoke',
    prompt_tokens: 1,
    completion_tokens: 1,
    total_tokens: 2,
    complete: true,
    created_at: T0,
  });

  /** Every kind of host-API write of one run under `lease`. */
  const writeAll = (runId: string, lease: RunLease, tag: string) => [
    stores.stateSet(`conv:${runId}`, `k-${tag}`, '1', lease),
    stores.stateDelete(`conv:${runId}`, 'k-kept', lease),
    stores.storageSet(`plugin:${runId}`, `s-${tag}`, Buffer.from('x'), lease),
    stores.storageDelete(`plugin:${runId}`, 's-kept', lease),
    models.recordUsage(usageRow(runId), lease),
    stores.appendAudit(audit(runId), lease),
  ];

  it("the owner's lease writes while the run runs; once the run ended, every write is refused and nothing lands", async () => {
    const { runId, lease } = await started();
    await stores.stateSet(`conv:${runId}`, 'k-kept', '0');
    await stores.storageSet(`plugin:${runId}`, 's-kept', Buffer.from('0'));
    await stores.stateSet(`conv:${runId}`, 'k-live', '1', lease);
    expect(await state(`conv:${runId}`)).toEqual(expect.arrayContaining([['k-live', '1']]));
    await runs.end(newResult(runId, 1, { type: 'run.completed' }), completed, null, null, [], lease);
    const late = await Promise.allSettled(writeAll(runId, lease, 'late'));
    for (const r of late) {
      expect(r).toMatchObject({ status: 'rejected', reason: expect.any(FencedError) });
    }
    expect((await state(`conv:${runId}`)).sort()).toEqual([
      ['k-kept', '0'],
      ['k-live', '1'],
    ]);
    expect(await storage(`plugin:${runId}`)).toEqual(['s-kept']);
    expect([await usage(runId), await audits(runId)]).toEqual([0, 0]);
  });

  it('a non-owner writes under the lease it read with the run (liveness); after a takeover it writes nothing', async () => {
    const { runId } = await started('p2');
    const read = (await runs.liveness(runId))!;
    expect(read).toMatchObject({ status: 'running', lease: { run_id: runId, attempt: 1, owner_process_id: 'p2' } });
    await Promise.all(writeAll(runId, read.lease!, 'live'));
    expect([await usage(runId), await audits(runId)]).toEqual([1, 1]);
    // The owner is declared dead and its run taken over (interrupted, attempt bumped).
    await processes.remove('p2');
    const [orphan] = await runs.orphans(100, false);
    const terminal = newResult(runId, 1, { type: 'run.failed', source: 'host', data: { code: 'host.interrupted' } });
    expect(await runs.takeOver({ orphan, terminal, end: interrupted, outbox: [], at: T0 + 100 })).toMatchObject({
      taken: true,
    });
    const late = await Promise.allSettled(writeAll(runId, read.lease!, 'late'));
    expect(late.map((r) => r.status)).toEqual(Array(6).fill('rejected'));
    expect(await state(`conv:${runId}`)).toEqual([['k-live', '1']]);
    expect([await usage(runId), await audits(runId)]).toEqual([1, 1]);
    expect((await runs.liveness(runId))?.lease).toBeNull();
  });

  it("a paused owner declared dead: its late state write (its ActiveRun's lease) is refused, nothing written", async () => {
    const { runId, lease } = await started('p1');
    await processes.remove('p1'); // its heartbeat stopped past the lease: the sweep declares it dead
    // Before the sweep took the run: the owner's row is gone, so its fence already matches nothing.
    await expect(stores.stateSet(`conv:${runId}`, 'late', '1', lease)).rejects.toBeInstanceOf(FencedError);
    const [orphan] = await runs.orphans(100, false);
    const terminal = newResult(runId, 1, { type: 'run.failed', source: 'host', data: { code: 'host.interrupted' } });
    await runs.takeOver({ orphan, terminal, end: interrupted, outbox: [], at: T0 + 100 });
    // Resumed and registered again under its old id (the fence names the attempt too): still refused.
    await processes.register({ id: 'p1', instance: 'p1', http_address: 'h:1', grpc_address: 'h:2' });
    await expect(stores.stateSet(`conv:${runId}`, 'late', '1', lease)).rejects.toBeInstanceOf(FencedError);
    expect(await state(`conv:${runId}`)).toEqual([]);
  });

  it('unleased writes (a run nobody claimed, admin) are not fenced', async () => {
    await stores.stateSet('conv:free', 'k', '1');
    await stores.appendAudit(audit('nobody'));
    expect(await state('conv:free')).toEqual([['k', '1']]);
  });

  it('a state write vs a concurrent takeover (PostgreSQL, two connections): the write waits for the row, then is refused', async () => {
    if (!isPostgres(ds)) {
      // SQLite: one process, one writer — the takeover and the write are serialised by the writer.
      return;
    }
    const url = (db.config as { url: string }).url;
    const sweeper = new Client({ connectionString: url });
    await sweeper.connect();
    try {
      const { runId, lease } = await started();
      await sweeper.query('BEGIN');
      await sweeper.query(
        `UPDATE "runs" SET "attempt" = "attempt" + 1, "owner_process_id" = NULL WHERE "run_id" = $1`,
        [runId],
      );
      const late = stores.stateSet(`conv:${runId}`, 'late', '1', lease);
      await waitForLockWait(sweeper);
      await sweeper.query('COMMIT');
      await expect(late).rejects.toBeInstanceOf(FencedError);
      expect(await state(`conv:${runId}`)).toEqual([]);
      expect(await ds.getRepository(RunEntity).findOneByOrFail({ run_id: runId })).toMatchObject({ attempt: 2 });
    } finally {
      await sweeper.end();
    }
  });
});

/** Until another backend waits on a lock held by `holder`. */
async function waitForLockWait(holder: Client): Promise<void> {
  const pid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  for (;;) {
    const r = await holder.query<{ n: string }>(
      `SELECT COUNT(*) AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
      [pid],
    );
    if (Number(r.rows[0].n) > 0) {
      return;
    }
    await new Promise((res) => setTimeout(res, 10));
  }
}
