import type { TestingModule } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import {
  ENTITIES,
  HotStore,
  RunEntity,
  RunsRepository,
  SteeringItemEntity,
  SteeringRepository,
  conversationKey,
  soloConversation,
  type AdmissionRows,
  type AdmitOutcome,
  type ConversationRef,
  type DecisionTable,
  type RunEnd,
} from '@libs/persistence';
import { DIALECTS, isPostgres, storesModule, type TestDatabase } from './support/databases';
import { logOf, newEvent, newResult, newRun, T0, transcriptRow } from './support/run-rows';

jest.setTimeout(60_000);

/**
 * What waits in a conversation, as the end of a run and the start of a waiting run read it:
 * - the end of a conversation's run answers whether a run waits in the conversation (`waiting`,
 *   read in the end's own unit): only then does the host send the `conversation` signal
 *   (docs/scale-out.md#signal-bus);
 * - a waiting or routed run starts only while its workspace is under `max_active_runs`, counted
 *   as at admission under the workspace's lock (docs/tenancy.md#quotas); on PostgreSQL two
 *   "processes" (two modules, each its own writer) start and admit at once and never exceed it.
 */

const WS = 'ws-q';
const RUNNER = 'acme/echo/echo';

function conv(id: string, workspace: string | null = null): ConversationRef {
  return {
    key: conversationKey('agent-1', workspace, id, null),
    agent_id: 'agent-1',
    runner_id: RUNNER,
    workspace_id: workspace,
    conversation_id: id,
    thread_id: null,
  };
}

const queueAll: DecisionTable = { busy: 'queued', steer_into: null, max_queue: 100 };

/** An event of conversation `c`, prepared to start (it queues when the conversation is busy). */
function convRows(c: ConversationRef, table: DecisionTable = queueAll, max: number | null = null): AdmissionRows {
  const run = newRun({ conversation_id: c.conversation_id, agent_id: c.agent_id, workspace_id: c.workspace_id });
  const event = { ...newEvent({ conversation_id: c.conversation_id, run_id: run.run_id }), event_id: run.event_id };
  return {
    event,
    readmit: false,
    log: logOf(event, { workspace_id: c.workspace_id }),
    user: null,
    run,
    terminal: null,
    conversation: { ref: c, table, item: { text: 'x' }, submission: { input: { text: 'x' } } },
    active_quota: max === null ? null : { workspace_id: c.workspace_id ?? 'default', max },
  };
}

/** An event routed to another process: it waits as a conversation of one of workspace WS. */
function routedRows(): AdmissionRows {
  const run = newRun({ conversation_id: null, runner_id: RUNNER, workspace_id: WS });
  const event = { ...newEvent({ conversation_id: null, run_id: run.run_id }), event_id: run.event_id };
  const ref = soloConversation(run.run_id, run.agent_id, RUNNER, WS);
  return {
    event,
    readmit: false,
    log: logOf(event, { workspace_id: WS }),
    user: null,
    run: null,
    terminal: null,
    conversation: {
      ref,
      table: { ...queueAll, free: 'queued' },
      item: { text: 'x' },
      submission: { input: { text: 'x' } },
      of_one: true,
    },
  };
}

/** An event of WS without a conversation, started at admission under `max`. */
function soloStart(max: number): AdmissionRows {
  const run = newRun({ conversation_id: null, workspace_id: WS, owner_process_id: 'p1' });
  const event = { ...newEvent({ conversation_id: null, run_id: run.run_id }), event_id: run.event_id };
  return {
    event,
    readmit: false,
    log: logOf(event),
    user: null,
    run,
    terminal: null,
    conversation: null,
    active_quota: { workspace_id: WS, max },
  };
}

const done = (at = T0 + 10): RunEnd => ({
  status: 'completed',
  status_reason: null,
  error_code: null,
  retryable: null,
  usage: null,
  finished_at: at,
});

const runIdOf = (o: AdmitOutcome) => (o.admitted ? o.run_id! : '');

describe.each(DIALECTS)('what waits in a conversation on %s', (_name, factory) => {
  let db: TestDatabase;
  let a: TestingModule;
  let b: TestingModule;
  let ds: DataSource;

  beforeAll(async () => {
    db = await factory();
    a = await storesModule(db, [RunsRepository, SteeringRepository]);
    ds = a.get(DataSource);
    // A second process on PostgreSQL (its own pool and writer); on SQLite the same one.
    b = isPostgres(ds) ? await storesModule(db, [RunsRepository, SteeringRepository]) : a;
  });

  afterAll(async () => {
    if (b !== a) {
      await b?.close();
    }
    await a?.close();
    await db?.dispose();
  });

  beforeEach(async () => {
    await a.get(HotStore).drain();
    for (const entity of ENTITIES) {
      await ds.getRepository(entity).clear();
    }
  });

  const endOf = (m: TestingModule, runId: string, key: string | null) =>
    m.get(RunsRepository).end(newResult(runId, 2, { type: 'run.completed' }), done(), null, null, [], null, key);

  // With an assistant row, the end's transcript append also answers the conversation's wait and
  // the run's queued count (STEERING_SQL.appendTranscriptAndQueue); without one, its own read.
  describe.each([
    ['without', false],
    ['with', true],
  ])('the end of a run (%s an assistant row): a conversation signal only when a run waits', (_w, withAssistant) => {
    const endIn = (m: TestingModule, runId: string, c: ConversationRef | null) =>
      m
        .get(RunsRepository)
        .end(
          newResult(runId, 2, { type: 'run.completed' }),
          done(),
          null,
          withAssistant && c
            ? transcriptRow('assistant', 'done', { conversation_id: c.conversation_id, run_id: runId })
            : null,
          [],
          null,
          c?.key ?? null,
        );

    it('nothing waits: `waiting` false (no signal); an event queued behind it: true', async () => {
      const runs = a.get(RunsRepository);
      const c = conv('c-alone');
      const first = runIdOf(await runs.admit(convRows(c)));
      expect(await endIn(a, first, c)).toEqual({ ended: true, released: 0, waiting: false });

      const second = runIdOf(await runs.admit(convRows(c)));
      // Queued at the other process while `second` runs.
      expect(await b.get(RunsRepository).admit(convRows(c))).toMatchObject({ disposition: 'queued' });
      expect(await endIn(a, second, c)).toEqual({ ended: true, released: 0, waiting: true });
    });

    it("a steering item left on the run is released as a waiting run: `waiting` true; another conversation's wait does not count", async () => {
      const runs = a.get(RunsRepository);
      const c = conv('c-steer');
      const running = runIdOf(await runs.admit(convRows(c)));
      expect(await runs.admit(convRows(c, { ...queueAll, steer_into: running }))).toMatchObject({
        disposition: 'steered',
      });
      expect(await endIn(a, running, c)).toEqual({ ended: true, released: 1, waiting: true });

      const other = conv('c-other');
      const x = runIdOf(await runs.admit(convRows(other)));
      await runs.admit(convRows(other)); // waits in c-other
      const y = runIdOf(await runs.admit(convRows(conv('c-free'))));
      expect(await endIn(a, y, conv('c-free'))).toMatchObject({ waiting: false });
      expect(await endIn(a, x, other)).toMatchObject({ waiting: true });
    });

    it('an end without a conversation key, or of a run that already ended, reads nothing', async () => {
      const runs = a.get(RunsRepository);
      const c = conv('c-nokey');
      const r = runIdOf(await runs.admit(convRows(c)));
      await runs.admit(convRows(c));
      expect(await endIn(a, r, null)).toEqual({ ended: true, released: 0, waiting: false });
      expect(await endIn(a, r, c)).toEqual({ ended: false, released: 0, waiting: false });
    });
  });

  describe('max_active_runs at the start of a waiting or routed run', () => {
    /** Starts the waiting run of `rows` at module `m` under `max` (as the dispatcher does). */
    async function startAt(m: TestingModule, rows: AdmissionRows, max: number | null) {
      const steering = m.get(SteeringRepository);
      const ref = rows.conversation!.ref;
      const item = await steering.nextWaiting(ref.key);
      if (!item) {
        return { started: false as const, why: 'none' };
      }
      const runId = item.next_run_id!;
      return steering.startWaiting({
        conversation: ref,
        item_id: item.id,
        run_id: runId,
        run: newRun({
          run_id: runId,
          event_id: item.event_id,
          conversation_id: null,
          workspace_id: WS,
          started_at: T0 + 5,
          owner_process_id: 'p1',
        }),
        active_quota: max === null ? null : { workspace_id: WS, max },
      });
    }

    const running = () => ds.getRepository(RunEntity).countBy({ workspace_id: WS, status: 'running' });

    it('two processes starting routed runs at once never exceed it; the others keep waiting, untouched, and start once a slot frees', async () => {
      const routed: AdmissionRows[] = [];
      for (let i = 0; i < 8; i++) {
        const rows = routedRows();
        expect(await a.get(RunsRepository).admit(rows)).toMatchObject({ disposition: 'queued' });
        routed.push(rows);
      }
      const outcomes = await Promise.all(routed.map((rows, i) => startAt(i % 2 ? b : a, rows, 3)));
      expect(outcomes.filter((o) => o.started)).toHaveLength(3);
      expect(outcomes.filter((o) => !o.started && o.why === 'quota')).toHaveLength(5);
      expect(await running()).toBe(3);
      // The refused starts wrote nothing: their runs still queued, their items still waiting.
      expect(await ds.getRepository(RunEntity).countBy({ workspace_id: WS, status: 'queued', attempt: 0 })).toBe(5);
      expect(await ds.getRepository(SteeringItemEntity).countBy({ dispatch: 'waiting' })).toBe(5);

      // One ends: exactly one of the waiting ones starts, wherever it is tried.
      const one = await ds.getRepository(RunEntity).findOneByOrFail({ workspace_id: WS, status: 'running' });
      await endOf(a, one.run_id, null);
      const again = await Promise.all(routed.map((rows, i) => startAt(i % 2 ? a : b, rows, 3)));
      expect(again.filter((o) => o.started)).toHaveLength(1);
      expect(await running()).toBe(3);
      // Without the quota (none set) the rest start.
      const free = await Promise.all(routed.map((rows) => startAt(a, rows, null)));
      expect(free.filter((o) => o.started)).toHaveLength(4);
      expect(await running()).toBe(7);
    });

    it('a run queued in its conversation waits for the limit too, and admission and waiting starts share it', async () => {
      const c = conv('c-ws', WS);
      const first = runIdOf(await a.get(RunsRepository).admit(convRows(c, queueAll, 2)));
      const queued = convRows(c, queueAll, 2);
      expect(await a.get(RunsRepository).admit(queued)).toMatchObject({ disposition: 'queued' });
      // Another run of the workspace takes the second slot.
      expect(await b.get(RunsRepository).admit(soloStart(2))).toMatchObject({ disposition: 'started' });
      await endOf(a, first, c.key);
      // The conversation is free, and a new admission took the slot its end freed: the workspace is full.
      expect(await a.get(RunsRepository).admit(soloStart(2))).toMatchObject({ disposition: 'started' });
      expect(await startAt(b, queued, 2)).toEqual({ started: false, why: 'quota' });
      expect(await running()).toBe(2);
      // The dispatcher's count before a retried start (no lock, a hint): full at 2, not at 3.
      const steering = b.get(SteeringRepository);
      expect(await steering.activeQuotaReached({ workspace_id: WS, max: 2 })).toBe(true);
      expect(await steering.activeQuotaReached({ workspace_id: WS, max: 3 })).toBe(false);
      expect(await ds.getRepository(RunEntity).findOneByOrFail({ run_id: queued.event.run_id! })).toMatchObject({
        status: 'queued',
      });
      // A run ends: the waiting start and three admissions race for its slot; exactly one wins it.
      const solo = await ds.getRepository(RunEntity).findOneByOrFail({ workspace_id: WS, status: 'running' });
      await endOf(b, solo.run_id, null);
      const [waited, ...admitted] = await Promise.all([
        startAt(a, queued, 2),
        a.get(RunsRepository).admit(soloStart(2)),
        b.get(RunsRepository).admit(soloStart(2)),
        b.get(RunsRepository).admit(soloStart(2)),
      ]);
      const wins = (waited.started ? 1 : 0) + admitted.filter((o) => o.admitted && o.disposition === 'started').length;
      expect(wins).toBe(1);
      expect(await running()).toBe(2);
    });
  });
});
