import type { TestingModule } from '@nestjs/testing';
import { Client, type QueryConfig } from 'pg';
import {
  CatalogVersionRepository,
  PluginsRepository,
  RunsRepository,
  SteeringRepository,
  Transactions,
  conversationKey,
  type AdmissionRows,
  type ConversationRef,
  type DecisionTable,
} from '@libs/persistence';
import { DIALECTS, storesModule, type TestDatabase } from './support/databases';
import { logOf, newEvent, newRun } from './support/run-rows';

jest.setTimeout(60_000);

/**
 * Admission's first two pool reads as one statement (CatalogVersionRepository.readWithSituation,
 * STEERING_SQL.situationWithVersion): the version `read()` gives and the situation
 * `SteeringRepository.situation` gives, whatever the conversation's state.
 */
const conv = (id: string): ConversationRef => ({
  key: conversationKey('agent-1', 'ws-1', id, null),
  agent_id: 'agent-1',
  runner_id: 'acme/echo/echo',
  workspace_id: 'ws-1',
  conversation_id: id,
  thread_id: null,
});

const queueAll: DecisionTable = { busy: 'queued', steer_into: null, max_queue: 100 };

function admitRows(c: ConversationRef, table: DecisionTable = queueAll): AdmissionRows {
  const run = newRun({ conversation_id: c.conversation_id, agent_id: c.agent_id, workspace_id: c.workspace_id });
  const event = newEvent({ conversation_id: c.conversation_id, agent_id: c.agent_id, run_id: run.run_id });
  return {
    event: { ...event, event_id: run.event_id },
    readmit: false,
    log: logOf({ ...event, event_id: run.event_id }, { workspace_id: c.workspace_id }),
    user: null,
    run,
    terminal: null,
    conversation: { ref: c, table, item: { text: 'hi' }, submission: { input: { text: 'hi' } } },
  };
}

describe.each(DIALECTS)('the catalogue version with a conversation situation on %s', (name, factory) => {
  let db: TestDatabase;
  let mod: TestingModule;
  let versions: CatalogVersionRepository;
  let steering: SteeringRepository;
  let runs: RunsRepository;
  let plugins: PluginsRepository;

  beforeAll(async () => {
    db = await factory();
    mod = await storesModule(db, [
      CatalogVersionRepository,
      SteeringRepository,
      RunsRepository,
      PluginsRepository,
      Transactions,
    ]);
    versions = mod.get(CatalogVersionRepository);
    steering = mod.get(SteeringRepository);
    runs = mod.get(RunsRepository);
    plugins = mod.get(PluginsRepository);
  });

  afterAll(async () => {
    await mod?.close();
    await db?.dispose();
  });

  const both = async (c: ConversationRef) => ({
    version: await versions.read(),
    situation: await steering.situation(c),
  });

  it('a free conversation: the version and nothing running, queued or waiting', async () => {
    const c = conv('free');
    expect(await versions.readWithSituation(c)).toEqual(await both(c));
    expect((await versions.readWithSituation(c)).situation).toEqual({
      running_run_id: null,
      queued_on_run: 0,
      waiting: 0,
    });
  });

  it('a running run with a steered item and a waiting event; another workspace of the same id stays free', async () => {
    const c = conv('busy');
    const started = await runs.admit(admitRows(c));
    expect(started.admitted && started.disposition).toBe('started');
    const runId = started.admitted ? started.run_id! : '';
    const steered = await runs.admit(admitRows(c, { busy: 'queued', steer_into: runId, max_queue: 100 }));
    expect(steered.admitted && steered.disposition).toBe('steered');
    const queued = await runs.admit(admitRows(c));
    expect(queued.admitted && queued.disposition).toBe('queued');

    const r = await versions.readWithSituation(c);
    expect(r).toEqual(await both(c));
    expect(r.situation).toEqual({ running_run_id: runId, queued_on_run: 1, waiting: 1 });

    const elsewhere = { ...c, workspace_id: 'ws-2', key: conversationKey('agent-1', 'ws-2', 'busy', null) };
    expect((await versions.readWithSituation(elsewhere)).situation).toEqual({
      running_run_id: null,
      queued_on_run: 0,
      waiting: 0,
    });
  });

  it('follows a catalogue write: the version it reads moves with read()', async () => {
    const before = await versions.readWithSituation(conv('v'));
    await plugins.create({
      plugin_id: 'acme/p1',
      author: 'acme',
      name: 'p1',
      token_hash: 'h'.padEnd(64, '0'),
      token_prefix: 'rh_',
      created_at: 1,
      token_issued_at: 1,
    });
    const after = await versions.readWithSituation(conv('v'));
    expect(after.version).toBeGreaterThan(before.version);
    expect(after.version).toBe(await versions.read());
  });

  if (name === 'postgres') {
    it('is one statement on the pool', async () => {
      const spy: jest.SpyInstance = jest.spyOn(Client.prototype, 'query');
      try {
        await versions.readWithSituation(conv('one'));
        const sent = spy.mock.calls.map(([q]: [string | QueryConfig]) => (typeof q === 'string' ? q : q.name));
        expect(sent).toEqual(['hot_situation_with_version']);
      } finally {
        spy.mockRestore();
      }
    });
  }
});
