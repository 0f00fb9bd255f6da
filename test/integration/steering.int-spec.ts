import type { TestingModule } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import {
  ENTITIES,
  EventEntity,
  HotStore,
  RunEntity,
  RunsRepository,
  SteeringItemEntity,
  SteeringRepository,
  conversationKey,
  type AdmissionRows,
  type ConversationRef,
  type DecisionTable,
} from '@libs/persistence';
import { DIALECTS, postgresDatabase, storesModule, type TestDatabase } from './support/databases';
import { logOf, newEvent, newResult, newRun, T0 } from './support/run-rows';

jest.setTimeout(60_000);

const conv: ConversationRef = {
  key: conversationKey('agent-1', null, 'conv-s', null),
  agent_id: 'agent-1',
  runner_id: 'acme/echo/echo',
  workspace_id: null,
  conversation_id: 'conv-s',
  thread_id: null,
};

/** `conv` in a workspace: the same agent, conversation id and thread. */
function inWorkspace(workspace: string | null): ConversationRef {
  const { agent_id, conversation_id, thread_id } = conv;
  return { ...conv, workspace_id: workspace, key: conversationKey(agent_id, workspace, conversation_id, thread_id) };
}

/** A table that steers into `runId` when it runs (null: into nothing), and queues otherwise. */
const steerInto = (runId: string | null): DecisionTable => ({ busy: 'queued', steer_into: runId, max_queue: 100 });
const queueAll = steerInto(null);

/** The rows admission gives for one event of `c`, prepared to start. */
function admitRows(text: string, table: DecisionTable = queueAll, c: ConversationRef = conv): AdmissionRows {
  const run = newRun({ conversation_id: c.conversation_id, agent_id: c.agent_id, workspace_id: c.workspace_id });
  const event = newEvent({ conversation_id: c.conversation_id, agent_id: c.agent_id, run_id: run.run_id });
  return {
    event: { ...event, event_id: run.event_id },
    readmit: false,
    log: logOf({ ...event, event_id: run.event_id }, { workspace_id: c.workspace_id }),
    user: null,
    run,
    terminal: null,
    conversation: { ref: c, table, item: { text }, submission: { input: { text } } },
  };
}

const runOf = (o: Awaited<ReturnType<RunsRepository['admit']>>) => (o.admitted ? o.run_id! : '');

function end(runId: string, at = T0 + 10) {
  return [
    newResult(runId, 2, { type: 'run.completed' }),
    { status: 'completed', status_reason: 'stop', error_code: null, retryable: null, finished_at: at },
  ] as const;
}

describe.each(DIALECTS)('conversations and steering on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let hot: HotStore;
  let steering: SteeringRepository;
  let runsRepo: RunsRepository;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [SteeringRepository, RunsRepository]);
    ds = moduleRef.get(DataSource);
    hot = moduleRef.get(HotStore);
    steering = moduleRef.get(SteeringRepository);
    runsRepo = moduleRef.get(RunsRepository);
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

  it('refuses a second running run in one conversation (the database enforces it), not in another thread', async () => {
    const runs = ds.getRepository(RunEntity);
    await runs.insert(newRun({ conversation_id: 'c-x' }));
    await expect(runs.insert(newRun({ conversation_id: 'c-x' }))).rejects.toThrow();
    await runs.insert(newRun({ conversation_id: 'c-x', thread_id: 't-1' }));
    await runs.insert(newRun({ conversation_id: 'c-x', status: 'queued' }));
    await runs.insert(newRun({ conversation_id: 'c-x', status: 'completed' }));
    await runs.insert(newRun({ conversation_id: 'c-x', agent_id: 'agent-2' }));
    expect(await runs.countBy({ conversation_id: 'c-x', status: 'running' })).toBe(3);
  });

  it('keeps one running run per workspace: a missing workspace matches only a missing one', async () => {
    const runs = ds.getRepository(RunEntity);
    for (const workspace_id of ['tenant-1', 'tenant-2', null, '']) {
      await runs.insert(newRun({ conversation_id: 'c-w', workspace_id }));
    }
    await expect(runs.insert(newRun({ conversation_id: 'c-w', workspace_id: 'tenant-1' }))).rejects.toThrow();
    await expect(runs.insert(newRun({ conversation_id: 'c-w', workspace_id: null }))).rejects.toThrow();
    await expect(runs.insert(newRun({ conversation_id: 'c-w', workspace_id: '' }))).rejects.toThrow();
    expect(await runs.countBy({ conversation_id: 'c-w', status: 'running' })).toBe(4);
  });

  it('runs, steers and queues each workspace of one agent and conversation id apart', async () => {
    const [t1, t2, none] = [inWorkspace('tenant-1'), inWorkspace('tenant-2'), inWorkspace(null)];
    const a = await runsRepo.admit(admitRows('t1 first', queueAll, t1));
    const b = await runsRepo.admit(admitRows('t2 first', queueAll, t2));
    const c = await runsRepo.admit(admitRows('none first', queueAll, none));
    expect([a, b, c].map((o) => o.admitted && o.disposition)).toEqual(['started', 'started', 'started']);
    expect(new Set([a, b, c].map(runOf)).size).toBe(3);
    expect(await ds.getRepository(RunEntity).findOneBy({ run_id: runOf(b) })).toMatchObject({
      workspace_id: 'tenant-2',
      status: 'running',
    });

    const steered = await runsRepo.admit(admitRows('t1 follow-up', steerInto(runOf(a)), t1));
    expect(steered.admitted && [steered.disposition, steered.run_id]).toEqual(['steered', runOf(a)]);
    expect((await steering.situation(t2)).queued_on_run).toBe(0);
    expect((await steering.pull(runOf(b), 10, 'all')).map((i) => i.item.text)).toEqual([]);
    expect((await steering.pull(runOf(a), 10, 'all')).map((i) => i.item.text)).toEqual(['t1 follow-up']);

    // A waiting run of tenant-2 is tenant-2's: tenant-1's dispatcher key never finds it.
    const waiting = await runsRepo.admit(admitRows('t2 queued', queueAll, t2));
    expect(waiting.admitted && waiting.disposition).toBe('queued');
    expect(await steering.nextWaiting(t1.key)).toBeNull();
    expect(await steering.nextWaiting(none.key)).toBeNull();
    expect(await steering.nextWaiting(t2.key)).toMatchObject({ workspace_id: 'tenant-2', item: { text: 't2 queued' } });
    expect(await ds.getRepository(RunEntity).findOneBy({ run_id: runOf(waiting) })).toMatchObject({
      workspace_id: 'tenant-2',
      status: 'queued',
    });
    // The dispatcher's poll reads only conversations that could start: tenant-2's is busy (b runs)
    // until b ends; tenant-1's running run does not make tenant-2's busy, nor the other way.
    expect(await steering.waitingConversations()).toEqual([]);
    await ds.getRepository(RunEntity).update({ run_id: runOf(b) }, { status: 'completed' });
    expect(new Set(await steering.waitingConversations())).toEqual(new Set([t2.key]));
  });

  it('admits 20 concurrent follow-ups of one conversation: they steer into its run in order, positions unique', async () => {
    const first = await runsRepo.admit(admitRows('m0'));
    expect(first.admitted && first.disposition).toBe('started');
    const outcomes = await Promise.all(
      Array.from({ length: 19 }, (_, i) => runsRepo.admit(admitRows(`m${i + 1}`, steerInto(runOf(first))))),
    );
    const dispositions = outcomes.map((o) => (o.admitted ? o.disposition : 'duplicate'));
    expect(dispositions.filter((d) => d === 'steered')).toHaveLength(19);
    const positions = outcomes.flatMap((o) => (o.admitted && o.position ? [o.position] : []));
    expect(positions).toEqual(Array.from({ length: 19 }, (_, i) => i + 1));
  });

  it('a start it did not prepare writes nothing and answers existing: null', async () => {
    const rows = { ...admitRows('unprepared'), run: null };
    expect(await runsRepo.admit(rows)).toEqual({ admitted: false, existing: null });
    expect(await ds.getRepository(EventEntity).count()).toBe(0);
    expect(await runsRepo.admit(admitRows('prepared'))).toMatchObject({ admitted: true, disposition: 'started' });
    // Busy: no run needed to queue.
    expect(await runsRepo.admit({ ...admitRows('waits'), run: null })).toMatchObject({
      admitted: true,
      disposition: 'queued',
    });
  });

  it('hands each item out once, FIFO, and releases the rest at the run end as waiting runs, in arrival order', async () => {
    const first = await runsRepo.admit(admitRows('first'));
    const runId = runOf(first);
    for (const t of ['a', 'b', 'c', 'd']) {
      await runsRepo.admit(admitRows(t, steerInto(runId)));
    }
    const [p1, p2] = await Promise.all([steering.pull(runId, 1, 'one'), steering.pull(runId, 1, 'one')]);
    expect([...p1, ...p2].map((i) => i.item.text)).toEqual(['a', 'b']);
    const [terminal, e] = end(runId);
    // With the conversation's key the end also says a run now waits in it (the items it released).
    expect(await runsRepo.end(terminal, e, null, null, [], null, conv.key)).toEqual({
      ended: true,
      released: 2,
      waiting: true,
    });
    expect(await steering.pull(runId, 10, 'all')).toEqual([]);
    const items = await ds.getRepository(SteeringItemEntity).find({ order: { id: 'ASC' } });
    expect(items.map((i) => [i.item.text, i.state, i.dispatch])).toEqual([
      ['a', 'injected', null],
      ['b', 'injected', null],
      ['c', 'redispatched', 'waiting'],
      ['d', 'redispatched', 'waiting'],
    ]);
    const next = await steering.nextWaiting(conv.key);
    expect(next?.item.text).toBe('c');
    expect(await ds.getRepository(RunEntity).findOneBy({ run_id: next!.next_run_id! })).toMatchObject({
      status: 'queued',
      event_id: next!.event_id,
    });
    // A new event now waits behind them (no overtaking), whatever the policy says about steering.
    const later = await runsRepo.admit(admitRows('later', steerInto(runId)));
    expect(later.admitted && later.disposition).toBe('queued');
  });

  it('starts a waiting run only when the conversation is free and it is the next one', async () => {
    const first = await runsRepo.admit(admitRows('first'));
    const queued = await runsRepo.admit(admitRows('second'));
    expect(queued.admitted && queued.disposition).toBe('queued');
    const item = await steering.nextWaiting(conv.key);
    const start = {
      conversation: conv,
      item_id: item!.id,
      run_id: runOf(queued),
      run: newRun({
        run_id: runOf(queued),
        event_id: item!.event_id,
        context: { context: { ok: true } },
        started_at: T0 + 20,
      }),
    };
    expect(await steering.startWaiting(start)).toEqual({ started: false, why: 'busy' });
    const [terminal, e] = end(runOf(first));
    expect(await runsRepo.end(terminal, e)).toEqual({ ended: true, released: 0, waiting: false });
    expect(await steering.startWaiting({ ...start, item_id: item!.id + 1000 })).toEqual({
      started: false,
      why: 'moved',
    });
    const started = await steering.startWaiting(start);
    expect(started).toMatchObject({ started: true, event_seq: expect.any(Number) });
    expect(await steering.startWaiting(start)).toEqual({ started: false, why: 'busy' }); // it runs now
    // The event's position is set in the stored context by the unit, as at admission.
    expect(await ds.getRepository(RunEntity).findOneBy({ run_id: start.run_id })).toMatchObject({
      status: 'running',
      context: { context: { ok: true, event_seq: started.started ? started.event_seq : -1 } },
    });
  });

  it('boot: items queued on a run that ended without its release are released', async () => {
    const first = await runsRepo.admit(admitRows('first'));
    const runId = runOf(first);
    await runsRepo.admit(admitRows('orphan', steerInto(runId)));
    await ds.getRepository(RunEntity).update({ run_id: runId }, { status: 'interrupted', finished_at: T0 + 5 });
    expect(await steering.releaseOrphans()).toBe(1);
    expect(await steering.releaseOrphans()).toBe(0);
    expect((await steering.nextWaiting(conv.key))?.item.text).toBe('orphan');
  });
});

describe('two writers (two host processes) on postgres', () => {
  let db: TestDatabase;
  const modules: TestingModule[] = [];

  beforeAll(async () => {
    db = await postgresDatabase();
    modules.push(
      await storesModule(db, [SteeringRepository, RunsRepository]),
      await storesModule(db, [SteeringRepository, RunsRepository]),
    );
  });

  afterAll(async () => {
    for (const m of modules) {
      await m.close();
    }
    await db?.dispose();
  });

  it('decide under the conversation lock: one run starts, the others steer into it, positions unique', async () => {
    const repos = modules.map((m) => m.get(RunsRepository));
    const first = await repos[0].admit(admitRows('first'));
    expect(first.admitted && first.disposition).toBe('started');
    const runId = runOf(first);
    const outcomes = await Promise.all(
      Array.from({ length: 29 }, (_, i) => repos[i % 2].admit(admitRows(`w${i}`, steerInto(runId)))),
    );
    const admitted = outcomes.flatMap((o) => (o.admitted ? [o] : []));
    expect(
      admitted
        .filter((o) => o.disposition === 'steered')
        .map((o) => o.position)
        .sort((a, b) => a! - b!),
    ).toEqual(Array.from({ length: 29 }, (_, i) => i + 1));
  });

  it('a unit that would start a second running run fails whole (the unique index), writing nothing', async () => {
    const ds = modules[0].get(DataSource);
    const events = await ds.getRepository(EventEntity).count();
    // Another thread's lock and situation (free), but the run row is this conversation's: the unique index refuses it.
    const forced = admitRows('forced', queueAll, {
      ...conv,
      thread_id: 'elsewhere',
      key: conversationKey('agent-1', null, 'conv-s', 'elsewhere'),
    });
    await expect(modules[1].get(RunsRepository).admit(forced)).rejects.toThrow();
    expect(await ds.getRepository(EventEntity).count()).toBe(events);
    expect(
      await ds.getRepository(RunEntity).countBy({ conversation_id: conv.conversation_id, status: 'running' }),
    ).toBe(1);
  });
});
