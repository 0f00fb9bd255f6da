import { randomUUID } from 'node:crypto';
import type { TestingModule } from '@nestjs/testing';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { InteractionsRepository } from '@libs/interactions';
import {
  ENTITIES,
  FencedError,
  HostProcessesRepository,
  HotStore,
  InteractionEntity,
  RunsRepository,
  type AdmissionRows,
  type InteractionFence,
  type RunEnd,
  type RunLease,
} from '@libs/persistence';
import { DIALECTS, isPostgres, storesModule, type TestDatabase } from './support/databases';
import { interruptedEnd as interrupted, logOf, newEvent, newResult, newRun, T0 } from './support/run-rows';

jest.setTimeout(60_000);

/**
 * Interaction rows written for a run by its owner (docs/scale-out.md#fenced-writes) on both
 * dialects: a new request, an elicitation's close and its answer, and the superseding of older
 * requests land only under the run's lease, checked in the row's own transaction — a process that
 * lost the run (taken over, or declared dead) writes none of them; on PostgreSQL also against a
 * concurrent takeover (two connections). A platform's submission of a runner's request is not
 * the owner's write and stays unfenced.
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
  const run = newRun({ owner_process_id: owner, conversation_id: `c-${randomUUID()}` });
  const event = { ...newEvent({ run_id: run.run_id }), event_id: run.event_id };
  return { event, readmit: false, log: logOf(event), user: null, run, terminal: null, conversation: null };
}

function interaction(runId: string, overrides: Partial<InteractionEntity> = {}): InteractionEntity {
  const id = randomUUID();
  return {
    id,
    interaction_id: `i-${id.slice(0, 8)}`,
    run_id: runId,
    agent_id: 'agent-1',
    runner_id: 'acme/echo/echo',
    conversation_id: 'conv-i',
    thread_id: null,
    actor_id: 'u1',
    kind: 'approval',
    status: 'pending',
    status_reason: null,
    request: { interaction_id: `i-${id.slice(0, 8)}`, kind: 'approval', title: 'ok?' },
    delivery_target: { surface: 'api', reply_target: null },
    callback_token_hash: `h-${id}`,
    replaces_id: null,
    expires_at: Date.now() + 60_000,
    submission: null,
    submitted_at: null,
    submission_event_id: null,
    created_at: T0,
    updated_at: T0,
    ...overrides,
  };
}

describe.each(DIALECTS)('fenced interaction rows on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let hot: HotStore;
  let runs: RunsRepository;
  let repo: InteractionsRepository;
  let processes: HostProcessesRepository;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [RunsRepository, InteractionsRepository, HostProcessesRepository]);
    ds = moduleRef.get(DataSource);
    hot = moduleRef.get(HotStore);
    runs = moduleRef.get(RunsRepository);
    repo = moduleRef.get(InteractionsRepository);
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

  /** The owner is declared dead and the sweep takes its run over (interrupted, attempt bumped). */
  async function takenOver(runId: string, owner: string): Promise<void> {
    await processes.remove(owner);
    const [orphan] = await runs.orphans(100, false);
    const terminal = newResult(runId, 1, { type: 'run.failed', source: 'host', data: { code: 'host.interrupted' } });
    expect(await runs.takeOver({ orphan, terminal, end: interrupted, outbox: [], at: T0 + 100 })).toMatchObject({
      taken: true,
    });
  }

  const rowsOf = (runId: string) =>
    ds.getRepository(InteractionEntity).find({ where: { run_id: runId }, order: { created_at: 'ASC' } });
  const statusOf = async (id: string) => (await ds.getRepository(InteractionEntity).findOneByOrFail({ id })).status;

  it("the owner's request lands with every column as given; after a takeover it creates, closes and answers nothing", async () => {
    const { runId, lease } = await started();
    const run: InteractionFence = { lease, kind: 'run' };
    const live = interaction(runId);
    await repo.insert(live, run);
    const stored = await repo.get(live.id);
    expect(stored).toEqual(live);

    await takenOver(runId, 'p1');
    // Registered again under its old id (a paused process resumed): the attempt still fences it.
    await processes.register({ id: 'p1', instance: 'p1', http_address: 'h:1', grpc_address: 'h:2' });
    await expect(repo.insert(interaction(runId), run)).rejects.toBeInstanceOf(FencedError);
    await expect(repo.closeFenced(live.id, 'expired', 'late', T0 + 200, run)).rejects.toBeInstanceOf(FencedError);
    await expect(
      repo.claimFenced(live.id, { values: {} }, 'interaction:x', Date.now(), { lease, kind: 'call' }),
    ).rejects.toBeInstanceOf(FencedError);
    expect((await rowsOf(runId)).map((r) => [r.id, r.status])).toEqual([[live.id, 'pending']]);
    // A platform's submission is not the owner's write: it is taken whoever owns the run.
    expect(await repo.claim(live.id, { values: {} }, 'interaction:y', Date.now())).toBe(true);
    expect(await statusOf(live.id)).toBe('submitted');
  });

  it('a call fence (an elicitation) needs the run running; the run fence still closes it after the end, once', async () => {
    const { runId, lease } = await started();
    const call: InteractionFence = { lease, kind: 'call' };
    const asked = interaction(runId, { kind: 'form' });
    await repo.insert(asked, call);
    const answered = interaction(runId, { kind: 'form' });
    await repo.insert(answered, call);
    expect(await repo.claimFenced(answered.id, { values: { a: 1 } }, 'interaction:a', Date.now(), call)).toBe(true);
    expect(await repo.claimFenced(answered.id, { values: { a: 2 } }, 'interaction:a', Date.now(), call)).toBe(false);
    expect((await repo.get(answered.id))?.submission).toEqual({ values: { a: 1 } });

    await runs.end(newResult(runId, 1, { type: 'run.completed' }), completed, null, null, [], lease);
    await expect(repo.insert(interaction(runId), call)).rejects.toBeInstanceOf(FencedError);
    await expect(repo.claimFenced(asked.id, { values: {} }, 'interaction:b', Date.now(), call)).rejects.toBeInstanceOf(
      FencedError,
    );
    // The tool call that asked ended with the run: its owner closes the elicitation.
    const run: InteractionFence = { lease, kind: 'run' };
    expect(await repo.closeFenced(asked.id, 'expired', 'the run ended', T0 + 60, run)).toBe(true);
    expect(await repo.closeFenced(asked.id, 'expired', 'again', T0 + 61, run)).toBe(false);
    expect(await repo.get(asked.id)).toMatchObject({ status: 'expired', status_reason: 'the run ended' });
    expect(await rowsOf(runId)).toHaveLength(2);
  });

  it('superseding older requests is fenced by the new request’s run; an unleased run is not fenced', async () => {
    const older = await started('p2');
    const pending = interaction(older.runId);
    await repo.insert(pending, { lease: older.lease, kind: 'run' });
    const { runId, lease } = await started('p1');
    await processes.remove('p1'); // declared dead before it superseded anything
    await expect(
      repo.closeFenced(pending.id, 'superseded', 'superseded by x', T0 + 70, { lease, kind: 'run' }),
    ).rejects.toBeInstanceOf(FencedError);
    expect(await statusOf(pending.id)).toBe('pending');
    await expect(repo.insert(interaction(runId), { lease, kind: 'run' })).rejects.toBeInstanceOf(FencedError);

    const free = interaction('run-nobody-claimed');
    await repo.insert(free, null);
    expect(
      await repo.closeFenced(pending.id, 'superseded', `superseded by ${free.id}`, T0 + 80, {
        lease: null,
        kind: 'run',
      }),
    ).toBe(true);
    expect(await statusOf(pending.id)).toBe('superseded');
  });

  it('a request vs a concurrent takeover (PostgreSQL, two connections): the insert waits for the run row, then is refused', async () => {
    if (!isPostgres(ds)) {
      // SQLite: one process, one writer — the takeover and the insert are serialised by the writer.
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
      const late = repo.insert(interaction(runId), { lease, kind: 'run' });
      await waitForLockWait(sweeper);
      await sweeper.query('COMMIT');
      await expect(late).rejects.toBeInstanceOf(FencedError);
      expect(await rowsOf(runId)).toEqual([]);
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
