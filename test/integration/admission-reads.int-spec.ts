import type { TestingModule } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import {
  AdmissionReadsRepository,
  CatalogVersionRepository,
  ContextRepository,
  ENTITIES,
  HotStore,
  RunsRepository,
  SteeringRepository,
  StoresRepository,
  conversationKey,
  type AdmissionRows,
  type ConversationRef,
  type ConversationScope,
  type DecisionTable,
} from '@libs/persistence';
import { DIALECTS, isPostgres, storesModule, type TestDatabase } from './support/databases';
import { logOf, newEvent, newRun, T0 } from './support/run-rows';

jest.setTimeout(60_000);

function ref(conversationId: string, workspace: string | null = 'ws-1', thread: string | null = null): ConversationRef {
  return {
    key: conversationKey('agent-1', workspace, conversationId, thread),
    agent_id: 'agent-1',
    runner_id: 'acme/echo/echo',
    workspace_id: workspace,
    conversation_id: conversationId,
    thread_id: thread,
  };
}

const threadOf = (c: ConversationRef): ConversationScope => ({
  agent_id: c.agent_id,
  workspace_id: c.workspace_id,
  conversation_id: c.conversation_id,
  thread_id: c.thread_id,
});

const queueAll: DecisionTable = { busy: 'queued', steer_into: null, max_queue: 100 };

function admitRows(c: ConversationRef, table: DecisionTable = queueAll): AdmissionRows {
  const where = { conversation_id: c.conversation_id, thread_id: c.thread_id, agent_id: c.agent_id };
  const run = newRun({ ...where, workspace_id: c.workspace_id });
  const event = newEvent({ ...where, run_id: run.run_id });
  return {
    event: { ...event, event_id: run.event_id },
    readmit: false,
    log: logOf({ ...event, event_id: run.event_id }, { workspace_id: c.workspace_id }),
    user: null,
    run,
    terminal: null,
    conversation: { ref: c, table, item: { text: 'x' }, submission: { input: { text: 'x' } } },
  };
}

/**
 * Admission's reads of a conversation as one read (AdmissionReadsRepository: one statement on
 * PostgreSQL, docs/benchmarks.md round 14 wt-pgc1r14): the same answers as the three reads apart
 * (SteeringRepository.situation, StoresRepository.stateEntries per key, ContextRepository.lastTranscriptSeq).
 */
describe.each(DIALECTS)('admission reads on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let hot: HotStore;
  let reads: AdmissionReadsRepository;
  let steering: SteeringRepository;
  let runs: RunsRepository;
  let stores: StoresRepository;
  let context: ContextRepository;
  let catalogVersions: CatalogVersionRepository;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [
      AdmissionReadsRepository,
      SteeringRepository,
      RunsRepository,
      StoresRepository,
      ContextRepository,
      CatalogVersionRepository,
    ]);
    ds = moduleRef.get(DataSource);
    hot = moduleRef.get(HotStore);
    reads = moduleRef.get(AdmissionReadsRepository);
    steering = moduleRef.get(SteeringRepository);
    runs = moduleRef.get(RunsRepository);
    stores = moduleRef.get(StoresRepository);
    context = moduleRef.get(ContextRepository);
    catalogVersions = moduleRef.get(CatalogVersionRepository);
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

  /** The three reads apart, as admission made them before. */
  async function apart(c: ConversationRef, keys: string[], limit: number) {
    const state = new Map<string, { state_key: string; value: string }[]>();
    for (const k of keys) {
      state.set(
        k,
        (await stores.stateEntries(k, limit)).map((r) => ({ state_key: r.state_key, value: r.value })),
      );
    }
    return {
      situation: await steering.situation(c),
      latest_seq: await context.lastTranscriptSeq(threadOf(c)),
      state,
      // PostgreSQL's one statement also reads the catalogue version row (CatalogVersions.seed).
      ...(isPostgres(ds) ? { catalog_version: await catalogVersions.read() } : {}),
    };
  }

  it('a conversation with nothing: free, no seq, every key empty (no key: no state)', async () => {
    const c = ref('c-empty');
    const got = await reads.read(c, threadOf(c), ['k-a', 'k-b'], 100);
    expect(got).toEqual({
      situation: { running_run_id: null, queued_on_run: 0, waiting: 0 },
      latest_seq: null,
      state: new Map([
        ['k-a', []],
        ['k-b', []],
      ]),
      ...(isPostgres(ds) ? { catalog_version: await catalogVersions.read() } : {}),
    });
    expect(got).toEqual(await apart(c, ['k-a', 'k-b'], 100));
    expect((await reads.read(c, threadOf(c), [], 100)).state).toEqual(new Map());
  });

  it('a busy conversation with its thread and state: the same as the three reads, each key its own limit, by state key', async () => {
    const c = ref('c-1');
    const started = await runs.admit(admitRows(c));
    expect(started.admitted && started.disposition).toBe('started');
    const runId = started.admitted ? started.run_id! : '';
    // One item steered into the running run, two waiting as runs of their own.
    await runs.admit(admitRows(c, { ...queueAll, steer_into: runId }));
    await runs.admit(admitRows(c));
    await runs.admit(admitRows(c));
    // Another workspace's and another thread's rows are not this conversation's.
    await runs.admit(admitRows(ref('c-1', 'ws-2')));
    await runs.admit(admitRows(ref('c-1', 'ws-1', 't-1')));
    for (const [conversation, thread, workspace, n] of [
      ['c-1', null, 'ws-1', 3],
      ['c-1', 't-1', 'ws-1', 5],
      ['c-1', null, 'ws-2', 7],
    ] as const) {
      for (let i = 0; i < n; i++) {
        await context.appendTranscript({
          conversation_id: conversation,
          thread_id: thread,
          workspace_id: workspace,
          role: 'user',
          item_type: 'message',
          content: `m${i}`,
          content_json: { role: 'user', content: `m${i}` },
          attachment_refs: [],
          event_id: `evt-${conversation}-${thread}-${workspace}-${i}`,
          run_id: null,
          agent_id: 'agent-1',
          metadata: {},
          created_at: T0,
        });
      }
    }
    // Key a: five entries (limit 3: the first three by state key), key b: one, key c: none; another key's too.
    for (const k of ['e', 'a', 'd', 'c', 'b']) {
      await stores.stateSet('k-a', k, JSON.stringify({ v: k }));
    }
    await stores.stateSet('k-b', 'only', '1');
    await stores.stateSet('k-other', 'x', '2');

    const got = await reads.read(c, threadOf(c), ['k-b', 'k-a', 'k-c'], 3);
    expect(got.situation).toEqual({ running_run_id: runId, queued_on_run: 1, waiting: 2 });
    expect(got.latest_seq).toBe(3);
    expect([...got.state.entries()]).toEqual([
      ['k-b', [{ state_key: 'only', value: '1' }]],
      [
        'k-a',
        [
          { state_key: 'a', value: '{"v":"a"}' },
          { state_key: 'b', value: '{"v":"b"}' },
          { state_key: 'c', value: '{"v":"c"}' },
        ],
      ],
      ['k-c', []],
    ]);
    expect(got).toEqual(await apart(c, ['k-b', 'k-a', 'k-c'], 3));
    // The thread and the other workspace, each its own.
    for (const other of [ref('c-1', 'ws-1', 't-1'), ref('c-1', 'ws-2')]) {
      expect(await reads.read(other, threadOf(other), ['k-a'], 3)).toEqual(await apart(other, ['k-a'], 3));
    }
    // The thread's own latest seq (seqs run over the conversation: its rows came after the three of no thread).
    const thread = ref('c-1', 'ws-1', 't-1');
    expect((await reads.read(thread, threadOf(thread), [], 3)).latest_seq).toBe(8);
  });

  it('a workspace left out matches only a conversation without one', async () => {
    const none = ref('c-2', null);
    await runs.admit(admitRows(none));
    await runs.admit(admitRows(ref('c-2', '')));
    const got = await reads.read(none, threadOf(none), [], 100);
    expect(got.situation.running_run_id).not.toBeNull();
    expect(got).toEqual(await apart(none, [], 100));
    expect(await reads.read(ref('c-2', 'ws-1'), threadOf(ref('c-2', 'ws-1')), [], 100)).toMatchObject({
      situation: { running_run_id: null },
    });
  });
});
