import type { TestingModule } from '@nestjs/testing';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import {
  ENTITIES,
  FencedError,
  HostProcessesRepository,
  HotStore,
  isFenced,
  RunEntity,
  RunResultEntity,
  RunsRepository,
  SteeringItemEntity,
  SteeringRepository,
  conversationKey,
  type AdmissionRows,
  type ConversationRef,
  type DecisionTable,
  type NewResult,
  type RunLease,
} from '@libs/persistence';
import { DIALECTS, isPostgres, storesModule, type TestDatabase } from './support/databases';
import { interruptedEnd as interrupted, logOf, newEvent, newResult, newRun, T0 } from './support/run-rows';

jest.setTimeout(60_000);

/**
 * Run leases and fencing (docs/scale-out.md#leases-and-fencing) on both dialects: the claim in the
 * start units, the fence of every write of a run, the takeover of a dead owner's runs (never
 * started: waiting again; started: interrupted, steering re-queued in order), and the row-lock
 * ordering of a fence against a concurrent sweeper (PostgreSQL: two connections).
 */

const conv: ConversationRef = {
  key: conversationKey('agent-1', null, 'conv-l', null),
  agent_id: 'agent-1',
  runner_id: 'acme/echo/echo',
  workspace_id: null,
  conversation_id: 'conv-l',
  thread_id: null,
};

/** Another conversation of the same agent. */
const other = (id: string): ConversationRef => ({
  ...conv,
  conversation_id: id,
  key: conversationKey('agent-1', null, id, null),
});

const steerInto = (runId: string | null): DecisionTable => ({ busy: 'queued', steer_into: runId, max_queue: 100 });

/** The rows admission gives for one event of `c`, prepared to start, claimed by `owner`. */
function admitRows(
  text: string,
  owner: string | null,
  table: DecisionTable = steerInto(null),
  c: ConversationRef = conv,
): AdmissionRows {
  const run = newRun({ conversation_id: c.conversation_id, owner_process_id: owner });
  const event = newEvent({ conversation_id: c.conversation_id, run_id: run.run_id, payload: { text } });
  return {
    event: { ...event, event_id: run.event_id },
    readmit: false,
    log: logOf({ ...event, event_id: run.event_id }),
    user: null,
    run,
    terminal: null,
    conversation: {
      ref: c,
      table,
      item: { text },
      submission: { agent_id: 'agent-1', event: { event_type: 'message.created', source: 'test' }, input: { text } },
    },
  };
}

function terminalOf(runId: string): NewResult {
  return newResult(runId, 0, { type: 'run.failed', source: 'host', data: { code: 'host.interrupted' } });
}

describe.each(DIALECTS)('run leases on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let hot: HotStore;
  let runs: RunsRepository;
  let steering: SteeringRepository;
  let processes: HostProcessesRepository;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [RunsRepository, SteeringRepository, HostProcessesRepository]);
    ds = moduleRef.get(DataSource);
    hot = moduleRef.get(HotStore);
    runs = moduleRef.get(RunsRepository);
    steering = moduleRef.get(SteeringRepository);
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

  const row = (runId: string) => ds.getRepository(RunEntity).findOneByOrFail({ run_id: runId });
  const results = async (runId: string) =>
    (await ds.getRepository(RunResultEntity).find({ where: { run_id: runId }, order: { sequence: 'ASC' } })).map(
      (r) => [r.sequence, r.type, r.source],
    );

  /** A run started at admission by p1 (attempt 1). */
  async function started(
    text = 'first',
    owner: string | null = 'p1',
    c: ConversationRef = conv,
  ): Promise<{ runId: string; lease: RunLease }> {
    const o = await runs.admit(admitRows(text, owner, steerInto(null), c));
    if (!o.admitted || o.disposition !== 'started') {
      throw new Error(`expected a start, got ${JSON.stringify(o)}`);
    }
    return { runId: o.run_id!, lease: { run_id: o.run_id!, attempt: o.attempt!, owner_process_id: owner ?? '' } };
  }

  it("the claim: a run started at admission is attempt 1 of its process; a failed one is nobody's", async () => {
    const { runId } = await started();
    expect(await row(runId)).toMatchObject({ status: 'running', owner_process_id: 'p1', attempt: 1 });
    const failed = admitRows('no runner', 'p1');
    const o = await runs.admit({
      ...failed,
      conversation: null,
      run: { ...failed.run!, conversation_id: 'conv-other', status: 'failed' },
      terminal: newResult(failed.run!.run_id, 1, { type: 'run.failed' }),
    });
    expect(o.admitted && o.disposition).toBe('failed');
    expect(await row(failed.run!.run_id)).toMatchObject({ owner_process_id: null, attempt: 0 });
  });

  it('the claim: a waiting run starts as the next attempt of the process that starts it', async () => {
    const { runId, lease } = await started();
    const queued = await runs.admit(admitRows('second', 'p1'));
    expect(queued.admitted && queued.disposition).toBe('queued');
    const waitingId = queued.admitted ? queued.run_id! : '';
    expect(await row(waitingId)).toMatchObject({ status: 'queued', owner_process_id: null, attempt: 0 });
    await runs.end(
      newResult(runId, 1, { type: 'run.completed' }),
      { ...interrupted, status: 'completed' },
      null,
      null,
      [],
      lease,
    );
    const item = (await steering.nextWaiting(conv.key))!;
    const out = await steering.startWaiting({
      conversation: conv,
      item_id: item.id,
      run_id: waitingId,
      run: newRun({ run_id: waitingId, event_id: item.event_id, owner_process_id: 'p2', started_at: T0 + 5 }),
    });
    expect(out).toEqual({ started: true, event_seq: expect.any(Number), attempt: 1 });
    expect(await row(waitingId)).toMatchObject({ status: 'running', owner_process_id: 'p2', attempt: 1 });
  });

  it("fenced writes: the owner's attempt writes; another attempt, another process, or a dead owner writes nothing", async () => {
    const { runId, lease } = await started();
    await runs.insertResult(newResult(runId, 1), null, [], lease);
    expect((await row(runId)).last_write_at).toEqual(expect.any(Number));
    await expect(runs.insertResult(newResult(runId, 2), null, [], { ...lease, attempt: 2 })).rejects.toBeInstanceOf(
      FencedError,
    );
    await expect(
      runs.insertResult(newResult(runId, 2), null, [], { ...lease, owner_process_id: 'p2' }),
    ).rejects.toThrow(/write fenced/);
    await processes.remove('p1');
    await expect(runs.insertResult(newResult(runId, 2), null, [], lease)).rejects.toBeInstanceOf(FencedError);
    await expect(
      runs.end(newResult(runId, 2, { type: 'run.completed' }), interrupted, null, null, [], lease),
    ).rejects.toBeInstanceOf(FencedError);
    await expect(steering.pull(runId, 10, 'all', lease)).rejects.toBeInstanceOf(FencedError);
    expect(await results(runId)).toEqual([[1, 'message.delta', 'runner']]);
    expect(await row(runId)).toMatchObject({ status: 'running', attempt: 1 });
  });

  it("one group commit: a fenced run's units fail, the others' in the same group commit", async () => {
    const a = await started('a');
    const b = await started('b', 'p2', other('conv-b'));
    // Unwired writes (no lease) are not fenced.
    const c = await runs.admit({ ...admitRows('c', null, steerInto(null), other('conv-c')), conversation: null });
    const cId = c.admitted ? c.run_id! : '';
    await processes.remove('p2');
    const writes = [
      ...[1, 2, 3].map((s) => runs.insertResult(newResult(a.runId, s), null, [], a.lease)),
      ...[1, 2].map((s) => runs.insertResult(newResult(b.runId, s), null, [], b.lease)),
      runs.insertResult(newResult(cId, 1)),
    ];
    const settled = await Promise.allSettled(writes);
    expect(settled.map((s) => s.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'rejected',
      'rejected',
      'fulfilled',
    ]);
    expect(await results(a.runId)).toHaveLength(3);
    expect(await results(b.runId)).toEqual([]);
    expect(await results(cId)).toHaveLength(1);
  });

  it("one group, its runs' fences as one statement: the matching runs commit, a run taken over (before, or while the group waits for its row) is fenced", async () => {
    const a = await started('a');
    const b = await started('b', 'p1', other('conv-b'));
    const c = await started('c', 'p1', other('conv-c'));
    const group = (s: number) =>
      Promise.allSettled([
        runs.insertResult(newResult(a.runId, s), null, [], a.lease),
        runs.insertResult(newResult(b.runId, s), null, [], b.lease),
        runs.insertResult(newResult(c.runId, s), null, [], c.lease),
        runs.insertResult(newResult(a.runId, s + 1), null, [], a.lease),
      ]);
    const statuses = (settled: PromiseSettledResult<void>[]) =>
      settled.map((r) => (r.status === 'fulfilled' ? 'ok' : isFenced(r.reason) ? 'fenced' : String(r.reason)));
    expect(statuses(await group(1))).toEqual(['ok', 'ok', 'ok', 'ok']);
    const bump = `UPDATE "runs" SET "attempt" = "attempt" + 1, "owner_process_id" = NULL WHERE "run_id" = ${isPostgres(ds) ? '$1' : '?'}`;
    if (isPostgres(ds)) {
      // The sweeper holds b's row (its bump, uncommitted): the group's fence waits for it, then
      // matches a and c only; b's own fence fails its unit, the others commit.
      const url = (db.config as { url: string }).url;
      const sweeper = new Client({ connectionString: url });
      await sweeper.connect();
      try {
        await sweeper.query('BEGIN');
        await sweeper.query(bump, [b.runId]);
        const late = group(3);
        await waitForLockWait(sweeper);
        await sweeper.query('COMMIT');
        expect(statuses(await late)).toEqual(['ok', 'fenced', 'ok', 'ok']);
      } finally {
        await sweeper.end();
      }
    } else {
      await ds.query(bump, [b.runId]);
      expect(statuses(await group(3))).toEqual(['ok', 'fenced', 'ok', 'ok']);
    }
    expect((await results(a.runId)).map((r) => r[0])).toEqual([1, 2, 3, 4]);
    expect((await results(b.runId)).map((r) => r[0])).toEqual([1]);
    expect((await results(c.runId)).map((r) => r[0])).toEqual([1, 3]);
    expect(await row(b.runId)).toMatchObject({ attempt: b.lease.attempt + 1, owner_process_id: null });
  });

  it('the sweep finds only runs whose owner is dead (and unowned ones only when asked)', async () => {
    const live = await started('live', 'p1');
    const dead = await runs.admit({ ...admitRows('dead', 'p2', steerInto(null), other('conv-d')), conversation: null });
    const unowned = await runs.admit({
      ...admitRows('unowned', null, steerInto(null), other('conv-u')),
      conversation: null,
    });
    await processes.remove('p2');
    const ids = (xs: { run_id: string }[]) => xs.map((x) => x.run_id).sort();
    const deadId = dead.admitted ? dead.run_id! : '';
    const unownedId = unowned.admitted ? unowned.run_id! : '';
    expect(await runs.orphans(100, false)).toEqual([{ run_id: deadId, owner_process_id: 'p2', attempt: 1 }]);
    expect(ids(await runs.orphans(100, true))).toEqual([deadId, unownedId].sort());
    expect(ids(await runs.orphans(100, true))).not.toContain(live.runId);
  });

  it('takeover of a started run: interrupted after its last result, attempt bumped, steering re-queued in order', async () => {
    const { runId, lease } = await started();
    for (const s of [1, 2, 3]) {
      await runs.insertResult(newResult(runId, s), null, [], lease);
    }
    for (const text of ['follow-up 1', 'follow-up 2', 'follow-up 3']) {
      const o = await runs.admit(admitRows(text, 'p1', steerInto(runId)));
      expect(o.admitted && o.disposition).toBe('steered');
    }
    expect((await steering.pull(runId, 1, 'one', lease)).map((i) => i.item.text)).toEqual(['follow-up 1']);
    await processes.remove('p1');
    const [orphan] = await runs.orphans(100, false);
    const taken = await runs.takeOver({
      orphan,
      terminal: terminalOf(runId),
      end: interrupted,
      outbox: [],
      at: T0 + 100,
    });
    expect(taken).toEqual({
      taken: true,
      kind: 'interrupted',
      attempt: 2,
      sequence: 4,
      released: 2,
      conversation_key: conv.key,
    });
    expect(await row(runId)).toMatchObject({
      status: 'interrupted',
      error_code: 'host.interrupted',
      owner_process_id: null,
      attempt: 2,
    });
    expect(await results(runId)).toEqual([
      [1, 'message.delta', 'runner'],
      [2, 'message.delta', 'runner'],
      [3, 'message.delta', 'runner'],
      [4, 'run.failed', 'host'],
    ]);
    // The two items not pulled wait as runs of their own, in their order.
    const items = await ds
      .getRepository(SteeringItemEntity)
      .find({ where: { run_id: runId }, order: { position: 'ASC' } });
    expect(items.map((i) => [i.position, i.state])).toEqual([
      [1, 'injected'],
      [2, 'redispatched'],
      [3, 'redispatched'],
    ]);
    expect((await steering.nextWaiting(conv.key))?.id).toBe(items[1].id);
    // A second sweeper finds nothing to take; the dead owner's late write is fenced.
    expect(await runs.orphans(100, true)).toEqual([]);
    expect(
      await runs.takeOver({ orphan, terminal: terminalOf(runId), end: interrupted, outbox: [], at: T0 + 200 }),
    ).toEqual({
      taken: false,
    });
    await processes.register({ id: 'p1', instance: 'p1', http_address: 'h:1', grpc_address: 'h:2' });
    await expect(runs.insertResult(newResult(runId, 5), null, [], lease)).rejects.toBeInstanceOf(FencedError);
    expect(await results(runId)).toHaveLength(4);
  });

  it('takeover of a never-started run: it waits again (same run), is dispatched like any waiting run, as the next attempt', async () => {
    const { runId } = await started('never answered');
    await processes.remove('p1');
    const [orphan] = await runs.orphans(100, false);
    const taken = await runs.takeOver({
      orphan,
      terminal: terminalOf(runId),
      end: interrupted,
      outbox: [],
      at: T0 + 100,
      requeue_unstarted: true,
    });
    expect(taken).toEqual({ taken: true, kind: 'requeued', attempt: 2, conversation_key: conv.key });
    expect(await row(runId)).toMatchObject({ status: 'queued', owner_process_id: null, attempt: 2, started_at: null });
    expect(await results(runId)).toEqual([]);
    const item = (await steering.nextWaiting(conv.key))!;
    expect(item).toMatchObject({ next_run_id: runId, event_id: (await row(runId)).event_id });
    expect(item.submission).toEqual({ text: 'never answered' });
    const out = await steering.startWaiting({
      conversation: conv,
      item_id: item.id,
      run_id: runId,
      run: newRun({ run_id: runId, owner_process_id: 'p2', started_at: T0 + 200 }),
    });
    expect(out).toMatchObject({ started: true, attempt: 3 });
    expect(await row(runId)).toMatchObject({ status: 'running', owner_process_id: 'p2', attempt: 3 });
  });

  it('takeover of a run with no result, by default: interrupted at sequence 1, never re-run (its runner may have begun it)', async () => {
    const { runId } = await started('dispatched, no answer');
    await processes.remove('p1');
    const [orphan] = await runs.orphans(100, false);
    expect(
      await runs.takeOver({ orphan, terminal: terminalOf(runId), end: interrupted, outbox: [], at: T0 + 100 }),
    ).toEqual({
      taken: true,
      kind: 'interrupted',
      attempt: 2,
      sequence: 1,
      released: 0,
      conversation_key: conv.key,
    });
    expect(await row(runId)).toMatchObject({ status: 'interrupted', owner_process_id: null, attempt: 2 });
    expect(await steering.nextWaiting(conv.key)).toBeNull();
  });

  it('takeover of a never-started waiting run: its own item is due again (its place in the conversation kept)', async () => {
    const first = await started('first');
    const queued = await runs.admit(admitRows('second', 'p1'));
    const third = await runs.admit(admitRows('third', 'p1'));
    const waitingId = queued.admitted ? queued.run_id! : '';
    await runs.end(
      newResult(first.runId, 1, { type: 'run.completed' }),
      { ...interrupted, status: 'completed' },
      null,
      null,
      [],
      first.lease,
    );
    const item = (await steering.nextWaiting(conv.key))!;
    await steering.startWaiting({
      conversation: conv,
      item_id: item.id,
      run_id: waitingId,
      run: newRun({ run_id: waitingId, event_id: item.event_id, owner_process_id: 'p1', started_at: T0 + 5 }),
    });
    await processes.remove('p1');
    const [orphan] = await runs.orphans(100, false);
    expect(orphan.run_id).toBe(waitingId);
    expect(
      await runs.takeOver({
        orphan,
        terminal: terminalOf(waitingId),
        end: interrupted,
        outbox: [],
        at: T0 + 100,
        requeue_unstarted: true,
      }),
    ).toMatchObject({
      kind: 'requeued',
    });
    const next = (await steering.nextWaiting(conv.key))!;
    expect([next.id, next.next_run_id]).toEqual([item.id, waitingId]);
    expect(third.admitted && third.disposition).toBe('queued');
  });

  it('fence vs a concurrent sweeper: whichever takes the run row first wins, the other sees its commit', async () => {
    if (!isPostgres(ds)) {
      // SQLite: one process, one writer — a fence and a takeover are serialised by the writer
      // itself (the takeover test above: the late write after it is fenced).
      const { runId, lease } = await started();
      await processes.remove('p1');
      const [orphan] = await runs.orphans(100, false);
      const [write, take] = await Promise.allSettled([
        runs.insertResult(newResult(runId, 1), null, [], lease),
        runs.takeOver({ orphan, terminal: terminalOf(runId), end: interrupted, outbox: [], at: T0 + 100 }),
      ]);
      expect(write.status).toBe('rejected');
      expect(take).toMatchObject({ status: 'fulfilled', value: { taken: true, kind: 'interrupted', sequence: 1 } });
      return;
    }
    const url = (db.config as { url: string }).url;
    const sweeper = new Client({ connectionString: url });
    const writer = new Client({ connectionString: url });
    await Promise.all([sweeper.connect(), writer.connect()]);
    try {
      // 1. The sweeper holds the row (its bump, uncommitted): the owner's fence waits, then matches nothing.
      const a = await started('a');
      await runs.insertResult(newResult(a.runId, 1), null, [], a.lease);
      await sweeper.query('BEGIN');
      await sweeper.query(
        `UPDATE "runs" SET "attempt" = "attempt" + 1, "owner_process_id" = NULL WHERE "run_id" = $1`,
        [a.runId],
      );
      const late = runs.insertResult(newResult(a.runId, 2), null, [], a.lease);
      await waitForLockWait(sweeper);
      await sweeper.query('COMMIT');
      await expect(late).rejects.toBeInstanceOf(FencedError);
      expect(await results(a.runId)).toEqual([[1, 'message.delta', 'runner']]);

      // 2. The owner holds the row (its fence and a result, uncommitted) when it is declared dead:
      // the sweeper skips the locked row, and once the owner committed takes it after that result.
      const b = await started('b', 'p2', other('conv-b'));
      await runs.insertResult(newResult(b.runId, 1), null, [], b.lease);
      await writer.query('BEGIN');
      const fenced = await writer.query(
        `UPDATE "runs" SET "last_write_at" = 1 WHERE "run_id" = $1 AND "attempt" = $2 AND "owner_process_id" = $3`,
        [b.runId, b.lease.attempt, 'p2'],
      );
      expect(fenced.rowCount).toBe(1);
      await writer.query(
        `INSERT INTO "run_results" ("run_id", "sequence", "type", "data", "source", "created_at") VALUES ($1, 2, 'message.delta', '{}', 'runner', 1)`,
        [b.runId],
      );
      await processes.remove('p2');
      const [orphan] = await runs.orphans(100, false);
      const take = () =>
        runs.takeOver({ orphan, terminal: terminalOf(b.runId), end: interrupted, outbox: [], at: T0 + 100 });
      expect(await take()).toEqual({ taken: false });
      await writer.query('COMMIT');
      expect(await take()).toMatchObject({ taken: true, kind: 'interrupted', sequence: 3, attempt: 2 });
      expect((await results(b.runId)).map((r) => r[0])).toEqual([1, 2, 3]);
    } finally {
      await Promise.allSettled([sweeper.end(), writer.end()]);
    }
  });
});

/** Until another backend waits on a lock held by `holder` (the fence queued behind the sweeper's row lock). */
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
