import type { TestingModule } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import {
  ENTITIES,
  EventEntity,
  HotStore,
  RunEntity,
  SteeringItemEntity,
  SteeringRepository,
  conversationKey,
  queuedRunRow,
  type ConversationAdmitRows,
  type ConversationRef,
  type Disposition,
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

/** The rows admission gives for one event of `c`, with a policy that steers when it can. */
function admitRows(
  text: string,
  decide: ConversationAdmitRows['decide'] = steerWhenBusy,
  c: ConversationRef = conv,
): ConversationAdmitRows {
  const run = newRun({ conversation_id: c.conversation_id, agent_id: c.agent_id, workspace_id: c.workspace_id });
  const event = newEvent({ conversation_id: c.conversation_id, agent_id: c.agent_id, run_id: run.run_id });
  return {
    conversation: c,
    event: { ...event, event_id: run.event_id },
    readmit: false,
    decide,
    log: logOf({ ...event, event_id: run.event_id }, { workspace_id: c.workspace_id }),
    user: null,
    start: { run, contextAt: () => run.context },
    unavailable: { run: { ...run, status: 'failed' }, terminal: newResult(run.run_id, 1, { type: 'run.failed' }) },
    queuedRun: queuedRunRow(run.run_id, run.event_id, c, T0),
    item: (runId, position) => ({ text, claimed_run_id: runId, position }),
    submission: { input: { text } },
  };
}

function steerWhenBusy(s: { running_run_id: string | null; waiting: number }): Disposition {
  return s.running_run_id === null && s.waiting === 0
    ? 'started'
    : s.running_run_id && !s.waiting
      ? 'steered'
      : 'queued';
}

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

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [SteeringRepository]);
    ds = moduleRef.get(DataSource);
    hot = moduleRef.get(HotStore);
    steering = moduleRef.get(SteeringRepository);
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
    const a = await steering.admit(admitRows('t1 first', steerWhenBusy, t1));
    const b = await steering.admit(admitRows('t2 first', steerWhenBusy, t2));
    const c = await steering.admit(admitRows('none first', steerWhenBusy, none));
    expect([a, b, c].map((o) => o.admitted && o.disposition)).toEqual(['started', 'started', 'started']);
    const runOf = (o: typeof a) => (o.admitted ? o.run_id! : '');
    expect(new Set([a, b, c].map(runOf)).size).toBe(3);
    expect(await ds.getRepository(RunEntity).findOneBy({ run_id: runOf(b) })).toMatchObject({
      workspace_id: 'tenant-2',
      status: 'running',
    });

    const steered = await steering.admit(admitRows('t1 follow-up', steerWhenBusy, t1));
    expect(steered.admitted && [steered.disposition, steered.run_id]).toEqual(['steered', runOf(a)]);
    expect((await steering.situation(t2)).queued_on_run).toBe(0);
    expect((await steering.pull(runOf(b), 10, 'all')).map((i) => i.item.text)).toEqual([]);
    expect((await steering.pull(runOf(a), 10, 'all')).map((i) => i.item.text)).toEqual(['t1 follow-up']);

    // A waiting run of tenant-2 is tenant-2's: tenant-1's dispatcher key never finds it.
    const waiting = await steering.admit(admitRows('t2 queued', () => 'queued', t2));
    expect(waiting.admitted && waiting.disposition).toBe('queued');
    expect(await steering.nextWaiting(t1.key)).toBeNull();
    expect(await steering.nextWaiting(none.key)).toBeNull();
    expect(await steering.nextWaiting(t2.key)).toMatchObject({ workspace_id: 'tenant-2', item: { text: 't2 queued' } });
    expect(await ds.getRepository(RunEntity).findOneBy({ run_id: runOf(waiting) })).toMatchObject({
      workspace_id: 'tenant-2',
      status: 'queued',
    });
    expect(new Set(await steering.waitingConversations())).toEqual(new Set([t2.key]));
  });

  it('admits 20 concurrent events of one conversation: one run starts, the others steer into it in order', async () => {
    const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => steering.admit(admitRows(`m${i}`))));
    const dispositions = outcomes.map((o) => (o.admitted ? o.disposition : 'duplicate'));
    expect(dispositions.filter((d) => d === 'started')).toHaveLength(1);
    expect(dispositions.filter((d) => d === 'steered')).toHaveLength(19);
    const positions = outcomes.flatMap((o) => (o.admitted && o.position ? [o.position] : []));
    expect(positions).toEqual(Array.from({ length: 19 }, (_, i) => i + 1));
  });

  it('hands each item out once, FIFO, and releases the rest at the run end as waiting runs, in arrival order', async () => {
    const first = await steering.admit(admitRows('first'));
    const runId = first.admitted ? first.run_id! : '';
    for (const t of ['a', 'b', 'c', 'd']) {
      await steering.admit(admitRows(t));
    }
    const [p1, p2] = await Promise.all([steering.pull(runId, 1, 'one'), steering.pull(runId, 1, 'one')]);
    expect([...p1, ...p2].map((i) => i.item.text)).toEqual(['a', 'b']);
    const [terminal, e] = end(runId);
    expect(await steering.endRun(terminal, e)).toEqual({ ended: true, released: 2 });
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
    const later = await steering.admit(admitRows('later'));
    expect(later.admitted && later.disposition).toBe('queued');
  });

  it('starts a waiting run only when the conversation is free and it is the next one', async () => {
    const first = await steering.admit(admitRows('first'));
    const queued = await steering.admit(admitRows('second', () => 'queued'));
    const item = await steering.nextWaiting(conv.key);
    const start = {
      conversation: conv,
      item_id: item!.id,
      run_id: queued.admitted ? queued.run_id! : '',
      context: { ok: true },
      authorization: {},
      authorization_hash: 'h',
      started_at: T0 + 20,
      deadline_at: null,
    };
    expect(await steering.startQueued(start)).toBe('busy');
    const [terminal, e] = end(first.admitted ? first.run_id! : '');
    expect(await steering.endRun(terminal, e)).toEqual({ ended: true, released: 0 });
    expect(await steering.startQueued({ ...start, item_id: item!.id + 1000 })).toBe('moved');
    expect(await steering.startQueued(start)).toBe('started');
    expect(await steering.startQueued(start)).toBe('busy'); // it runs now: the conversation is busy
    expect(await ds.getRepository(RunEntity).findOneBy({ run_id: start.run_id })).toMatchObject({
      status: 'running',
      context: { ok: true },
    });
  });

  it('boot: items queued on a run that ended without its release are released', async () => {
    const first = await steering.admit(admitRows('first'));
    await steering.admit(admitRows('orphan'));
    const runId = first.admitted ? first.run_id! : '';
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
    modules.push(await storesModule(db, [SteeringRepository]), await storesModule(db, [SteeringRepository]));
  });

  afterAll(async () => {
    for (const m of modules) {
      await m.close();
    }
    await db?.dispose();
  });

  it('decide under the conversation lock: one run starts, the others steer into it, positions unique', async () => {
    const repos = modules.map((m) => m.get(SteeringRepository));
    const outcomes = await Promise.all(Array.from({ length: 30 }, (_, i) => repos[i % 2].admit(admitRows(`w${i}`))));
    const admitted = outcomes.flatMap((o) => (o.admitted ? [o] : []));
    expect(admitted.filter((o) => o.disposition === 'started')).toHaveLength(1);
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
    await expect(modules[1].get(SteeringRepository).admit(admitRows('forced', () => 'started'))).rejects.toThrow();
    expect(await ds.getRepository(EventEntity).count()).toBe(events);
    expect(
      await ds.getRepository(RunEntity).countBy({ conversation_id: conv.conversation_id, status: 'running' }),
    ).toBe(1);
  });
});
