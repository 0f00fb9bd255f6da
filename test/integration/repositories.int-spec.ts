import { createHash, randomUUID } from 'node:crypto';
import type { TestingModule } from '@nestjs/testing';
import { DataSource, QueryFailedError } from 'typeorm';
import {
  AgentsRepository,
  ApiKeysRepository,
  ContextRepository,
  ENTITIES,
  EventEntity,
  EventLogEntity,
  PluginsRepository,
  RunEntity,
  RunResultEntity,
  RunsRepository,
  TranscriptEntity,
  type AdmitOutcome,
  type AgentEntity,
  type ApiKeyEntity,
  type JsonObject,
  type NewTranscriptRow,
  type PluginEntity,
  type RunnerEntity,
  type StoredResult,
  Transactions,
  type NewRun,
} from '@libs/persistence';
import { DIALECTS, driverError, type TestDatabase, storesModule, UNIQUE_VIOLATION } from './support/databases';
import { logOf } from './support/run-rows';

jest.setTimeout(60_000);

const T0 = 1_764_500_000_000;

type NewResult = Omit<RunResultEntity, 'id'>;

function event(overrides: Partial<EventEntity> = {}): EventEntity {
  return {
    event_id: `evt_${randomUUID()}`,
    agent_id: 'agent-1',
    event_type: 'message.created',
    conversation_id: 'conv-1',
    thread_id: null,
    idempotency_key: null,
    body_hash: 'a'.repeat(64),
    payload: { text: 'hello' },
    disposition: 'started',
    run_id: null,
    received_at: T0,
    ...overrides,
  };
}

function run(overrides: Partial<NewRun> = {}): NewRun {
  return {
    run_id: `run_${randomUUID()}`,
    event_id: `evt_${randomUUID()}`,
    agent_id: 'agent-1',
    runner_id: 'acme/echo/echo',
    conversation_id: 'conv-1',
    thread_id: null,
    workspace_id: null,
    status: 'queued',
    status_reason: null,
    error_code: null,
    retryable: null,
    context: { protocol: 'v1' },
    usage: null,
    authorization: null,
    authorization_hash: null,
    created_at: T0,
    started_at: null,
    finished_at: null,
    deadline_at: null,
    cancel_requested_at: null,
    ...overrides,
  };
}

/** The event-log row admission writes for `e` (and its run). */
const logRow = logOf;

function userRow(e: EventEntity, text = 'hello'): NewTranscriptRow {
  return {
    conversation_id: e.conversation_id!,
    thread_id: e.thread_id,
    workspace_id: null,
    role: 'user',
    item_type: 'message',
    content: text,
    content_json: { role: 'user', content: text },
    attachment_refs: [],
    event_id: e.event_id,
    run_id: null,
    agent_id: e.agent_id,
    metadata: {},
    created_at: e.received_at,
  };
}

function result(runId: string, sequence: number, overrides: Partial<NewResult> = {}): NewResult {
  return {
    run_id: runId,
    sequence,
    type: 'message.delta',
    data: { n: sequence },
    usage: null,
    source: 'runner',
    timestamp: T0 + sequence,
    created_at: T0 + sequence,
    ...overrides,
  };
}

/** What resultsAfter returns for a stored result (no internal id, no created_at). */
function stored(r: NewResult): StoredResult {
  const { created_at: _createdAt, ...rest } = r;
  return rest;
}

function apiKey(overrides: Partial<ApiKeyEntity> = {}): ApiKeyEntity {
  const id = randomUUID().replace(/-/g, '');
  return {
    id,
    name: `key ${id}`,
    role: 'admin',
    key_hash: `${id}${id}`,
    key_prefix: id.slice(0, 8),
    workspace_ids: null,
    created_at: T0,
    revoked_at: null,
    ...overrides,
  };
}

function agent(overrides: Partial<AgentEntity> = {}): AgentEntity {
  return {
    agent_id: `agent-${randomUUID()}`,
    workspace_id: 'default',
    runner_id: 'acme/echo/echo',
    description: 'first',
    runner_config: { model: 'small' },
    resource_policy: { max_ms: 1000 },
    state_policy: { mode: 'none' },
    delivery_policy: { mode: 'stream' },
    concurrency_policy: { per_conversation: 1 },
    version: 1,
    created_at: T0,
    updated_at: T0,
    ...overrides,
  };
}

function plugin(pluginId: string): PluginEntity {
  const [author, name] = pluginId.split('/');
  return {
    plugin_id: pluginId,
    author,
    name,
    token_hash: `tok-${pluginId}`,
    token_prefix: 'rhp_',
    created_at: T0,
    token_issued_at: T0,
  };
}

function runner(pluginId: string, name: string): RunnerEntity {
  return {
    runner_id: `${pluginId}/${name}`,
    plugin_id: pluginId,
    name,
    manifest: { name, capabilities: ['text'] },
    last_seen_at: T0,
  };
}

/** Nested objects and arrays, unicode (BMP, astral, combining, RTL), escapes and numeric edge values. */
const TRICKY_JSON: JsonObject = {
  text: 'héllo wörld — 你好 — مرحبا — 🚀👩‍💻 — e\u0301',
  escapes: 'quote " backslash \\ newline \n tab \t control \u0001 nul \u0000',
  numbers: { zero: 0, negative: -42, float: 3.14159, tiny: 1e-7, big: Number.MAX_SAFE_INTEGER, exp: 6.02e23 },
  flags: [true, false, null],
  nested: { a: { b: { c: [1, [2, [3, { d: 'deep' }]]] } } },
  empty: { obj: {}, arr: [], str: '' },
};

describe.each(DIALECTS)('repositories on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let runs: RunsRepository;
  let keys: ApiKeysRepository;
  let agents: AgentsRepository;
  let plugins: PluginsRepository;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [
      Transactions,
      ApiKeysRepository,
      PluginsRepository,
      AgentsRepository,
      ContextRepository,
      RunsRepository,
    ]);
    ds = moduleRef.get(DataSource);
    runs = moduleRef.get(RunsRepository);
    keys = moduleRef.get(ApiKeysRepository);
    agents = moduleRef.get(AgentsRepository);
    plugins = moduleRef.get(PluginsRepository);
  });

  afterAll(async () => {
    await moduleRef?.close();
    await db?.dispose();
  });

  beforeEach(async () => {
    for (const entity of ENTITIES) {
      await ds.getRepository(entity).clear();
    }
  });

  /** Admits `e` with its run and event log row (and the user transcript row when given). */
  function admit(
    e: EventEntity,
    r: NewRun,
    user: NewTranscriptRow | null = null,
    readmit = false,
  ): Promise<AdmitOutcome> {
    // The unit decides the disposition: an event recorded failed is one whose run failed at admission.
    const terminal = e.disposition === 'failed' ? result(r.run_id, 1) : null;
    return runs.admit({ event: e, run: r, log: logRow(e), user, terminal, readmit });
  }

  it('runs on the dialect it was configured for, with the schema migrated', async () => {
    expect(ds.isInitialized).toBe(true);
    expect(ds.options.type).toBe(db.config.type === 'postgres' ? 'postgres' : 'better-sqlite3');
    expect(await ds.showMigrations()).toBe(false);
  });

  describe('RunsRepository.admit', () => {
    const count = (entity: (typeof ENTITIES)[number]) => ds.getRepository(entity).count();

    it('writes the event, its run and its event log row together', async () => {
      const r = run();
      const e = event({ event_id: r.event_id, run_id: r.run_id });

      await admit(e, r);

      expect(await runs.getEvent(e.event_id)).toEqual(e);
      const { authorization, ...columns } = r;
      expect(await runs.get(r.run_id)).toEqual({
        ...columns,
        context: { ...r.context, context: { event_seq: expect.any(Number) } },
        snapshot_hash: authorization ? expect.stringMatching(/^[0-9a-f]{64}$/) : null,
        authorization_run: authorization ? expect.any(String) : null,
        id: expect.any(Number),
        // A started run is attempt 1 of the process that prepared it (none in this test): docs/scale-out.md#taking-a-run.
        attempt: 1,
        owner_process_id: null,
        last_write_at: null,
      });
      expect(await runs.authorization(r.run_id)).toEqual({ authorization, authorization_hash: r.authorization_hash });
      expect(await ds.getRepository(EventLogEntity).find()).toEqual([{ ...logRow(e), id: expect.any(Number) }]);
      expect(await count(TranscriptEntity)).toBe(0);
    });

    it('writes the user transcript row with seq 1 when one is given', async () => {
      const r = run();
      const e = event({ event_id: r.event_id, run_id: r.run_id });

      await admit(e, r, userRow(e, 'first words'));

      expect(await ds.getRepository(TranscriptEntity).find()).toEqual([
        { ...userRow(e, 'first words'), id: expect.any(Number), seq: 1 },
      ]);
    });

    it('keeps the frozen authorization snapshot and its hash on the run', async () => {
      const snapshot: JsonObject = { version: 1, available_apis: { run_get: true }, storage: { plugin: 'acme/echo' } };
      const r = run({ authorization: snapshot, authorization_hash: 'f'.repeat(64) });

      await admit(event({ event_id: r.event_id, run_id: r.run_id }), r);

      expect(await runs.authorization(r.run_id)).toEqual({
        authorization: snapshot,
        authorization_hash: 'f'.repeat(64),
      });
    });

    it('stores the shared part of a snapshot once by its hash; each run keeps its own keys', async () => {
      const grants = { version: 1, available_apis: { run_get: true }, storage: { plugin: 'acme/echo' } };
      const scope = (actor: string): JsonObject => ({ agent_id: 'agent-1', actor_id: actor });
      const first = run();
      const second = run();
      const a = { ...grants, run_id: first.run_id, scope: scope('u1'), deadline_at_ms: T0 + 1000 };
      const b = { ...grants, run_id: second.run_id, scope: scope('u2'), deadline_at_ms: null };
      // Both runs in one group commit, then one more alone.
      await Promise.all([
        admit(event({ event_id: first.event_id, run_id: first.run_id }), { ...first, authorization: a }),
        admit(event({ event_id: second.event_id, run_id: second.run_id }), { ...second, authorization: b }),
      ]);
      const third = run();
      const c = { ...grants, run_id: third.run_id, scope: scope('u3'), deadline_at_ms: null, limits: { burst: 2 } };
      await admit(event({ event_id: third.event_id, run_id: third.run_id }), { ...third, authorization: c });

      expect((await runs.authorization(first.run_id))?.authorization).toEqual(a);
      expect((await runs.authorization(second.run_id))?.authorization).toEqual(b);
      expect((await runs.authorization(third.run_id))?.authorization).toEqual(c);
      expect(await runs.authorization('run-unknown')).toBeNull();
      const stored: { hash: string; content: string }[] = await ds.query(`SELECT "hash", "content" FROM "snapshots"`);
      expect(stored).toHaveLength(2);
      for (const s of stored) {
        expect(createHash('sha256').update(s.content).digest('hex')).toBe(s.hash);
        expect(JSON.parse(s.content)).not.toHaveProperty('run_id');
      }
      const rows: { snapshot_hash: string; authorization_run: string }[] = await ds.query(
        `SELECT "snapshot_hash", "authorization_run" FROM "runs" WHERE "run_id" IN ('${first.run_id}', '${second.run_id}')`,
      );
      expect(new Set(rows.map((r) => r.snapshot_hash)).size).toBe(1);
      expect(rows.map((r) => JSON.parse(r.authorization_run) as JsonObject)).toEqual(
        expect.arrayContaining([{ run_id: first.run_id, scope: scope('u1'), deadline_at_ms: T0 + 1000 }]),
      );
    });

    it('writes nothing when the run insert fails (duplicate run_id): no partial write', async () => {
      const existing = run();
      const existingEvent = event({ event_id: existing.event_id, run_id: existing.run_id });
      await admit(existingEvent, existing, userRow(existingEvent));

      const e = event({ run_id: existing.run_id, idempotency_key: 'idem-dup' });
      const dup = run({ run_id: existing.run_id, event_id: e.event_id, agent_id: 'agent-other' });
      expect(await driverError(admit(e, dup, userRow(e)))).toMatchObject({
        code: expect.stringMatching(UNIQUE_VIOLATION),
      });

      expect(await runs.getEvent(e.event_id)).toBeNull();
      expect(await runs.getEventByIdempotencyKey('idem-dup')).toBeNull();
      expect(await count(EventEntity)).toBe(1);
      expect(await count(RunEntity)).toBe(1);
      expect(await count(EventLogEntity)).toBe(1);
      expect(await count(TranscriptEntity)).toBe(1);
      expect(await runs.get(existing.run_id)).toMatchObject({ event_id: existing.event_id, agent_id: 'agent-1' });
    });

    it('re-admits an event whose run failed at admission: updates the event row, adds the new run and log row', async () => {
      const failedRun = run({ status: 'failed', error_code: 'runner.unavailable', retryable: true });
      const first = event({
        event_id: failedRun.event_id,
        run_id: failedRun.run_id,
        idempotency_key: 'idem-retry',
        disposition: 'failed',
        payload: { attempt: 1 },
      });
      await admit(first, failedRun);

      // A retry is the same request again: same event id and body (hash), a new run.
      const r = run({ event_id: first.event_id });
      const retry = { ...first, disposition: 'started', run_id: r.run_id, received_at: T0 + 5 };
      expect(await admit(retry, r, null, true)).toMatchObject({ admitted: true, transcript_seq: null });

      expect(await count(EventEntity)).toBe(1);
      expect(await runs.getEvent(first.event_id)).toEqual(retry);
      expect(await runs.getEventByIdempotencyKey('idem-retry')).toEqual(retry);
      expect(await runs.get(r.run_id)).toMatchObject({ event_id: first.event_id, status: 'queued' });
      expect(await runs.get(failedRun.run_id)).toMatchObject({ event_id: first.event_id, status: 'failed' });
      const log = await ds.getRepository(EventLogEntity).find({ order: { id: 'ASC' } });
      expect(log.map((l) => [l.event_id, l.run_id])).toEqual([
        [first.event_id, failedRun.run_id],
        [first.event_id, r.run_id],
      ]);
    });

    it('does not re-admit an event that did not fail, nor one with another body: returns it, writes nothing', async () => {
      const startedRun = run({ status: 'running' });
      const started = event({ event_id: startedRun.event_id, run_id: startedRun.run_id, disposition: 'started' });
      await admit(started, startedRun);
      const failedRun = run({ status: 'failed' });
      const failed = event({ event_id: failedRun.event_id, run_id: failedRun.run_id, disposition: 'failed' });
      await admit(failed, failedRun);

      const r1 = run({ event_id: started.event_id });
      expect(await admit({ ...started, run_id: r1.run_id, received_at: T0 + 9 }, r1, userRow(started), true)).toEqual({
        admitted: false,
        existing: started,
      });
      const r2 = run({ event_id: failed.event_id });
      const otherBody = { ...failed, body_hash: 'b'.repeat(64), disposition: 'started', run_id: r2.run_id };
      expect(await admit(otherBody, r2, null, true)).toEqual({ admitted: false, existing: failed });

      expect(await runs.getEvent(started.event_id)).toEqual(started);
      expect(await runs.getEvent(failed.event_id)).toEqual(failed);
      expect(await runs.get(r1.run_id)).toBeNull();
      expect(await runs.get(r2.run_id)).toBeNull();
      expect(await count(RunEntity)).toBe(2);
      expect(await count(EventLogEntity)).toBe(2);
      expect(await count(TranscriptEntity)).toBe(0);
    });

    it('returns the event holding the key when a retry brings an idempotency key taken meanwhile, and writes nothing', async () => {
      // Admission looks the key up first; another request can claim the key between that read
      // and the admission unit. The unit's contract: a duplicate returns the recorded event.
      const failedRun = run({ status: 'failed' });
      const failed = event({ event_id: failedRun.event_id, run_id: failedRun.run_id, disposition: 'failed' });
      await admit(failed, failedRun);
      const holderRun = run();
      const holder = event({ event_id: holderRun.event_id, run_id: holderRun.run_id, idempotency_key: 'idem-taken' });
      await admit(holder, holderRun);

      const r = run({ event_id: failed.event_id });
      const retry = { ...failed, disposition: 'started', run_id: r.run_id, idempotency_key: 'idem-taken' };
      expect(await admit(retry, r, null, true)).toEqual({ admitted: false, existing: holder });

      expect(await runs.getEvent(failed.event_id)).toEqual(failed);
      expect(await runs.get(r.run_id)).toBeNull();
      expect(await count(EventLogEntity)).toBe(2);
    });

    it('rolls the retry update back when its run insert fails', async () => {
      const taken = run();
      await admit(event({ event_id: taken.event_id, run_id: taken.run_id }), taken);
      const failedRun = run({ status: 'failed' });
      const first = event({
        event_id: failedRun.event_id,
        run_id: failedRun.run_id,
        disposition: 'failed',
        payload: { attempt: 1 },
      });
      await admit(first, failedRun);

      const retry = { ...first, disposition: 'started', run_id: taken.run_id, received_at: T0 + 5 };
      const failure = await driverError(
        admit(retry, run({ run_id: taken.run_id, event_id: first.event_id }), null, true),
      );
      expect(failure.code).toMatch(UNIQUE_VIOLATION);

      expect(await runs.getEvent(first.event_id)).toEqual(first);
      expect(await count(EventLogEntity)).toBe(2);
      expect(await count(RunEntity)).toBe(2);
    });

    it('returns the recorded event for a second event with the same idempotency key, and writes nothing', async () => {
      const firstRun = run();
      const first = event({ event_id: firstRun.event_id, run_id: firstRun.run_id, idempotency_key: 'idem-unique' });
      expect(await admit(first, firstRun, userRow(first))).toMatchObject({ admitted: true, transcript_seq: 1 });

      const againRun = run();
      const again = event({ event_id: againRun.event_id, run_id: againRun.run_id, idempotency_key: 'idem-unique' });
      expect(await admit(again, againRun, userRow(again))).toEqual({ admitted: false, existing: first });

      expect(await runs.getEvent(again.event_id)).toBeNull();
      expect(await runs.get(againRun.run_id)).toBeNull();
      expect(await count(EventEntity)).toBe(1);
      expect(await count(RunEntity)).toBe(1);
      expect(await count(EventLogEntity)).toBe(1);
      // The duplicate consumed no transcript seq.
      expect(await count(TranscriptEntity)).toBe(1);
      const next = run();
      const third = event({ event_id: next.event_id, run_id: next.run_id });
      expect(await admit(third, next, userRow(third))).toMatchObject({ admitted: true, transcript_seq: 2 });
    });

    it('returns the recorded event for a second event with the same event id (any body), and writes nothing', async () => {
      const firstRun = run();
      const first = event({ event_id: firstRun.event_id, run_id: firstRun.run_id });
      await admit(first, firstRun);

      const againRun = run({ event_id: first.event_id });
      const again = event({ event_id: first.event_id, run_id: againRun.run_id, body_hash: 'c'.repeat(64) });
      expect(await admit(again, againRun, userRow(again))).toEqual({ admitted: false, existing: first });

      expect(await runs.getEvent(first.event_id)).toEqual(first);
      expect(await runs.get(againRun.run_id)).toBeNull();
      expect(await count(RunEntity)).toBe(1);
      expect(await count(EventLogEntity)).toBe(1);
      expect(await count(TranscriptEntity)).toBe(0);
    });

    it('writes the terminal result of a run that failed at admission with it', async () => {
      const r = run({ status: 'failed', error_code: 'runner.unavailable', finished_at: T0 });
      const e = event({ event_id: r.event_id, run_id: r.run_id, disposition: 'failed' });
      const terminal = result(r.run_id, 1, {
        type: 'run.failed',
        data: { code: 'runner.unavailable' },
        source: 'host',
      });
      await runs.admit({ event: e, run: r, log: logRow(e), user: null, terminal, readmit: false });

      expect(await runs.status(r.run_id)).toBe('failed');
      expect(await runs.resultsAfter(r.run_id, 0, 10)).toEqual([stored(terminal)]);
    });
  });

  describe('run results', () => {
    // Run ids of their own: the repository keeps a run's committed results for its readers
    // (committed-results.ts), and a run id's results never change while the host runs.
    it('enforces a unique (run_id, sequence)', async () => {
      await runs.insertResult(result('run-unique', 1, { data: { original: true } }));

      const failure = await driverError(runs.insertResult(result('run-unique', 1, { data: { original: false } })));
      expect(failure.code).toMatch(UNIQUE_VIOLATION);
      // The same sequence on another run is fine.
      await runs.insertResult(result('run-unique-2', 1));

      const stored = await runs.resultsAfter('run-unique', 0, 10);
      expect(stored).toHaveLength(1);
      expect(stored[0].data).toEqual({ original: true });
    });

    it('resultsAfter returns one run, in sequence order, after the bound, at most limit', async () => {
      for (const seq of [3, 1, 5, 2, 4]) {
        await runs.insertResult(result('run-a', seq));
      }
      await runs.insertResult(result('run-b', 2));

      const seqs = (rows: StoredResult[]) => rows.map((r) => r.sequence);
      expect(seqs(await runs.resultsAfter('run-a', 0, 100))).toEqual([1, 2, 3, 4, 5]);
      expect(seqs(await runs.resultsAfter('run-a', 2, 100))).toEqual([3, 4, 5]);
      expect(seqs(await runs.resultsAfter('run-a', 1, 2))).toEqual([2, 3]);
      expect(seqs(await runs.resultsAfter('run-a', 5, 100))).toEqual([]);
      expect(await runs.resultsAfter('run-none', 0, 100)).toEqual([]);

      const [first] = await runs.resultsAfter('run-a', 0, 1);
      expect(first).toEqual(stored(result('run-a', 1)));
    });

    it('lastSequence is 0 for a run without results, else the highest sequence', async () => {
      expect(await runs.lastSequence('run-a')).toBe(0);

      for (const seq of [2, 7, 4]) {
        await runs.insertResult(result('run-a', seq));
      }
      await runs.insertResult(result('run-b', 9));

      expect(await runs.lastSequence('run-a')).toBe(7);
      expect(await runs.lastSequence('run-b')).toBe(9);
      expect(await runs.lastSequence('run-c')).toBe(0);
    });
  });

  describe('run lifecycle', () => {
    async function admitted(overrides: Partial<NewRun> = {}): Promise<NewRun> {
      const r = run(overrides);
      await admit(event({ event_id: r.event_id, run_id: r.run_id }), r);
      return r;
    }

    it('finish moves a queued or running run to its terminal status with its terminal result', async () => {
      const queued = await admitted({ status: 'queued' });
      const running = await admitted({ status: 'running', started_at: T0 + 1 });

      expect(
        await runs.endIfActive(result(queued.run_id, 1), {
          status: 'completed',
          status_reason: null,
          error_code: null,
          retryable: null,
          finished_at: T0 + 10,
          usage: { tokens: 12 },
        }),
      ).toBe(true);
      expect(
        await runs.endIfActive(result(running.run_id, 2), {
          status: 'failed',
          status_reason: 'runner crashed',
          error_code: 'RUNNER_ERROR',
          retryable: false,
          finished_at: T0 + 20,
        }),
      ).toBe(true);

      expect(await runs.lastSequence(queued.run_id)).toBe(1);
      expect(await runs.get(queued.run_id)).toMatchObject({
        status: 'completed',
        finished_at: T0 + 10,
        usage: { tokens: 12 },
      });
      expect(await runs.get(running.run_id)).toMatchObject({
        status: 'failed',
        status_reason: 'runner crashed',
        error_code: 'RUNNER_ERROR',
        retryable: false,
        started_at: T0 + 1,
        finished_at: T0 + 20,
        usage: null,
      });
    });

    it('finish leaves an already terminal run untouched, writes no result and returns false', async () => {
      const r = await admitted({ status: 'running' });
      const final = {
        status: 'cancelled' as const,
        status_reason: 'cancelled by user',
        error_code: null,
        retryable: true,
        finished_at: T0 + 30,
      };
      expect(await runs.endIfActive(result(r.run_id, 3), final)).toBe(true);

      expect(
        await runs.endIfActive(result(r.run_id, 4), {
          status: 'timeout',
          status_reason: 'deadline exceeded',
          error_code: 'DEADLINE',
          retryable: false,
          finished_at: T0 + 99,
          usage: { tokens: 1 },
        }),
      ).toBe(false);
      expect(await runs.get(r.run_id)).toMatchObject({ ...final, usage: null });
      expect((await runs.resultsAfter(r.run_id, 0, 10)).length).toBe(1);
      expect(
        await runs.endIfActive(result('run-missing', 5), {
          status: 'failed',
          status_reason: null,
          error_code: null,
          retryable: null,
          finished_at: T0,
        }),
      ).toBe(false);
    });

    it('finish writes the state write and the assistant transcript row in the commit of the terminal result', async () => {
      const r = await admitted({ status: 'running' });
      const e = (await runs.getEvent(r.event_id))!;
      const assistant: NewTranscriptRow = { ...userRow(e, 'the answer'), role: 'assistant', run_id: r.run_id };
      const end = {
        status: 'completed' as const,
        status_reason: null,
        error_code: null,
        retryable: null,
        finished_at: T0 + 10,
      };
      const state = { scope_key: 'conversation:conv-1', state_key: 'topic', value: '"zebras"' };

      expect(await runs.endIfActive(result(r.run_id, 1, { type: 'run.completed' }), end, state, assistant)).toBe(true);

      expect(await runs.status(r.run_id)).toBe('completed');
      expect((await runs.resultsAfter(r.run_id, 0, 10)).map((x) => x.type)).toEqual(['run.completed']);
      expect(await ds.query('SELECT "value" FROM "state_entries" WHERE "scope_key" = \'conversation:conv-1\'')).toEqual(
        [{ value: '"zebras"' }],
      );
      expect(await ds.getRepository(TranscriptEntity).find()).toEqual([
        { ...assistant, id: expect.any(Number), seq: 1 },
      ]);
    });

    it('status reads the status of a run, null for an unknown run', async () => {
      const r = await admitted({ status: 'running' });

      expect(await runs.status(r.run_id)).toBe('running');
      expect(await runs.status('run-missing')).toBeNull();
    });

    it('listActive returns exactly the queued and running runs', async () => {
      const queued = await admitted({ status: 'queued' });
      const running = await admitted({ status: 'running' });
      for (const status of ['completed', 'failed', 'cancelled', 'timeout', 'interrupted'] as const) {
        await admitted({ status });
      }

      const active = await runs.listActive();
      expect(active.map((r) => r.run_id).sort()).toEqual([queued.run_id, running.run_id].sort());
      expect(active.find((r) => r.run_id === running.run_id)?.status).toBe('running');
    });

    it('markCancelRequested stamps the run', async () => {
      const r = await admitted({ status: 'running' });

      await runs.markCancelRequested(r.run_id, T0 + 42);

      expect(await runs.get(r.run_id)).toMatchObject({ status: 'running', cancel_requested_at: T0 + 42 });
    });

    it('page lists newest first and walks back with the id cursor', async () => {
      const created: NewRun[] = [];
      for (let i = 0; i < 5; i++) {
        created.push(await admitted({ conversation_id: 'conv-page', created_at: T0 + i }));
      }
      const newestFirst = created.map((r) => r.run_id).reverse();

      const first = await runs.page({}, null, 2);
      const second = await runs.page({}, first[1].id, 2);
      const third = await runs.page({}, second[1].id, 2);
      const beyond = await runs.page({}, third[0].id, 2);

      expect([...first, ...second, ...third].map((r) => r.run_id)).toEqual(newestFirst);
      expect(third).toHaveLength(1);
      expect(beyond).toEqual([]);
      const ids = [...first, ...second, ...third].map((r) => r.id);
      expect([...ids].sort((a, b) => b - a)).toEqual(ids);
    });

    it('page filters by conversation, status and agent', async () => {
      const a1 = await admitted({ conversation_id: 'conv-a', status: 'completed' });
      const a2 = await admitted({ conversation_id: 'conv-a', status: 'running' });
      const a3 = await admitted({ conversation_id: 'conv-a', status: 'failed', agent_id: 'agent-2' });
      const b1 = await admitted({ conversation_id: 'conv-b', status: 'completed' });
      const none = await admitted({ conversation_id: null, status: 'completed' });
      const ids = (rows: RunEntity[]) => rows.map((r) => r.run_id);

      expect(ids(await runs.page({ conversation_id: 'conv-a' }, null, 10))).toEqual([a3.run_id, a2.run_id, a1.run_id]);
      expect(ids(await runs.page({ conversation_id: 'conv-b' }, null, 10))).toEqual([b1.run_id]);
      expect(ids(await runs.page({ status: ['completed'] }, null, 10))).toEqual([none.run_id, b1.run_id, a1.run_id]);
      expect(ids(await runs.page({ conversation_id: 'conv-a', status: ['completed', 'failed'] }, null, 10))).toEqual([
        a3.run_id,
        a1.run_id,
      ]);
      expect(ids(await runs.page({ conversation_id: 'conv-a', agent_id: 'agent-2' }, null, 10))).toEqual([a3.run_id]);
      expect(ids(await runs.page({ status: [] }, null, 10))).toHaveLength(5);
      expect(await runs.page({ conversation_id: 'conv-missing' }, null, 10)).toEqual([]);

      // Filters and the cursor combine.
      const [newest] = await runs.page({ conversation_id: 'conv-a' }, null, 1);
      expect(ids(await runs.page({ conversation_id: 'conv-a' }, newest.id, 10))).toEqual([a2.run_id, a1.run_id]);
    });
  });

  describe('column round-trips', () => {
    it('JSON columns come back deep-equal (nested objects, unicode, numbers)', async () => {
      const r = run({ context: TRICKY_JSON, usage: { input: 1, output: 2.5, nested: { list: [1, 'two'] } } });
      const e = event({ event_id: r.event_id, run_id: r.run_id, payload: TRICKY_JSON });
      await admit(e, r);
      await runs.insertResult(result(r.run_id, 1, { data: TRICKY_JSON, usage: { tokens: 3 } }));
      const a = agent({ runner_config: TRICKY_JSON });
      await agents.insert(a);
      await plugins.create(plugin('acme/json'));
      await plugins.saveRunners([{ ...runner('acme/json', 'r'), manifest: TRICKY_JSON }]);

      expect((await runs.getEvent(e.event_id))!.payload).toEqual(TRICKY_JSON);
      expect(await runs.get(r.run_id)).toMatchObject({
        context: TRICKY_JSON,
        usage: { input: 1, output: 2.5, nested: { list: [1, 'two'] } },
      });
      expect((await runs.resultsAfter(r.run_id, 0, 1))[0]).toMatchObject({ data: TRICKY_JSON, usage: { tokens: 3 } });
      expect((await agents.get(a.agent_id))!.runner_config).toEqual(TRICKY_JSON);
      expect((await plugins.getRunner('acme/json/r'))!.manifest).toEqual(TRICKY_JSON);
    });

    it('nullable JSON and boolean columns keep null/true/false', async () => {
      const withNull = run({ usage: null, retryable: null });
      const withTrue = run({ retryable: true });
      const withFalse = run({ retryable: false });
      for (const r of [withNull, withTrue, withFalse]) {
        await admit(event({ event_id: r.event_id, run_id: r.run_id }), r);
      }
      await runs.insertResult(result(withNull.run_id, 1, { usage: null, timestamp: null }));

      expect(await runs.get(withNull.run_id)).toMatchObject({ usage: null, retryable: null });
      expect((await runs.get(withTrue.run_id))!.retryable).toBe(true);
      expect((await runs.get(withFalse.run_id))!.retryable).toBe(false);
      expect((await runs.resultsAfter(withNull.run_id, 0, 1))[0]).toMatchObject({ usage: null, timestamp: null });
    });

    it('bigint epoch-ms columns come back as JS numbers, exactly', async () => {
      const values = [0, T0, 4_102_444_800_000 /* 2100-01-01 */, Number.MAX_SAFE_INTEGER];
      for (const [i, ms] of values.entries()) {
        const r = run({
          created_at: ms,
          started_at: ms,
          finished_at: ms,
          deadline_at: ms,
          cancel_requested_at: ms,
          conversation_id: `conv-bigint-${i}`,
        });
        await admit(event({ event_id: r.event_id, run_id: r.run_id, received_at: ms }), r);
        await runs.insertResult(result(r.run_id, 1, { timestamp: ms, created_at: ms }));

        const stored = (await runs.get(r.run_id))!;
        for (const col of ['created_at', 'started_at', 'finished_at', 'deadline_at', 'cancel_requested_at'] as const) {
          expect({ col, value: stored[col], type: typeof stored[col] }).toEqual({ col, value: ms, type: 'number' });
        }
        const storedEvent = (await runs.getEvent(r.event_id))!;
        expect(storedEvent.received_at).toBe(ms);
        expect(typeof storedEvent.received_at).toBe('number');
        const [storedResult] = await runs.resultsAfter(r.run_id, 0, 1);
        expect(storedResult.timestamp).toBe(ms);
        expect(typeof storedResult.timestamp).toBe('number');
        // created_at is not on the stream's read: the full row (TypeORM) keeps it exactly.
        const resultRow = (await ds.getRepository(RunResultEntity).findOneBy({ run_id: r.run_id }))!;
        expect(resultRow.created_at).toBe(ms);
        expect(typeof resultRow.created_at).toBe('number');
        // Lists go through the same transformer.
        const [listed] = await runs.page({ conversation_id: `conv-bigint-${i}` }, null, 1);
        expect(typeof listed.created_at).toBe('number');
        expect(listed.created_at).toBe(ms);
      }

      const k = apiKey({ created_at: T0 + 1 });
      await keys.create(k);
      expect(await keys.revoke(k.id, T0 + 2)).toBe(true);
      const storedKey = (await keys.get(k.id))!;
      expect([storedKey.created_at, storedKey.revoked_at]).toEqual([T0 + 1, T0 + 2]);
      expect([typeof storedKey.created_at, typeof storedKey.revoked_at]).toEqual(['number', 'number']);

      const a = agent({ created_at: T0 + 3, updated_at: T0 + 4 });
      await agents.insert(a);
      expect(await agents.get(a.agent_id)).toMatchObject({ created_at: T0 + 3, updated_at: T0 + 4 });
      expect(typeof (await agents.get(a.agent_id))!.updated_at).toBe('number');

      await plugins.create({ ...plugin('acme/bigint'), created_at: T0 + 5, token_issued_at: T0 + 6 });
      await plugins.saveRunners([{ ...runner('acme/bigint', 'r'), last_seen_at: T0 + 7 }]);
      expect(await plugins.get('acme/bigint')).toMatchObject({ created_at: T0 + 5, token_issued_at: T0 + 6 });
      expect((await plugins.getRunner('acme/bigint/r'))!.last_seen_at).toBe(T0 + 7);
      expect(typeof (await plugins.list())[0].token_issued_at).toBe('number');
    });
  });

  describe('ApiKeysRepository', () => {
    it('findActiveByHash finds active keys and ignores revoked ones', async () => {
      const active = apiKey();
      const revoked = apiKey();
      await keys.create(active);
      await keys.create(revoked);
      expect(await keys.revoke(revoked.id, T0 + 1)).toBe(true);

      expect(await keys.findActiveByHash(active.key_hash)).toEqual(active);
      expect(await keys.findActiveByHash(revoked.key_hash)).toBeNull();
      expect(await keys.findActiveByHash('no-such-hash')).toBeNull();
      // Still visible by id, with its revocation time.
      expect(await keys.get(revoked.id)).toEqual({ ...revoked, revoked_at: T0 + 1 });
    });

    it('revoke is true once, then false, and keeps the first revocation time', async () => {
      const k = apiKey();
      await keys.create(k);

      expect(await keys.revoke(k.id, T0 + 10)).toBe(true);
      expect(await keys.revoke(k.id, T0 + 20)).toBe(false);
      expect((await keys.get(k.id))!.revoked_at).toBe(T0 + 10);
      expect(await keys.revoke('no-such-key', T0)).toBe(false);
    });

    it('countActive counts the non-revoked keys of a role', async () => {
      expect(await keys.countActive('admin')).toBe(0);
      const admins = [apiKey({ role: 'admin' }), apiKey({ role: 'admin' }), apiKey({ role: 'admin' })];
      for (const k of [...admins, apiKey({ role: 'platform' })]) {
        await keys.create(k);
      }
      await keys.revoke(admins[0].id, T0 + 1);

      expect(await keys.countActive('admin')).toBe(2);
      expect(await keys.countActive('platform')).toBe(1);
    });

    it('rejects a duplicate key hash and lists keys oldest first', async () => {
      const older = apiKey({ created_at: T0 + 1 });
      const newer = apiKey({ created_at: T0 + 2 });
      await keys.create(newer);
      await keys.create(older);

      await expect(keys.create(apiKey({ key_hash: older.key_hash }))).rejects.toBeInstanceOf(QueryFailedError);
      expect((await keys.list()).map((k) => k.id)).toEqual([older.id, newer.id]);
    });
  });

  describe('AgentsRepository', () => {
    it('update applies with the current version and does nothing with a stale one', async () => {
      const a = agent();
      await agents.insert(a);

      const v2 = { ...a, description: 'second', runner_config: { model: 'large' }, version: 2, updated_at: T0 + 1 };
      expect(await agents.update(v2, 1)).toBe(true);

      const stale = {
        ...a,
        description: 'stale write',
        runner_config: { model: 'stale' },
        version: 2,
        updated_at: T0 + 2,
      };
      expect(await agents.update(stale, 1)).toBe(false);

      expect(await agents.get(a.agent_id)).toEqual(v2);
    });

    it('update never changes created_at and misses an unknown agent', async () => {
      const a = agent();
      await agents.insert(a);

      expect(await agents.update({ ...a, created_at: T0 + 999, version: 2 }, 1)).toBe(true);
      expect((await agents.get(a.agent_id))!.created_at).toBe(T0);
      expect(await agents.update(agent({ agent_id: 'agent-missing' }), 1)).toBe(false);
      expect(await agents.get('agent-missing')).toBeNull();
    });

    it('pages through mixed-case and punctuated ids exactly once each', async () => {
      const ids = ['Agent-Z', 'agent-a', 'agent_b', 'agent-B', 'agent.c', 'AGENT-0', 'agent-10', 'agent-9'];
      for (const id of ids) {
        await agents.insert(agent({ agent_id: id }));
      }

      const seen: string[] = [];
      let cursor: string | null = null;
      for (let page = await agents.page(null, 3); page.length > 0; page = await agents.page(cursor, 3)) {
        seen.push(...page.map((a) => a.agent_id));
        cursor = page[page.length - 1].agent_id;
      }

      expect([...seen].sort()).toEqual([...ids].sort());
      expect(new Set(seen).size).toBe(ids.length);
    });

    it('pages by id and deletes', async () => {
      for (const id of ['agent-c', 'agent-a', 'agent-b']) {
        await agents.insert(agent({ agent_id: id }));
      }

      expect((await agents.page(null, 2)).map((a) => a.agent_id)).toEqual(['agent-a', 'agent-b']);
      expect((await agents.page('agent-b', 2)).map((a) => a.agent_id)).toEqual(['agent-c']);
      expect(await agents.delete('agent-b')).toBe(true);
      expect(await agents.delete('agent-b')).toBe(false);
      expect((await agents.page(null, 10)).map((a) => a.agent_id)).toEqual(['agent-a', 'agent-c']);
    });
  });

  describe('PluginsRepository', () => {
    it('delete removes the plugin and its runners, and only those', async () => {
      await plugins.create(plugin('acme/tools'));
      await plugins.create(plugin('other/tools'));
      await plugins.saveRunners([
        runner('acme/tools', 'one'),
        runner('acme/tools', 'two'),
        runner('other/tools', 'one'),
      ]);

      expect(await plugins.delete('acme/tools')).toBe(true);

      expect(await plugins.get('acme/tools')).toBeNull();
      expect(await plugins.getRunner('acme/tools/one')).toBeNull();
      expect(await plugins.getRunner('acme/tools/two')).toBeNull();
      expect((await plugins.list()).map((p) => p.plugin_id)).toEqual(['other/tools']);
      expect((await plugins.listRunners()).map((r) => r.runner_id)).toEqual(['other/tools/one']);
      expect(await plugins.delete('acme/tools')).toBe(false);
    });

    it('saveRunners upserts manifests and replaceToken swaps the token lookup', async () => {
      const p = plugin('acme/tools');
      await plugins.create(p);
      await plugins.saveRunners([runner('acme/tools', 'one')]);
      await plugins.saveRunners([{ ...runner('acme/tools', 'one'), manifest: { version: 2 }, last_seen_at: T0 + 1 }]);
      await plugins.saveRunners([]);

      expect(await plugins.listRunners()).toEqual([
        {
          runner_id: 'acme/tools/one',
          plugin_id: 'acme/tools',
          name: 'one',
          manifest: { version: 2 },
          last_seen_at: T0 + 1,
        },
      ]);

      await plugins.replaceToken('acme/tools', 'tok-new', 'rhp2', T0 + 5);
      expect(await plugins.findByTokenHash(p.token_hash)).toBeNull();
      expect(await plugins.findByTokenHash('tok-new')).toEqual({
        ...p,
        token_hash: 'tok-new',
        token_prefix: 'rhp2',
        token_issued_at: T0 + 5,
      });
    });
  });
});
