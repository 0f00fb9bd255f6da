import type {
  AdmissionRows,
  AdmitOutcome,
  AgentEntity,
  ConversationSituation,
  EventEntity,
  RunsRepository,
  SteeringRepository,
} from '@libs/persistence';
import type { RunnerDispatch, RunnerPresence } from '@libs/runner-gateway';
import type { AdmissionCatalog } from './admission-catalog';
import { AdmissionService } from './admission.service';
import { conversationOf } from './concurrency/admission-rows';
import { InProcessSignals, type Signal } from './concurrency/signal-port';
import { quotaExceeded, type WorkspaceQuotaGate } from './workspace-quotas';
import type { EventSubmission } from './event-submission';
import type { RunLifecycleService } from './run-lifecycle.service';
import type { PreparedRun, RunStarter } from './run-start';

const agent = {
  agent_id: 'agent-1',
  runner_id: 'plugin:acme/echo/default',
  concurrency_policy: {},
} as unknown as AgentEntity;

const message = (conversation?: string): EventSubmission => ({
  agent_id: 'agent-1',
  event: { event_type: 'message.received', source: 'api' },
  ...(conversation ? { conversation: { conversation_id: conversation } } : {}),
  input: { text: 'hello' },
});

const busy: ConversationSituation = { running_run_id: 'run-busy', queued_on_run: 0, waiting: 0 };
const free: ConversationSituation = { running_run_id: null, queued_on_run: 0, waiting: 0 };

/**
 * The admission service against fakes of the one admission unit (RunsRepository.admit), the
 * starter and the runner lookup: what it prepares, what it submits, what it sets going.
 */
function setup(opts: {
  situation?: ConversationSituation;
  outcomes: ((a: AdmissionRows) => AdmitOutcome)[];
  previous?: EventEntity;
  quotaFull?: boolean;
  /** The workspace's max_active_runs (the unit counts it). */
  maxActive?: number;
  /** The runner is not connected here but held by another live process. */
  runnerElsewhere?: boolean;
  /** The conversation has a run active (or starting) in this process (RunStarter.busyHere). */
  busyHere?: boolean;
  /** The situation read's answer, when the spec holds it back (default: answered at once). */
  situationRead?: Promise<ConversationSituation>;
  /** The prepare fails with this. */
  prepareFails?: Error;
  /** The agent is not in the catalogue's cache (AdmissionCatalog.cached). */
  notCached?: boolean;
  /** Reads are synchronous calls in process (SQLite): not read ahead (RunStarter.readsAhead). */
  inProcess?: boolean;
}) {
  const log: string[] = [];
  /** The situation read and the prepare, in the order they were started. */
  const reads: string[] = [];
  const submitted: AdmissionRows[] = [];
  /** The run reads each prepare was handed (RunStarter.prepare's `ahead`). */
  const aheadGiven: unknown[] = [];
  const runs = {
    getEvent: () => Promise.resolve(opts.previous ?? null),
    getEventByIdempotencyKey: () => Promise.resolve(null),
    admit: (a: AdmissionRows) => {
      submitted.push(a);
      return Promise.resolve(opts.outcomes.shift()!(a));
    },
  } as unknown as RunsRepository;
  const steering = {
    situation: () => {
      reads.push('situation');
      return opts.situationRead ?? Promise.resolve(opts.situation ?? free);
    },
  } as unknown as SteeringRepository;
  const live = { session: { plugin_id: 'acme' }, runner: { manifest: { capabilities: { steering: true } } } };
  const runners = { target: () => (opts.runnerElsewhere ? undefined : live) } as unknown as RunnerDispatch;
  const presence = {
    heldElsewhere: () => {
      log.push('presence');
      return Promise.resolve(opts.runnerElsewhere === true);
    },
    steersElsewhere: () => {
      log.push('stored manifest');
      return Promise.resolve(true);
    },
  } as unknown as RunnerPresence;
  const starter = {
    prepare: (runId: string, ...rest: unknown[]) => {
      aheadGiven.push(rest[6] ?? null);
      log.push('prepare');
      reads.push('prepare');
      if (opts.prepareFails) {
        return Promise.reject(opts.prepareFails);
      }
      return Promise.resolve({
        run: { run_id: runId, runner_id: agent.runner_id, created_at: 1, context: {} },
        access: { snapshot: { available_apis: { steering_pull: true } } },
        context: { context: {} },
      } as unknown as PreparedRun);
    },
    readsAhead: opts.inProcess !== true,
    readAhead: (sub: EventSubmission) => {
      reads.push(`one read ahead ${sub.conversation?.workspace_id}`);
      return {
        situation: opts.situationRead ?? Promise.resolve(opts.situation ?? free),
        run: {
          agent,
          scope: '{}',
          state: { scopes: [], scope_keys: {} },
          reads: Promise.resolve({ state: {}, latest_seq: null }),
        },
        catalogVersion: Promise.resolve(5),
      };
    },
    whileStarting: <T>(_p: PreparedRun, _key: string, done: () => Promise<T>) => done(),
    steerableRun: () => 'run-busy',
    busyHere: () => opts.busyHere === true,
    dispatch: (p: PreparedRun, _a: unknown, _l: unknown, eventSeq: number) =>
      log.push(`dispatch ${p.run.run_id} event_seq=${eventSeq}`),
  } as unknown as RunStarter;
  const lifecycle = { openWaiting: (id: string) => log.push(`open ${id}`) } as unknown as RunLifecycleService;
  const signals = new InProcessSignals();
  for (const kind of ['steering', 'conversation', 'cancel'] as const) {
    signals.subscribe(kind, (s: Signal) => log.push(`signal ${s.kind}`));
  }
  const catalogReads: string[] = [];
  /** The catalogue version reads ahead handed to the catalogue (AdmissionCatalog.versionRead). */
  const versionsSeeded: Promise<number>[] = [];
  const catalog = {
    agent: (id: string) => {
      catalogReads.push(id);
      return Promise.resolve(agent);
    },
    cached: () => (opts.notCached ? undefined : agent),
    versionRead: (_at: number, version: Promise<number>) => {
      versionsSeeded.push(version);
    },
  } as unknown as AdmissionCatalog;
  const quotas = {
    admit: (workspace: string) => {
      log.push(`quota ${workspace}`);
      if (opts.quotaFull) {
        throw quotaExceeded(workspace, 'runs_per_second', 1, 1000);
      }
    },
    activeQuota: (workspace: string) => (opts.maxActive ? { workspace_id: workspace, max: opts.maxActive } : null),
    admitFollowUp: (workspace: string) => {
      log.push(`follow-up quota ${workspace}`);
      return Promise.resolve();
    },
  } as unknown as WorkspaceQuotaGate;
  const service = new AdmissionService(
    catalog,
    runs,
    steering,
    runners,
    starter,
    lifecycle,
    signals,
    quotas,
    presence,
    {
      draining: false,
    },
  );
  return { service, log, reads, submitted, catalogReads, aheadGiven, versionsSeeded };
}

const admitted =
  (over: Partial<Extract<AdmitOutcome, { admitted: true }>>) =>
  (a: AdmissionRows): AdmitOutcome => ({
    admitted: true,
    disposition: 'started',
    run_id: a.event.run_id,
    event_seq: 42,
    transcript_seq: null,
    position: null,
    running_run_id: null,
    attempt: null,
    ...over,
  });

describe('AdmissionService', () => {
  it('reads the agent from the catalogue unless the request already did (one catalogue-version read)', async () => {
    const first = setup({ outcomes: [admitted({ disposition: 'queued' })], runnerElsewhere: true });
    await first.service.submit(message(), null);
    expect(first.catalogReads).toEqual([agent.agent_id]);

    const second = setup({ outcomes: [admitted({ disposition: 'queued' })], runnerElsewhere: true });
    await second.service.submit(message(), null, performance.now(), agent);
    expect(second.catalogReads).toEqual([]);
  });

  it('an event whose runner is held by another process waits there as a conversation of one: not prepared here, queued, the holder woken', async () => {
    const { service, log, submitted } = setup({
      outcomes: [admitted({ disposition: 'queued' })],
      runnerElsewhere: true,
    });
    const a = await service.submit(message(), null);
    expect(a).toMatchObject({ disposition: 'queued', replayed: false });
    const c = submitted[0].conversation!;
    expect(submitted[0].run).toBeNull();
    expect(submitted[0].terminal).toBeNull();
    expect(c.of_one).toBe(true);
    expect(c.ref).toMatchObject({ key: JSON.stringify(['run', a.run_id]), conversation_id: '', agent_id: 'agent-1' });
    expect(c.table.free).toBe('queued');
    expect(log).toEqual(['quota default', 'presence', `open ${a.run_id}`, 'signal conversation']);
  });

  it('an event of a conversation whose runner is held elsewhere keeps its conversation and waits for the holder', async () => {
    const { service, log, submitted } = setup({
      outcomes: [admitted({ disposition: 'queued' })],
      runnerElsewhere: true,
    });
    const a = await service.submit(message('c-1'), null);
    expect(a.disposition).toBe('queued');
    const c = submitted[0].conversation!;
    expect(c.of_one).toBe(false);
    expect(c.ref.conversation_id).toBe('c-1');
    expect(c.table.free).toBe('queued');
    expect(log).not.toContain('prepare');
    // The default concurrency mode follows the runner's steering capability, read from its stored manifest.
    expect(log).toContain('stored manifest');
  });

  it('an event without a conversation is a conversation of one: prepared, admitted, dispatched with its event_seq', async () => {
    const { service, log, submitted } = setup({ outcomes: [admitted({})] });
    const a = await service.submit(message(), null);
    expect(a).toMatchObject({ disposition: 'started', replayed: false });
    expect(submitted[0].conversation).toBeNull();
    expect(submitted[0].run).not.toBeNull();
    expect(log).toEqual(['quota default', 'prepare', `dispatch ${a.run_id} event_seq=42`]);
  });

  it('a duplicate answers its original admission without spending a quota token, even when the quota is spent', async () => {
    const previous = {
      event_id: 'e-1',
      body_hash: 'x',
      disposition: 'started',
      run_id: 'run-first',
    } as EventEntity;
    const { service, log, submitted } = setup({ outcomes: [], previous, quotaFull: true });
    // The body hash must match the original's for a replay: take it from a first submission's rows.
    const first = setup({ outcomes: [admitted({})] });
    await first.service.submit({ ...message(), event: { ...message().event, event_id: 'e-1' } }, null);
    previous.body_hash = first.submitted[0].event.body_hash;
    expect(await service.submit({ ...message(), event: { ...message().event, event_id: 'e-1' } }, null)).toEqual({
      event_id: 'e-1',
      disposition: 'started',
      run_id: 'run-first',
      replayed: true,
    });
    expect(log).toEqual([]);
    expect(submitted).toEqual([]);
  });

  it('max_active_runs goes to the unit, which counts it over the database: a unit that found it reached answers 429, nothing set going', async () => {
    const { service, log, submitted } = setup({
      outcomes: [() => ({ admitted: false, existing: null, active: 2 })],
      maxActive: 2,
    });
    await expect(service.submit(message(), null)).rejects.toMatchObject({
      code: 'rate_limited',
      details: { quota: 'max_active_runs', limit: 2, workspace_id: 'default' },
    });
    expect(submitted.map((a) => a.active_quota)).toEqual([{ workspace_id: 'default', max: 2 }]);
    expect(log).toEqual(['quota default', 'prepare']);
  });

  it('a spent quota refuses a new event with 429 before anything is prepared or written', async () => {
    const { service, log, submitted } = setup({ outcomes: [admitted({})], quotaFull: true });
    await expect(service.submit(message('c1'), null)).rejects.toMatchObject({
      code: 'rate_limited',
      details: { quota: 'runs_per_second', workspace_id: 'default' },
    });
    expect(log).toEqual(['quota default']);
    expect(submitted).toEqual([]);
  });

  it('decides first: a busy conversation is not prepared for, and a steered event only wakes its run', async () => {
    const { service, log, submitted } = setup({
      situation: busy,
      busyHere: true,
      outcomes: [admitted({ disposition: 'steered', run_id: 'run-busy', position: 3, running_run_id: 'run-busy' })],
    });
    expect(await service.submit(message('c1'), null)).toMatchObject({
      disposition: 'steered',
      run_id: 'run-busy',
      position: 3,
    });
    expect(submitted[0].run).toBeNull();
    // The decision table is data: the steerable run named, the policy's fallback.
    expect(submitted[0].conversation?.table).toEqual({ busy: 'queued', steer_into: 'run-busy', max_queue: 100 });
    expect(log).toEqual(['quota default', 'follow-up quota default', 'signal steering']);
  });

  it('a queued event opens its run channel and kicks the conversation', async () => {
    const { service, log } = setup({
      situation: busy,
      busyHere: true,
      outcomes: [admitted({ disposition: 'queued' })],
    });
    const a = await service.submit(message('c1'), null);
    expect(a.disposition).toBe('queued');
    expect(log).toEqual(['quota default', 'follow-up quota default', `open ${a.run_id}`, 'signal conversation']);
  });

  it('a start the unit found unprepared (the conversation freed meanwhile) is prepared and submitted again', async () => {
    const { service, log, submitted } = setup({
      situation: busy,
      busyHere: true,
      outcomes: [() => ({ admitted: false, existing: null }), admitted({})],
    });
    const a = await service.submit(message('c1'), null);
    expect(a.disposition).toBe('started');
    expect(submitted.map((s) => s.run !== null)).toEqual([false, true]);
    expect(log).toEqual(['quota default', 'follow-up quota default', 'prepare', `dispatch ${a.run_id} event_seq=42`]);
  });

  it('a conversation with no run here is prepared while its situation is read, and started once it looks free', async () => {
    let answer!: (s: ConversationSituation) => void;
    const situationRead = new Promise<ConversationSituation>((resolve) => (answer = resolve));
    const { service, log, reads, submitted } = setup({ situationRead, outcomes: [admitted({})] });
    const pending = service.submit(message('c1'), null);
    await new Promise((resolve) => setImmediate(resolve));
    // Both started before the situation answered: one round trip in series, not two.
    expect(reads).toEqual(['prepare', 'situation']);
    expect(submitted).toEqual([]);
    answer(free);
    const a = await pending;
    expect(a.disposition).toBe('started');
    expect(submitted[0].run?.run_id).toBe(a.run_id);
    expect(log).toEqual(['quota default', 'follow-up quota default', 'prepare', `dispatch ${a.run_id} event_seq=42`]);
  });

  it('a conversation busy elsewhere: the run prepared beside the read is dropped, its failure too; the unit gets no run', async () => {
    const { service, reads, submitted } = setup({
      situation: busy,
      prepareFails: new Error('a read failed'),
      outcomes: [admitted({ disposition: 'queued' })],
    });
    expect((await service.submit(message('c1'), null)).disposition).toBe('queued');
    expect(reads).toEqual(['prepare', 'situation']);
    expect(submitted[0].run).toBeNull();
  });

  it('a conversation that looks free: a failing prepare fails the admission, nothing submitted', async () => {
    const { service, submitted } = setup({ prepareFails: new Error('a read failed'), outcomes: [] });
    await expect(service.submit(message('c1'), null)).rejects.toThrow('a read failed');
    expect(submitted).toEqual([]);
  });

  it('a conversation with a run here is read first and prepared only if it looks free', async () => {
    let answer!: (s: ConversationSituation) => void;
    const situationRead = new Promise<ConversationSituation>((resolve) => (answer = resolve));
    const { service, reads } = setup({ busyHere: true, situationRead, outcomes: [admitted({})] });
    const pending = service.submit(message('c1'), null);
    await new Promise((resolve) => setImmediate(resolve));
    expect(reads).toEqual(['situation']);
    answer(free);
    expect((await pending).disposition).toBe('started');
    expect(reads).toEqual(['situation', 'prepare']);
  });

  it('a concurrent duplicate gets the original answer, nothing set going', async () => {
    const { service, log } = setup({
      outcomes: [
        (a) => ({
          admitted: false,
          existing: { ...a.event, disposition: 'started', run_id: 'run-first' },
        }),
      ],
    });
    expect(await service.submit(message(), null)).toMatchObject({
      disposition: 'started',
      run_id: 'run-first',
      replayed: true,
    });
    expect(log).toEqual(['quota default', 'prepare']);
  });
  describe("reads ahead (AdmissionService.readAhead: the conversation's reads beside the catalogue version read)", () => {
    it("starts the situation and the run's reads with the cached agent, in the workspace the edge fills in", () => {
      const { service, reads } = setup({ outcomes: [] });
      const ahead = service.readAhead(message('c1'));
      const derived = { ...message('c1'), conversation: { conversation_id: 'c1', workspace_id: 'default' } };
      expect(ahead?.conversation_key).toBe(conversationOf(agent, derived).key);
      expect(reads).toEqual(['one read ahead default']);
    });

    it('hands the catalogue version row the reads ahead carry to the catalogue, for the edge to share', async () => {
      const { service, versionsSeeded } = setup({ outcomes: [] });
      service.readAhead(message('c1'));
      expect(versionsSeeded).toHaveLength(1);
      expect(await versionsSeeded[0]).toBe(5);
    });

    it('starts nothing without a conversation, without the agent cached, for another workspace, with a run here, for an interaction, on SQLite', () => {
      const interaction: EventSubmission = {
        ...message('c1'),
        event: { event_type: 'interaction.submitted', source: 'api' },
      };
      const other: EventSubmission = {
        ...message('c1'),
        conversation: { conversation_id: 'c1', workspace_id: 'ws-2' },
      };
      const cases = [
        [setup({ outcomes: [] }), message()],
        [setup({ outcomes: [], notCached: true }), message('c1')],
        [setup({ outcomes: [] }), other],
        [setup({ outcomes: [], busyHere: true }), message('c1')],
        [setup({ outcomes: [], runnerElsewhere: true }), message('c1')],
        [setup({ outcomes: [] }), interaction],
        [setup({ outcomes: [], inProcess: true }), message('c1')],
      ] as const;
      for (const [{ service, reads }, sub] of cases) {
        expect(service.readAhead(sub)).toBeNull();
        expect(reads).toEqual([]);
      }
    });

    it("the admission takes the reads ahead: the situation is not read again, the prepare gets the run's reads", async () => {
      const { service, reads, aheadGiven } = setup({ outcomes: [admitted({})] });
      const sub = message('c1');
      const ahead = service.readAhead(sub);
      const derived = { ...sub, conversation: { ...sub.conversation!, workspace_id: 'default' } };
      expect((await service.submit(derived, null, performance.now(), agent, ahead)).disposition).toBe('started');
      expect(reads).toEqual(['one read ahead default', 'prepare']);
      expect(aheadGiven).toEqual([ahead!.run]);
    });

    it('a situation read by another conversation key is read again', async () => {
      const { service, reads } = setup({ outcomes: [admitted({})] });
      const ahead = service.readAhead(message('c1'));
      await service.submit(message('c2'), null, performance.now(), agent, ahead);
      expect(reads).toEqual(['one read ahead default', 'prepare', 'situation']);
    });

    it('a start prepared again after the unit found it unprepared reads afresh', async () => {
      const { service, aheadGiven } = setup({
        situation: busy,
        outcomes: [() => ({ admitted: false, existing: null }), admitted({})],
      });
      const sub = message('c1');
      const ahead = service.readAhead(sub);
      const derived = { ...sub, conversation: { ...sub.conversation!, workspace_id: 'default' } };
      await service.submit(derived, null, performance.now(), agent, ahead);
      // The first prepare (beside the situation) dropped as busy; the second reads afresh.
      expect(aheadGiven).toEqual([ahead!.run, null]);
    });
  });
});
