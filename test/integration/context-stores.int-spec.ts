import { randomUUID } from 'node:crypto';
import type { TestingModule } from '@nestjs/testing';
import { DataSource, QueryFailedError } from 'typeorm';
import { buildSnapshot, type RunScope } from '@libs/authz';
import { EventLogService, StateService, TranscriptService, type ScopeKeys } from '@libs/conversations';
import {
  ContextRepository,
  ENTITIES,
  EventEntity,
  EventLogEntity,
  RunEntity,
  RunsRepository,
  StateEntryEntity,
  StorageEntryEntity,
  StoresRepository,
  TranscriptEntity,
  type AdmitOutcome,
  type AuditEntity,
  type ConversationScope,
  type NewResult,
  type NewTranscriptRow,
  Transactions,
  type NewRun,
} from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import {
  driverError,
  NOT_NULL_VIOLATION,
  PERSISTENT_DIALECTS,
  type TestDatabase,
  storesModule,
  UNIQUE_VIOLATION,
} from './support/databases';

jest.setTimeout(120_000);

const T0 = 1_764_600_000_000;
const KIB_256 = 256 * 1024;

type NewLogRow = Omit<EventLogEntity, 'id'>;
type NewAudit = Omit<AuditEntity, 'id'>;

function transcriptRow(
  conversationId: string,
  threadId: string | null,
  content: string,
  overrides: Partial<NewTranscriptRow> = {},
): NewTranscriptRow {
  return {
    conversation_id: conversationId,
    thread_id: threadId,
    workspace_id: null,
    role: 'user',
    item_type: 'message',
    content,
    content_json: { role: 'user', content },
    attachment_refs: [{ type: 'file', name: 'a.txt', content: null }],
    event_id: `evt_${randomUUID()}`,
    run_id: null,
    agent_id: 'agent-1',
    metadata: { actor_id: 'u1' },
    created_at: T0,
    ...overrides,
  };
}

/** One conversation's key: agent + workspace + conversation id + thread. */
function conv(
  conversationId: string,
  threadId: string | null,
  workspaceId: string | null = null,
  agentId = 'agent-1',
): ConversationScope {
  return { agent_id: agentId, workspace_id: workspaceId, conversation_id: conversationId, thread_id: threadId };
}

function logRow(overrides: Partial<NewLogRow> = {}): NewLogRow {
  return {
    event_id: `evt_${randomUUID()}`,
    event_type: 'message.received',
    event_time: 1_764_600_000,
    source: 'platform',
    agent_id: 'agent-1',
    conversation_id: 'conv-1',
    thread_id: null,
    bot_id: 'bot-1',
    workspace_id: 'ws-1',
    actor_type: 'user',
    actor_id: 'u1',
    actor_name: 'Ada',
    subject_type: null,
    subject_id: null,
    input_summary: 'hello',
    run_id: null,
    runner_id: 'acme/echo/echo',
    metadata: { input: { text: 'hello' } },
    created_at: T0,
    ...overrides,
  };
}

function eventRow(overrides: Partial<EventEntity> = {}): EventEntity {
  return {
    event_id: `evt_${randomUUID()}`,
    agent_id: 'agent-1',
    event_type: 'message.received',
    conversation_id: 'conv-1',
    thread_id: null,
    idempotency_key: null,
    body_hash: 'a'.repeat(64),
    payload: { input: { text: 'hello' } },
    disposition: 'started',
    run_id: null,
    received_at: T0,
    ...overrides,
  };
}

function runRow(overrides: Partial<NewRun> = {}): NewRun {
  return {
    run_id: `run_${randomUUID()}`,
    event_id: `evt_${randomUUID()}`,
    agent_id: 'agent-1',
    runner_id: 'acme/echo/echo',
    conversation_id: 'conv-1',
    thread_id: null,
    workspace_id: null,
    status: 'running',
    status_reason: null,
    error_code: null,
    retryable: null,
    context: { protocol: 'v1' },
    usage: null,
    authorization: { version: 1 },
    authorization_hash: 'b'.repeat(64),
    created_at: T0,
    started_at: T0,
    finished_at: null,
    deadline_at: null,
    cancel_requested_at: null,
    ...overrides,
  };
}

function audit(runId: string, action: string, overrides: Partial<NewAudit> = {}): NewAudit {
  return {
    run_id: runId,
    runner_id: 'acme/echo/echo',
    plugin_id: 'acme/echo',
    action,
    resource: null,
    scope: null,
    outcome: 'allowed',
    error_code: null,
    duration_us: 120,
    created_at: T0,
    ...overrides,
  };
}

/** Admits a new event (not a retry) with its run, event log row and optional user transcript row. */
function admit(
  runs: RunsRepository,
  event: EventEntity,
  run: NewRun,
  log: NewLogRow,
  user: NewTranscriptRow | null,
): Promise<AdmitOutcome> {
  return runs.admit({ event, run, log, user, terminal: null, readmit: false });
}

/** Ends a running run as completed, writing `assistant` (built by TranscriptService.assistantRow) with it. */
async function complete(runs: RunsRepository, runId: string, assistant: NewTranscriptRow): Promise<void> {
  const terminal: NewResult = {
    run_id: runId,
    sequence: 1,
    type: 'run.completed',
    data: {},
    usage: null,
    source: 'runner',
    timestamp: T0,
    created_at: T0,
  };
  const end = { status: 'completed', status_reason: null, error_code: null, retryable: null, finished_at: T0 + 1 };
  expect(await runs.endIfActive(terminal, end, null, assistant)).toBe(true);
}

/** The run scope admission builds, with overrides. */
function runScope(overrides: Partial<RunScope> = {}): RunScope {
  return {
    agent_id: 'agent-1',
    runner_id: 'acme/echo/echo',
    plugin_id: 'acme/echo',
    conversation_id: 'conv-1',
    thread_id: null,
    bot_id: null,
    workspace_id: null,
    actor_type: 'user',
    actor_id: 'u1',
    subject_type: null,
    subject_id: null,
    ...overrides,
  };
}

/** The state scope keys a run with this scope is granted (every scope enabled by its agent policy). */
function scopeKeysOf(overrides: Partial<RunScope> = {}): ScopeKeys {
  return buildSnapshot({
    run_id: 'run-keys',
    scope: runScope(overrides),
    manifest: { capabilities: {}, permissions: {} },
    policy: {
      resource: {},
      state: { enable_state: true, state_scopes: ['conversation', 'actor', 'subject', 'runner'] },
    },
    catalog: { models: [], tools: [], knowledge_bases: [] },
    limits: {
      max_payload_bytes: 1,
      max_state_value_bytes: KIB_256,
      max_storage_value_bytes: 1,
      calls_per_second: 1,
      burst: 1,
    },
    deadline_at_ms: null,
  }).state.scope_keys;
}

/** The DomainError `promise` rejects with (fails the test when it resolves or throws something else). */
async function domainError(promise: Promise<unknown>): Promise<DomainError> {
  const outcome = await promise.then(
    (value: unknown) => ({ resolved: value }),
    (error: unknown) => ({ rejected: error }),
  );
  expect(outcome).toEqual({ rejected: expect.any(DomainError) });
  return (outcome as { rejected: DomainError }).rejected;
}

describe.each(PERSISTENT_DIALECTS)('context stores on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let context: ContextRepository;
  let runs: RunsRepository;
  let stores: StoresRepository;
  let transcript: TranscriptService;
  let eventLog: EventLogService;
  let state: StateService;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [
      Transactions,
      ContextRepository,
      RunsRepository,
      StoresRepository,
      TranscriptService,
      EventLogService,
      StateService,
    ]);
    ds = moduleRef.get(DataSource);
    context = moduleRef.get(ContextRepository);
    runs = moduleRef.get(RunsRepository);
    stores = moduleRef.get(StoresRepository);
    transcript = moduleRef.get(TranscriptService);
    eventLog = moduleRef.get(EventLogService);
    state = moduleRef.get(StateService);
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

  /** Appends rows one after another, returning their seqs. */
  async function append(rows: NewTranscriptRow[]): Promise<TranscriptEntity[]> {
    const out: TranscriptEntity[] = [];
    for (const row of rows) {
      out.push(await context.appendTranscript(row));
    }
    return out;
  }

  /** Inserts rows with explicit seqs in one statement (for volume tests). */
  async function bulkTranscript(conversationId: string, texts: string[], firstSeq = 1): Promise<void> {
    await ds
      .getRepository(TranscriptEntity)
      .insert(texts.map((text, i) => ({ ...transcriptRow(conversationId, null, text), seq: firstSeq + i })));
  }

  it('runs on the dialect it was configured for, with every migration applied', async () => {
    expect(ds.options.type).toBe(db.config.type === 'postgres' ? 'postgres' : 'better-sqlite3');
    expect(await ds.showMigrations()).toBe(false);
  });

  describe('transcript seq', () => {
    it('is per conversation, monotonic and starts at 1 (two conversations interleaved)', async () => {
      expect(await transcript.latestSeq(conv('conv-a', null))).toBeNull();

      const order = ['conv-a', 'conv-b', 'conv-a', 'conv-a', 'conv-b', 'conv-c', 'conv-b', 'conv-a'];
      const written = await append(order.map((c, i) => transcriptRow(c, i % 2 === 0 ? null : 'th-1', `m${i}`)));

      expect(written.map((r) => [r.conversation_id, r.seq])).toEqual([
        ['conv-a', 1],
        ['conv-b', 1],
        ['conv-a', 2],
        ['conv-a', 3],
        ['conv-b', 2],
        ['conv-c', 1],
        ['conv-b', 3],
        ['conv-a', 4],
      ]);
      // latestSeq is per thread (null: the rows without a thread) over the conversation's sequence.
      expect(await transcript.latestSeq(conv('conv-a', null))).toBe(2);
      expect(await transcript.latestSeq(conv('conv-a', 'th-1'))).toBe(4);
      expect(await transcript.latestSeq(conv('conv-b', null))).toBe(3);
      expect(await transcript.latestSeq(conv('conv-b', 'th-1'))).toBe(1);
      expect(await transcript.latestSeq(conv('conv-c', 'th-1'))).toBe(1);
      expect(await transcript.latestSeq(conv('conv-c', null))).toBeNull();
      expect(await transcript.latestSeq(conv('conv-a', 'th-2'))).toBeNull();
      expect(await transcript.latestSeq(conv('conv-none', null))).toBeNull();

      const stored = await ds.getRepository(TranscriptEntity).find({ order: { id: 'ASC' } });
      expect(stored.map((r) => [r.conversation_id, r.seq, r.content])).toEqual(
        written.map((r) => [r.conversation_id, r.seq, r.content]),
      );
      // Threads share their conversation's sequence.
      expect(stored.filter((r) => r.conversation_id === 'conv-a').map((r) => [r.thread_id, r.seq])).toEqual([
        [null, 1],
        [null, 2],
        ['th-1', 3],
        ['th-1', 4],
      ]);
    });

    it('continues across admission (user row) and assistant rows, and the unique (conversation, seq) holds', async () => {
      await append([transcriptRow('conv-1', null, 'first')]);
      const r = runRow();
      const e = eventRow({ event_id: r.event_id, run_id: r.run_id });
      await admit(
        runs,
        e,
        r,
        logRow({ event_id: e.event_id, run_id: r.run_id }),
        transcriptRow('conv-1', null, 'second'),
      );
      // The assistant row is built by the service and written with the run's end.
      const assistant = transcript.assistantRow(
        {
          conversation_id: 'conv-1',
          thread_id: null,
          agent_id: 'agent-1',
          workspace_id: null,
          run_id: r.run_id,
          runner_id: 'acme/echo/echo',
        },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'third' },
            { type: 'image_base64', image_base64: 'QUJD' },
          ],
        },
      );
      await complete(runs, r.run_id, assistant);

      const page = await transcript.browse({ conversation_id: 'conv-1' }, { direction: 'forward' });
      expect(page.items.map((i) => [i.seq, i.role, i.content])).toEqual([
        [1, 'user', 'first'],
        [2, 'user', 'second'],
        [3, 'assistant', 'third'],
      ]);
      expect(page.items[2]).toMatchObject({
        run_id: r.run_id,
        metadata: { run_id: r.run_id, runner_id: 'acme/echo/echo' },
        content_json: {
          role: 'assistant',
          content: [
            { type: 'text', text: 'third' },
            { type: 'image_base64', image_base64: null, content_redacted: true },
          ],
        },
      });

      await expect(
        ds.getRepository(TranscriptEntity).insert({ ...transcriptRow('conv-1', null, 'dup'), seq: 2 }),
      ).rejects.toBeInstanceOf(QueryFailedError);
      expect(await transcript.latestSeq(conv('conv-1', null))).toBe(3);
    });
  });

  describe('RunsRepository.admit', () => {
    it('writes the event, the run, the event log row and the user transcript row in one go', async () => {
      const r = runRow();
      const e = eventRow({ event_id: r.event_id, run_id: r.run_id });
      const log = logRow({ event_id: e.event_id, run_id: r.run_id });
      const user = transcriptRow('conv-1', null, 'hello there', { event_id: e.event_id });

      expect(await admit(runs, e, r, log, user)).toMatchObject({ admitted: true, transcript_seq: 1 });

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
      expect(await context.getEvent(e.event_id)).toEqual({ ...log, id: expect.any(Number) });
      expect(await ds.getRepository(TranscriptEntity).find()).toEqual([{ ...user, id: expect.any(Number), seq: 1 }]);
    });

    it('writes none of the four when one insert fails (duplicate run_id), and consumes no seq', async () => {
      const existing = runRow();
      const existingEvent = eventRow({ event_id: existing.event_id, run_id: existing.run_id });
      await admit(
        runs,
        existingEvent,
        existing,
        logRow({ event_id: existingEvent.event_id, run_id: existing.run_id }),
        transcriptRow('conv-1', null, 'kept'),
      );

      const e = eventRow({ idempotency_key: 'idem-failed', run_id: existing.run_id });
      const dup = runRow({ run_id: existing.run_id, event_id: e.event_id });
      const failure = await driverError(
        admit(
          runs,
          e,
          dup,
          logRow({ event_id: e.event_id, run_id: dup.run_id }),
          transcriptRow('conv-1', null, 'lost', { event_id: e.event_id }),
        ),
      );
      expect(failure.code).toMatch(UNIQUE_VIOLATION);

      expect(await runs.getEvent(e.event_id)).toBeNull();
      expect(await runs.getEventByIdempotencyKey('idem-failed')).toBeNull();
      expect(await context.getEvent(e.event_id)).toBeNull();
      expect(await ds.getRepository(EventEntity).count()).toBe(1);
      expect(await ds.getRepository(RunEntity).count()).toBe(1);
      expect(await ds.getRepository(EventLogEntity).count()).toBe(1);
      expect((await ds.getRepository(TranscriptEntity).find()).map((t) => t.content)).toEqual(['kept']);
      expect(await transcript.latestSeq(conv('conv-1', null))).toBe(1);
      expect((await context.appendTranscript(transcriptRow('conv-1', null, 'next'))).seq).toBe(2);
    });

    it('writes none of the four when the last write (the user transcript row) fails', async () => {
      const r = runRow();
      const e = eventRow({ event_id: r.event_id, run_id: r.run_id });
      // role is NOT NULL on every dialect: the user row is the last write of the transaction.
      const broken = { ...transcriptRow('conv-1', null, 'broken'), role: null } as unknown as NewTranscriptRow;

      const failure = await driverError(admit(runs, e, r, logRow({ event_id: e.event_id }), broken));
      expect(failure.code).toMatch(NOT_NULL_VIOLATION);

      expect(await runs.getEvent(e.event_id)).toBeNull();
      expect(await runs.get(r.run_id)).toBeNull();
      expect(await context.getEvent(e.event_id)).toBeNull();
      expect(await ds.getRepository(TranscriptEntity).count()).toBe(0);
    });
  });

  describe('TranscriptService.page', () => {
    /** conv-1: seq 1..9, threads null/null/t1 repeating; conv-2: two rows. */
    async function seed(): Promise<void> {
      const rows: NewTranscriptRow[] = [];
      for (let i = 1; i <= 9; i++) {
        rows.push(
          transcriptRow('conv-1', i % 3 === 0 ? 't1' : null, `message ${i}`, {
            created_at: T0 + i * 1000 + 999,
          }),
        );
        if (i === 4 || i === 7) {
          rows.push(transcriptRow('conv-2', null, `other ${i}`));
        }
      }
      await append(rows);
    }
    const seqs = (page: { items: Array<{ seq: number }> }) => page.items.map((i) => i.seq);

    it('backward (default) walks newest first with before_cursor', async () => {
      await seed();

      const first = await transcript.browse({ conversation_id: 'conv-1' }, { limit: 4 });
      expect(seqs(first)).toEqual([9, 8, 7, 6]);
      expect(first).toMatchObject({ has_more: true, next_cursor: '6', prev_cursor: '9' });

      const second = await transcript.browse(
        { conversation_id: 'conv-1' },
        { limit: 4, before_cursor: first.next_cursor! },
      );
      expect(seqs(second)).toEqual([5, 4, 3, 2]);
      expect(second).toMatchObject({ has_more: true, next_cursor: '2', prev_cursor: '5' });

      const third = await transcript.browse(
        { conversation_id: 'conv-1' },
        { limit: 4, before_cursor: second.next_cursor! },
      );
      expect(seqs(third)).toEqual([1]);
      expect(third).toMatchObject({ has_more: false, next_cursor: null, prev_cursor: '1' });

      const empty = await transcript.browse({ conversation_id: 'conv-1' }, { limit: 4, before_cursor: '1' });
      expect(empty).toEqual({ items: [], has_more: false, next_cursor: null, prev_cursor: null });

      // Exactly `limit` rows left: no more.
      const exact = await transcript.browse({ conversation_id: 'conv-1' }, { limit: 5, before_cursor: '6' });
      expect(seqs(exact)).toEqual([5, 4, 3, 2, 1]);
      expect(exact.has_more).toBe(false);
    });

    it('forward walks oldest first with after_cursor', async () => {
      await seed();

      const first = await transcript.browse({ conversation_id: 'conv-1' }, { direction: 'forward', limit: 4 });
      expect(seqs(first)).toEqual([1, 2, 3, 4]);
      expect(first).toMatchObject({ has_more: true, next_cursor: '4', prev_cursor: '1' });

      const second = await transcript.browse(
        { conversation_id: 'conv-1' },
        {
          direction: 'forward',
          limit: 4,
          after_cursor: first.next_cursor!,
        },
      );
      expect(seqs(second)).toEqual([5, 6, 7, 8]);
      const third = await transcript.browse(
        { conversation_id: 'conv-1' },
        {
          direction: 'forward',
          limit: 4,
          after_cursor: second.next_cursor!,
        },
      );
      expect(seqs(third)).toEqual([9]);
      expect(third).toMatchObject({ has_more: false, next_cursor: null });

      // Both bounds: a window.
      const window = await transcript.browse(
        { conversation_id: 'conv-1' },
        {
          direction: 'forward',
          after_cursor: '2',
          before_cursor: '6',
        },
      );
      expect(seqs(window)).toEqual([3, 4, 5]);
    });

    it('maps rows to items (cursor = seq, created_at in seconds, attachments only on request)', async () => {
      await seed();

      const [item] = (await transcript.browse({ conversation_id: 'conv-1' }, { limit: 1 })).items;
      const row = (await ds.getRepository(TranscriptEntity).findOneBy({ conversation_id: 'conv-1', seq: 9 }))!;
      expect(item).toEqual({
        transcript_id: String(row.id),
        event_id: row.event_id,
        conversation_id: 'conv-1',
        thread_id: 't1',
        agent_id: 'agent-1',
        workspace_id: null,
        role: 'user',
        item_type: 'message',
        content: 'message 9',
        content_json: { role: 'user', content: 'message 9' },
        attachment_refs: [],
        seq: 9,
        cursor: '9',
        created_at: Math.floor((T0 + 9999) / 1000),
        metadata: { actor_id: 'u1' },
        run_id: null,
      });
      const [withAttachments] = (
        await transcript.browse({ conversation_id: 'conv-1' }, { limit: 1, include_attachments: true })
      ).items;
      expect(withAttachments.attachment_refs).toEqual([{ type: 'file', name: 'a.txt', content: null }]);
    });

    it('matches threads strictly: a thread only its rows, null only rows without a thread', async () => {
      await seed();

      expect(seqs(await transcript.page(conv('conv-1', 't1'), {}))).toEqual([9, 6, 3]);
      expect(seqs(await transcript.page(conv('conv-1', null), {}))).toEqual([8, 7, 5, 4, 2, 1]);
      expect(seqs(await transcript.browse({ conversation_id: 'conv-1' }, {}))).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1]);
      expect(seqs(await transcript.page(conv('conv-1', 't2'), {}))).toEqual([]);
      expect(seqs(await transcript.page(conv('conv-1', ''), {}))).toEqual([]);
      // Cursors combine with the thread filter.
      expect(seqs(await transcript.page(conv('conv-1', null), { limit: 2, before_cursor: '7' }))).toEqual([5, 4]);
      expect(seqs(await transcript.page(conv('conv-2', null), {}))).toEqual([2, 1]);
      expect(seqs(await transcript.page(conv('conv-3', null), {}))).toEqual([]);
    });

    it('defaults the limit to 50 and caps it at 100', async () => {
      await bulkTranscript(
        'conv-big',
        Array.from({ length: 130 }, (_, i) => `row ${i + 1}`),
      );

      const capped = await transcript.browse({ conversation_id: 'conv-big' }, { limit: 1000 });
      expect(capped.items).toHaveLength(100);
      expect(capped).toMatchObject({ has_more: true, next_cursor: '31', prev_cursor: '130' });
      expect(await transcript.browse({ conversation_id: 'conv-big' }, { limit: 100 })).toEqual(capped);

      const rest = await transcript.browse(
        { conversation_id: 'conv-big' },
        { limit: 1000, before_cursor: capped.next_cursor! },
      );
      expect(seqs(rest)).toEqual(Array.from({ length: 30 }, (_, i) => 30 - i));
      expect(rest.has_more).toBe(false);

      for (const limit of [undefined, 0]) {
        const page = await transcript.browse({ conversation_id: 'conv-big' }, { limit });
        expect(page.items).toHaveLength(50);
        expect(page.has_more).toBe(true);
      }
      expect((await transcript.browse({ conversation_id: 'conv-big' }, { limit: 1 })).items).toHaveLength(1);
    });

    it('rejects invalid cursors, limits and directions with invalid_argument', async () => {
      await seed();

      for (const cursor of ['abc', '-1', '1.5', '1e3', ' 3', '0x10', '1234567890123456']) {
        expect(
          await domainError(transcript.browse({ conversation_id: 'conv-1' }, { before_cursor: cursor })),
        ).toMatchObject({
          code: 'invalid_argument',
          details: { field: 'before_cursor' },
        });
        expect(
          await domainError(
            transcript.browse({ conversation_id: 'conv-1' }, { direction: 'forward', after_cursor: cursor }),
          ),
        ).toMatchObject({ code: 'invalid_argument', details: { field: 'after_cursor' } });
      }
      for (const limit of [-1, 1.5, Number.NaN]) {
        expect(await domainError(transcript.browse({ conversation_id: 'conv-1' }, { limit }))).toMatchObject({
          code: 'invalid_argument',
          details: { field: 'limit' },
        });
      }
      expect(
        await domainError(transcript.browse({ conversation_id: 'conv-1' }, { direction: 'sideways' })),
      ).toMatchObject({
        code: 'invalid_argument',
        details: { field: 'direction' },
      });
      // An empty cursor is no cursor.
      expect(seqs(await transcript.browse({ conversation_id: 'conv-1' }, { before_cursor: '', limit: 1 }))).toEqual([
        9,
      ]);
    });
  });

  describe('TranscriptService.search', () => {
    async function seed(): Promise<Record<string, number>> {
      const rows = await append([
        transcriptRow('conv-1', null, 'The quick brown fox jumps'),
        transcriptRow('conv-1', null, 'A lazy dog sleeps all day'),
        transcriptRow('conv-1', 't1', 'The fox hides in the thread'),
        transcriptRow('conv-2', null, 'Another conversation mentions a fox'),
        transcriptRow('conv-1', null, 'FOX again, shouting this time'),
        transcriptRow('conv-1', null, 'Nothing to see here'),
      ]);
      return Object.fromEntries(rows.map((r) => [r.content, r.seq]));
    }
    const contents = (result: { items: Array<{ content: string }> }) => result.items.map((i) => i.content);

    it('finds rows by word, case-insensitively, newest first', async () => {
      await seed();

      const result = await transcript.search(conv('conv-1', null), 'fox', undefined);
      expect(contents(result)).toEqual(['FOX again, shouting this time', 'The quick brown fox jumps']);
      expect(result.total_count).toBe(2);
      expect(result.query).toBe('fox');
      expect(result.items.map((i) => i.seq)).toEqual([4, 1]);
      expect(contents(await transcript.search(conv('conv-1', null), 'LAZY', undefined))).toEqual([
        'A lazy dog sleeps all day',
      ]);
      // Every word must match.
      expect(contents(await transcript.search(conv('conv-1', null), 'quick fox', undefined))).toEqual([
        'The quick brown fox jumps',
      ]);
      expect(await transcript.search(conv('conv-1', null), 'quick dog', undefined)).toMatchObject({
        items: [],
        total_count: 0,
      });
      expect(contents(await transcript.search(conv('conv-1', null), 'elephant', undefined))).toEqual([]);
    });

    it('is scoped to the conversation and, strictly, to the thread', async () => {
      await seed();

      expect(contents(await transcript.search(conv('conv-1', 't1'), 'fox', undefined))).toEqual([
        'The fox hides in the thread',
      ]);
      expect(contents(await transcript.search(conv('conv-2', null), 'fox', undefined))).toEqual([
        'Another conversation mentions a fox',
      ]);
      expect(contents(await transcript.search(conv('conv-1', null), 'thread', undefined))).toEqual([]);
      expect(contents(await transcript.search(conv('conv-1', null), 'conversation', undefined))).toEqual([]);
      expect(contents(await transcript.search(conv('conv-1', 't2'), 'fox', undefined))).toEqual([]);
      expect(contents(await transcript.search(conv('conv-3', null), 'fox', undefined))).toEqual([]);
    });

    it('finds rows appended through admission and assistant rows (the index follows every insert)', async () => {
      const r = runRow();
      const e = eventRow({ event_id: r.event_id, run_id: r.run_id });
      await admit(runs, e, r, logRow({ event_id: e.event_id }), transcriptRow('conv-1', null, 'question about zebras'));
      const assistant = transcript.assistantRow(
        {
          conversation_id: 'conv-1',
          thread_id: null,
          agent_id: 'agent-1',
          workspace_id: null,
          run_id: r.run_id,
          runner_id: 'acme/echo/echo',
        },
        { role: 'assistant', content: 'zebras have stripes' },
      );
      await complete(runs, r.run_id, assistant);

      expect(contents(await transcript.search(conv('conv-1', null), 'zebras', undefined))).toEqual([
        'zebras have stripes',
        'question about zebras',
      ]);
      expect(contents(await transcript.search(conv('conv-1', null), 'stripes', undefined))).toEqual([
        'zebras have stripes',
      ]);
    });

    it('no longer finds deleted rows', async () => {
      await seed();
      await ds.getRepository(TranscriptEntity).delete({ conversation_id: 'conv-1', seq: 1 });

      expect(contents(await transcript.search(conv('conv-1', null), 'fox', undefined))).toEqual([
        'FOX again, shouting this time',
      ]);
      expect(contents(await transcript.search(conv('conv-1', null), 'quick', undefined))).toEqual([]);
    });

    it('caps top_k: default 10, at most 100', async () => {
      await bulkTranscript(
        'conv-big',
        Array.from({ length: 120 }, (_, i) => `needle number ${i + 1}`),
      );

      const byDefault = await transcript.search(conv('conv-big', null), 'needle', undefined);
      expect(byDefault.items.map((i) => i.seq)).toEqual(Array.from({ length: 10 }, (_, i) => 120 - i));
      expect((await transcript.search(conv('conv-big', null), 'needle', 0)).items).toHaveLength(10);
      expect((await transcript.search(conv('conv-big', null), 'needle', 3)).items.map((i) => i.seq)).toEqual([
        120, 119, 118,
      ]);
      const capped = await transcript.search(conv('conv-big', null), 'needle', 1000);
      expect(capped.items.map((i) => i.seq)).toEqual(Array.from({ length: 100 }, (_, i) => 120 - i));
      expect(capped.total_count).toBe(100);
      expect(await domainError(transcript.search(conv('conv-big', null), 'needle', -5))).toMatchObject({
        code: 'invalid_argument',
      });
    });

    it('treats FTS syntax in user text as plain words, never as an error', async () => {
      await seed();
      await append([
        transcriptRow('conv-1', null, 'near the river, not near the sea'),
        transcriptRow('conv-1', null, 'and or not: column x'),
      ]);

      const queries: Array<[string, string[]]> = [
        ['"fox"', ['FOX again, shouting this time', 'The quick brown fox jumps']],
        ['"fox', ['FOX again, shouting this time', 'The quick brown fox jumps']],
        ["fox's", []],
        ['fox*', ['FOX again, shouting this time', 'The quick brown fox jumps']],
        ['fo*', []],
        ['-fox', ['FOX again, shouting this time', 'The quick brown fox jumps']],
        ['(fox)', ['FOX again, shouting this time', 'The quick brown fox jumps']],
        ['(fox', ['FOX again, shouting this time', 'The quick brown fox jumps']],
        ['fox)', ['FOX again, shouting this time', 'The quick brown fox jumps']],
        ['quick -brown', ['The quick brown fox jumps']],
        ['NEAR(quick fox)', []],
        ['near river', ['near the river, not near the sea']],
        ['NEAR', ['near the river, not near the sea']],
        ['fox OR dog', []],
        ['fox AND quick', []],
        ['NOT', ['and or not: column x', 'near the river, not near the sea']],
        ['column:x', ['and or not: column x']],
        ['content:fox', []],
        ['^fox', ['FOX again, shouting this time', 'The quick brown fox jumps']],
        ['fox + quick', ['The quick brown fox jumps']],
        ['{fox}', ['FOX again, shouting this time', 'The quick brown fox jumps']],
        ["'; DROP TABLE transcript; --", []],
        ['"', []],
        ['*', []],
        ['()', []],
        ['-', []],
        ['!!! ???', []],
        ['fox & | ! <-> :*', ['FOX again, shouting this time', 'The quick brown fox jumps']],
      ];
      for (const [query, expected] of queries) {
        const result = await transcript.search(conv('conv-1', null), query, undefined);
        expect({ query, found: contents(result) }).toEqual({ query, found: expected });
      }
      // The table is still there and intact.
      expect(await ds.getRepository(TranscriptEntity).count()).toBe(8);
    });

    it('rejects an empty or over-long query with invalid_argument', async () => {
      for (const query of ['', '   ', 'x'.repeat(1001)]) {
        expect(await domainError(transcript.search(conv('conv-1', null), query, undefined))).toMatchObject({
          code: 'invalid_argument',
          details: { field: 'query' },
        });
      }
      expect((await transcript.search(conv('conv-1', null), 'x'.repeat(1000), undefined)).items).toEqual([]);
    });
  });

  describe('event log', () => {
    /** conv-1 (null thread): 6 events of two types; one in thread t1; one in conv-2. */
    async function seed(): Promise<NewLogRow[]> {
      const rows = [
        logRow({ event_type: 'message.received', input_summary: 'e1' }),
        logRow({ event_type: 'reaction.added', input_summary: 'e2' }),
        logRow({ event_type: 'message.received', input_summary: 'e3', thread_id: 't1' }),
        logRow({ event_type: 'message.received', input_summary: 'e4' }),
        logRow({ event_type: 'message.received', input_summary: 'e5', conversation_id: 'conv-2' }),
        logRow({ event_type: 'reaction.added', input_summary: 'e6' }),
        logRow({ event_type: 'member.joined', input_summary: 'e7' }),
        logRow({ event_type: 'message.received', input_summary: 'e8' }),
      ];
      for (const row of rows) {
        await context.appendEvent(row);
      }
      return rows;
    }
    const summaries = (page: { items: Array<{ input_summary: string }> }) => page.items.map((i) => i.input_summary);

    it('pages newest first, walking back with the before cursor', async () => {
      await seed();

      const first = await eventLog.page(conv('conv-1', null, 'ws-1'), [], undefined, 2);
      expect(summaries(first)).toEqual(['e8', 'e7']);
      expect(first.has_more).toBe(true);
      expect(first.next_cursor).toBe(first.items[1].cursor);

      const second = await eventLog.page(conv('conv-1', null, 'ws-1'), [], first.next_cursor!, 2);
      expect(summaries(second)).toEqual(['e6', 'e4']);
      const third = await eventLog.page(conv('conv-1', null, 'ws-1'), [], second.next_cursor!, 2);
      expect(summaries(third)).toEqual(['e2', 'e1']);
      expect(third).toMatchObject({ has_more: false, next_cursor: null });

      const ids = [...first.items, ...second.items, ...third.items].map((i) => i.seq);
      expect([...ids].sort((a, b) => b - a)).toEqual(ids);
      expect(summaries(await eventLog.page(conv('conv-1', null, 'ws-1'), [], undefined, undefined))).toEqual([
        'e8',
        'e7',
        'e6',
        'e4',
        'e2',
        'e1',
      ]);
    });

    it('filters by event types, and combines the filter with the cursor and the thread', async () => {
      await seed();

      expect(summaries(await eventLog.page(conv('conv-1', null, 'ws-1'), ['message.received'], undefined, 10))).toEqual(
        ['e8', 'e4', 'e1'],
      );
      expect(
        summaries(
          await eventLog.page(conv('conv-1', null, 'ws-1'), ['reaction.added', 'member.joined'], undefined, 10),
        ),
      ).toEqual(['e7', 'e6', 'e2']);
      const [newest] = (await eventLog.page(conv('conv-1', null, 'ws-1'), ['message.received'], undefined, 1)).items;
      expect(
        summaries(await eventLog.page(conv('conv-1', null, 'ws-1'), ['message.received'], newest.cursor, 10)),
      ).toEqual(['e4', 'e1']);
      expect(summaries(await eventLog.page(conv('conv-1', 't1', 'ws-1'), [], undefined, 10))).toEqual(['e3']);
      expect(summaries(await eventLog.page(conv('conv-1', 't1', 'ws-1'), ['reaction.added'], undefined, 10))).toEqual(
        [],
      );
      expect(summaries(await eventLog.page(conv('conv-2', null, 'ws-1'), [], undefined, 10))).toEqual(['e5']);
      expect(summaries(await eventLog.page(conv('conv-1', null, 'ws-1'), ['no.such.type'], undefined, 10))).toEqual([]);
    });

    it('maps rows to records and gets one event by id', async () => {
      const rows = await seed();

      const [record] = (await eventLog.page(conv('conv-1', null, 'ws-1'), [], undefined, 1)).items;
      const stored = await eventLog.get(rows[7].event_id);
      expect(stored).toEqual({ ...rows[7], id: expect.any(Number) });
      expect(record).toEqual({
        event_id: rows[7].event_id,
        event_type: 'message.received',
        event_time: 1_764_600_000,
        source: 'platform',
        bot_id: 'bot-1',
        workspace_id: 'ws-1',
        conversation_id: 'conv-1',
        thread_id: null,
        actor_type: 'user',
        actor_id: 'u1',
        actor_name: 'Ada',
        subject_type: null,
        subject_id: null,
        input_summary: 'e8',
        input_ref: null,
        raw_ref: null,
        seq: stored!.id,
        cursor: String(stored!.id),
        created_at: Math.floor(T0 / 1000),
        metadata: { input: { text: 'hello' } },
        run_id: null,
      });
      expect(await eventLog.get('evt-missing')).toBeNull();
    });

    it('get returns the first row of an event logged more than once (a retried admission)', async () => {
      const first = logRow({ input_summary: 'attempt 1', run_id: 'run-1' });
      await context.appendEvent({ ...first });
      await context.appendEvent({ ...first, input_summary: 'attempt 2', run_id: 'run-2' });

      expect(await eventLog.get(first.event_id)).toMatchObject({ input_summary: 'attempt 1', run_id: 'run-1' });
    });

    it('rejects an invalid cursor or limit with invalid_argument', async () => {
      await seed();
      for (const cursor of ['x', '-2', '2.5']) {
        expect(await domainError(eventLog.page(conv('conv-1', null, 'ws-1'), [], cursor, 10))).toMatchObject({
          code: 'invalid_argument',
          details: { field: 'before_cursor' },
        });
      }
      expect(await domainError(eventLog.page(conv('conv-1', null, 'ws-1'), [], undefined, -1))).toMatchObject({
        code: 'invalid_argument',
        details: { field: 'limit' },
      });
    });

    it('caps the page at 100', async () => {
      await ds
        .getRepository(EventLogEntity)
        .insert(Array.from({ length: 105 }, (_, i) => logRow({ input_summary: `e${i}` })));

      const page = await eventLog.page(conv('conv-1', null, 'ws-1'), [], undefined, 500);
      expect(page.items).toHaveLength(100);
      expect(page.has_more).toBe(true);
      expect(summaries(await eventLog.page(conv('conv-1', null, 'ws-1'), [], page.next_cursor!, 500))).toEqual([
        'e4',
        'e3',
        'e2',
        'e1',
        'e0',
      ]);
    });
  });

  describe('conversation scope (agent + workspace + conversation id + thread)', () => {
    // Three conversations that share the id "shared": agent-1 in tenant-1, agent-2 in tenant-2,
    // agent-1 in tenant-2; and agent-1 without a workspace.
    const A = conv('shared', null, 'tenant-1', 'agent-1');
    const B = conv('shared', null, 'tenant-2', 'agent-2');
    const C = conv('shared', null, 'tenant-2', 'agent-1');
    const D = conv('shared', null, null, 'agent-1');
    const row = (c: ConversationScope, text: string) =>
      transcriptRow(c.conversation_id, c.thread_id, text, { agent_id: c.agent_id, workspace_id: c.workspace_id });
    const log = (c: ConversationScope, summary: string) =>
      logRow({
        agent_id: c.agent_id,
        workspace_id: c.workspace_id,
        conversation_id: c.conversation_id,
        input_summary: summary,
      });
    const contents = (page: { items: Array<{ content: string }> }) => page.items.map((i) => i.content);

    async function seed(): Promise<void> {
      await append([row(A, 'alpha secret one'), row(B, 'beta secret one'), row(A, 'alpha secret two')]);
      await append([row(C, 'gamma secret'), row(D, 'delta secret')]);
      for (const [c, text] of [
        [A, 'a1'],
        [B, 'b1'],
        [C, 'c1'],
        [A, 'a2'],
        [D, 'd1'],
      ] as const) {
        await context.appendEvent(log(c, text));
      }
    }

    it('pages, searches and counts only the rows of its own conversation', async () => {
      await seed();
      expect(contents(await transcript.page(A, { direction: 'forward' }))).toEqual([
        'alpha secret one',
        'alpha secret two',
      ]);
      expect(contents(await transcript.page(B, {}))).toEqual(['beta secret one']);
      expect(contents(await transcript.page(C, {}))).toEqual(['gamma secret']);
      expect(contents(await transcript.page(D, {}))).toEqual(['delta secret']);
      expect(contents(await transcript.page(conv('shared', null, 'tenant-1', 'agent-2'), {}))).toEqual([]);

      expect(contents(await transcript.search(A, 'secret', undefined))).toEqual([
        'alpha secret two',
        'alpha secret one',
      ]);
      expect(contents(await transcript.search(B, 'secret', undefined))).toEqual(['beta secret one']);
      expect(contents(await transcript.search(B, 'alpha', undefined))).toEqual([]);
      expect(contents(await transcript.search(D, 'secret', undefined))).toEqual(['delta secret']);

      // seq is one cursor space per conversation id: each conversation's latest is its own row's.
      expect(await transcript.latestSeq(A)).toBe(3);
      expect(await transcript.latestSeq(B)).toBe(2);
      expect(await transcript.latestSeq(C)).toBe(4);
      expect(await transcript.latestSeq(D)).toBe(5);
      expect(await transcript.latestSeq(conv('shared', null, 'tenant-3', 'agent-1'))).toBeNull();

      const summaries = async (c: ConversationScope) =>
        (await eventLog.page(c, [], undefined, 10)).items.map((i) => i.input_summary);
      expect(await summaries(A)).toEqual(['a2', 'a1']);
      expect(await summaries(B)).toEqual(['b1']);
      expect(await summaries(C)).toEqual(['c1']);
      expect(await summaries(D)).toEqual(['d1']);
    });

    it('a cursor of one conversation never reaches into another', async () => {
      await seed();
      const first = await transcript.page(A, { limit: 1 });
      expect(contents(first)).toEqual(['alpha secret two']);
      expect(contents(await transcript.page(A, { limit: 1, before_cursor: first.next_cursor! }))).toEqual([
        'alpha secret one',
      ]);
      // B's rows sit between A's seqs: walking A's cursor back never shows them.
      expect(contents(await transcript.page(A, { before_cursor: '3' }))).toEqual(['alpha secret one']);
    });

    it('the admin view sees every agent and workspace unless narrowed', async () => {
      await seed();
      const all = await transcript.browse({ conversation_id: 'shared' }, { direction: 'forward' });
      expect(all.items.map((i) => [i.agent_id, i.workspace_id, i.content])).toEqual([
        ['agent-1', 'tenant-1', 'alpha secret one'],
        ['agent-2', 'tenant-2', 'beta secret one'],
        ['agent-1', 'tenant-1', 'alpha secret two'],
        ['agent-1', 'tenant-2', 'gamma secret'],
        ['agent-1', null, 'delta secret'],
      ]);
      expect(contents(await transcript.browse({ conversation_id: 'shared', agent_id: 'agent-2' }, {}))).toEqual([
        'beta secret one',
      ]);
      expect(contents(await transcript.browse({ conversation_id: 'shared', workspace_id: 'tenant-2' }, {}))).toEqual([
        'gamma secret',
        'beta secret one',
      ]);
      expect(
        contents(await transcript.browse({ conversation_id: 'shared', agent_id: 'agent-1', workspace_id: null }, {})),
      ).toEqual(['delta secret']);
    });

    it('no conversation: the request is still checked, and the pages are empty', async () => {
      await seed();
      expect(await transcript.page(null, {})).toEqual({
        items: [],
        has_more: false,
        next_cursor: null,
        prev_cursor: null,
      });
      expect(await transcript.search(null, 'secret', undefined)).toEqual({
        items: [],
        total_count: 0,
        query: 'secret',
      });
      expect(await eventLog.page(null, [], undefined, undefined)).toEqual({
        items: [],
        has_more: false,
        next_cursor: null,
      });
      expect(await domainError(transcript.page(null, { limit: -1 }))).toMatchObject({ details: { field: 'limit' } });
      expect(await domainError(eventLog.page(null, [], 'x', 10))).toMatchObject({
        details: { field: 'before_cursor' },
      });
    });
  });

  describe('StateService', () => {
    const keys = scopeKeysOf({ subject_id: 'doc-1', subject_type: 'document' });

    it('has a key per enabled scope with an identity', () => {
      expect(Object.keys(keys).sort()).toEqual(['actor', 'conversation', 'runner', 'subject']);
      expect(new Set(Object.values(keys)).size).toBe(4);
    });

    it('sets, gets, overwrites and deletes JSON values through a scope', async () => {
      const values: unknown[] = [
        { nested: { list: [1, 'two', null, true], unicode: 'héllo — 你好 — 🚀' } },
        ['a', 1],
        'plain string',
        42.5,
        false,
      ];
      for (const [i, value] of values.entries()) {
        await state.set(keys, 'conversation', `k${i}`, value);
      }
      for (const [i, value] of values.entries()) {
        expect(await state.get(keys, 'conversation', `k${i}`)).toEqual(value);
      }
      expect(await state.get(keys, 'conversation', 'missing')).toBeNull();

      await state.set(keys, 'conversation', 'k0', { replaced: true });
      expect(await state.get(keys, 'conversation', 'k0')).toEqual({ replaced: true });
      expect(await ds.getRepository(StateEntryEntity).countBy({ state_key: 'k0' })).toBe(1);

      expect(await state.delete(keys, 'conversation', 'k0')).toBe(true);
      expect(await state.delete(keys, 'conversation', 'k0')).toBe(false);
      expect(await state.get(keys, 'conversation', 'k0')).toBeNull();
      expect(await state.delete(keys, 'conversation', 'never-set')).toBe(false);
    });

    it('accepts a value of exactly 256 KiB of JSON and rejects one byte more, storing nothing', async () => {
      const exact = 'x'.repeat(KIB_256 - 2); // JSON adds the two quotes
      expect(Buffer.byteLength(JSON.stringify(exact))).toBe(262_144);
      await state.set(keys, 'actor', 'big', exact);
      expect(await state.get(keys, 'actor', 'big')).toBe(exact);

      const over = `${exact}x`;
      const error = await domainError(state.set(keys, 'actor', 'big', over));
      expect(error).toMatchObject({
        code: 'payload_too_large',
        details: { field: 'value', limit: KIB_256 },
      });
      expect(error.message).toContain('262145');
      // The previous value is untouched, and a new key is not created.
      expect(await state.get(keys, 'actor', 'big')).toBe(exact);
      expect((await domainError(state.set(keys, 'actor', 'other', over))).code).toBe('payload_too_large');
      expect(await state.get(keys, 'actor', 'other')).toBeNull();
      expect(await ds.getRepository(StateEntryEntity).count()).toBe(1);
    });

    it('measures the limit in UTF-8 bytes, not characters', async () => {
      const twoByte = 'é'.repeat((KIB_256 - 2) / 2);
      expect(Buffer.byteLength(JSON.stringify(twoByte))).toBe(262_144);
      await state.set(keys, 'runner', 'accents', twoByte);
      expect(await state.get(keys, 'runner', 'accents')).toBe(twoByte);

      const oneMore = `${twoByte}a`; // 131_072 characters, 262_145 bytes
      expect((await domainError(state.set(keys, 'runner', 'accents-2', oneMore))).code).toBe('payload_too_large');
      expect(await state.get(keys, 'runner', 'accents-2')).toBeNull();
    });

    it('stores conversation_id under its alias external.conversation_id', async () => {
      await state.set(keys, 'conversation', 'conversation_id', 'platform-conv-9');

      expect(await state.get(keys, 'conversation', 'external.conversation_id')).toBe('platform-conv-9');
      expect(await state.get(keys, 'conversation', 'conversation_id')).toBe('platform-conv-9');
      expect((await state.list(keys, 'conversation', undefined, undefined)).keys).toEqual(['external.conversation_id']);
      expect((await state.snapshot(keys, 'conv-1')).conversation).toEqual({
        'external.conversation_id': 'platform-conv-9',
      });
      expect(await state.delete(keys, 'conversation', 'conversation_id')).toBe(true);
      expect(await state.get(keys, 'conversation', 'external.conversation_id')).toBeNull();
    });

    it('lists keys by a literal prefix (% and _ are not wildcards), in order', async () => {
      const stored = ['a%b', 'a%c', 'a_b', 'axb', 'abc', 'a\\b', 'a\\c', 'b%', 'ab', 'A%b'];
      for (const k of stored) {
        await state.set(keys, 'runner', k, 1);
      }

      const list = async (prefix: string | undefined) => (await state.list(keys, 'runner', prefix, undefined)).keys;
      expect(await list('a%')).toEqual(['a%b', 'a%c']);
      expect(await list('a_')).toEqual(['a_b']);
      expect(await list('a\\')).toEqual(['a\\b', 'a\\c']);
      expect(await list('%')).toEqual([]);
      expect(await list('_')).toEqual([]);
      expect(await list('ab')).toEqual(['ab', 'abc']);
      expect(await list('A')).toEqual(['A%b']);
      expect(await list('b%')).toEqual(['b%']);
      expect(await list('zzz')).toEqual([]);
      expect(await list(undefined)).toEqual([...stored].sort());
      expect(await list('')).toEqual([...stored].sort());
    });

    it('pages the list at 100 with has_more', async () => {
      const all = Array.from({ length: 101 }, (_, i) => `key-${String(i).padStart(3, '0')}`);
      for (const k of all.slice(0, 100)) {
        await state.set(keys, 'subject', k, true);
      }

      expect(await state.list(keys, 'subject', undefined, undefined)).toEqual({
        keys: all.slice(0, 100),
        has_more: false,
      });
      await state.set(keys, 'subject', all[100], true);
      expect(await state.list(keys, 'subject', undefined, undefined)).toEqual({
        keys: all.slice(0, 100),
        has_more: true,
      });
      expect(await state.list(keys, 'subject', undefined, 1000)).toEqual({ keys: all.slice(0, 100), has_more: true });
      expect(await state.list(keys, 'subject', undefined, 0)).toEqual({ keys: all.slice(0, 100), has_more: true });
      expect(await state.list(keys, 'subject', undefined, 5)).toEqual({ keys: all.slice(0, 5), has_more: true });
      expect(await state.list(keys, 'subject', 'key-10', undefined)).toEqual({
        keys: ['key-100'],
        has_more: false,
      });
    });

    it('isolates scopes, agents, runners, conversations, threads and actors from each other', async () => {
      const subject = { subject_id: 'doc-1', subject_type: 'document' };
      const ALL = ['conversation', 'actor', 'subject', 'runner'] as const;
      // [label, the other run's keys, the scopes whose state it must NOT see]
      const others: Array<[string, ScopeKeys, readonly string[]]> = [
        ['another agent', scopeKeysOf({ ...subject, agent_id: 'agent-2' }), ALL],
        ['another runner', scopeKeysOf({ ...subject, runner_id: 'acme/echo/other' }), ALL],
        ['another conversation', scopeKeysOf({ ...subject, conversation_id: 'conv-2' }), ['conversation']],
        ['another thread', scopeKeysOf({ ...subject, thread_id: 't9' }), ['conversation']],
        ['another actor', scopeKeysOf({ ...subject, actor_id: 'u2' }), ['actor']],
        ['another subject', scopeKeysOf({ subject_id: 'doc-2', subject_type: 'document' }), ['subject']],
      ];
      for (const scope of ALL) {
        await state.set(keys, scope, 'shared', `mine:${scope}`);
      }

      for (const [label, other, isolated] of others) {
        for (const scope of ALL) {
          const seen = await state.get(other, scope, 'shared');
          const expected = isolated.includes(scope) ? null : `mine:${scope}`;
          expect({ label, scope, seen }).toEqual({ label, scope, seen: expected });
        }
      }
      // Each scope of one run is its own namespace.
      for (const scope of ['conversation', 'actor', 'subject', 'runner']) {
        expect(await state.get(keys, scope, 'shared')).toBe(`mine:${scope}`);
      }
      const agent2 = others[0][1];
      await state.set(agent2, 'conversation', 'shared', 'theirs');
      expect(await state.get(keys, 'conversation', 'shared')).toBe('mine:conversation');
      expect(await state.delete(agent2, 'conversation', 'shared')).toBe(true);
      expect(await state.get(keys, 'conversation', 'shared')).toBe('mine:conversation');
      expect((await state.list(agent2, 'conversation', undefined, undefined)).keys).toEqual([]);
    });

    it('snapshot returns every enabled scope and seeds external.conversation_id', async () => {
      await state.set(keys, 'conversation', 'topic', 'billing');
      await state.set(keys, 'actor', 'lang', 'fr');
      await state.set(keys, 'runner', 'counter', 3);
      await state.set(scopeKeysOf({ agent_id: 'agent-2' }), 'actor', 'lang', 'de');

      expect(await state.snapshot(keys, 'conv-1')).toEqual({
        conversation: { topic: 'billing', 'external.conversation_id': 'conv-1' },
        actor: { lang: 'fr' },
        subject: {},
        runner: { counter: 3 },
      });
      // Only the scopes in the keys; no seed without a conversation scope or id.
      const { conversation: _c, ...withoutConversation } = keys;
      expect(await state.snapshot(withoutConversation, 'conv-1')).toEqual({
        conversation: {},
        actor: { lang: 'fr' },
        subject: {},
        runner: { counter: 3 },
      });
      expect((await state.snapshot(keys, null)).conversation).toEqual({ topic: 'billing' });
      expect(await state.snapshot({}, 'conv-1')).toEqual({ conversation: {}, actor: {}, subject: {}, runner: {} });
    });

    it('rejects a disabled or unknown scope, a bad key and a bad value', async () => {
      const noSubject = scopeKeysOf({ subject_id: null });
      expect(noSubject.subject).toBeUndefined();
      for (const op of [
        () => state.get(noSubject, 'subject', 'k'),
        () => state.set(noSubject, 'subject', 'k', 1),
        () => state.delete(noSubject, 'subject', 'k'),
        () => state.list(noSubject, 'subject', undefined, undefined),
        () => state.get({}, 'conversation', 'k'),
      ]) {
        expect(await domainError(op())).toMatchObject({ code: 'unauthorized', details: { field: 'scope' } });
      }
      for (const scope of ['galaxy', '', 'Conversation']) {
        expect(await domainError(state.set(keys, scope, 'k', 1))).toMatchObject({
          code: 'invalid_argument',
          details: { field: 'scope' },
        });
      }
      for (const key of ['', 'k'.repeat(256)]) {
        expect(await domainError(state.set(keys, 'conversation', key, 1))).toMatchObject({
          code: 'invalid_argument',
          details: { field: 'key' },
        });
      }
      await state.set(keys, 'conversation', 'k'.repeat(255), 1);
      for (const value of [undefined, 10n, 'nul \u0000 inside', 'lone \ud800 surrogate']) {
        expect(await domainError(state.set(keys, 'conversation', 'v', value))).toMatchObject({
          code: 'invalid_argument',
          details: { field: 'value' },
        });
      }
      // Values are checked like any JSON entering the host: a circular value is refused by the
      // depth limit, the error naming the path where it went too deep.
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      let deep: unknown = 'bottom';
      for (let i = 0; i < 40; i++) {
        deep = { down: deep };
      }
      for (const [value, path] of [
        [circular, /^value(\.self)+/],
        [deep, /^value(\.down)+/],
      ] as const) {
        const error = await domainError(state.set(keys, 'conversation', 'v', value));
        expect(error).toMatchObject({ code: 'invalid_argument', details: { field: expect.stringMatching(path) } });
        expect(error.message).toMatch(/deeper than 32 levels/);
      }
      expect(await ds.getRepository(StateEntryEntity).count()).toBe(1);
    });
  });

  describe('storage (StoresRepository)', () => {
    it('round-trips bytes exactly, including zero bytes and every byte value', async () => {
      const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      const values: Array<[string, Buffer]> = [
        ['zeros', Buffer.from([0, 0, 0, 1, 0])],
        ['every-byte', Buffer.concat([every, every.reverse()])],
        ['empty', Buffer.alloc(0)],
        ['text', Buffer.from('héllo 🚀', 'utf8')],
        ['big', Buffer.alloc(300_000, 0xab)],
      ];
      for (const [key, value] of values) {
        await stores.storageSet('plugin:acme/echo', key, value);
      }

      for (const [key, value] of values) {
        const row = (await stores.storageGet('plugin:acme/echo', key))!;
        expect(row).toMatchObject({ owner_key: 'plugin:acme/echo', key, size: value.length });
        const bytes = Buffer.from(row.value_base64, 'base64');
        expect(bytes.equals(value)).toBe(true);
        expect(typeof row.updated_at).toBe('number');
      }
      expect(await stores.storageGet('plugin:acme/echo', 'missing')).toBeNull();
    });

    it('upserts one row per owner and key; delete is true once, then false', async () => {
      await stores.storageSet('plugin:acme/echo', 'k', Buffer.from('first'));
      await stores.storageSet('plugin:acme/echo', 'k', Buffer.from([9, 0, 9]));

      expect(await ds.getRepository(StorageEntryEntity).count()).toBe(1);
      const row = (await stores.storageGet('plugin:acme/echo', 'k'))!;
      expect(Buffer.from(row.value_base64, 'base64')).toEqual(Buffer.from([9, 0, 9]));
      expect(row.size).toBe(3);

      expect(await stores.storageDelete('plugin:acme/echo', 'k')).toBe(true);
      expect(await stores.storageDelete('plugin:acme/echo', 'k')).toBe(false);
      expect(await stores.storageGet('plugin:acme/echo', 'k')).toBeNull();
      expect(await stores.storageDelete('plugin:acme/echo', 'never')).toBe(false);
    });

    it('isolates owners', async () => {
      await stores.storageSet('plugin:acme/echo', 'k', Buffer.from('plugin'));
      await stores.storageSet('workspace:ws-1', 'k', Buffer.from('workspace'));
      await stores.storageSet('binding:agent-1', 'k', Buffer.from('binding'));

      expect(await stores.storageDelete('workspace:ws-1', 'k')).toBe(true);
      expect(Buffer.from((await stores.storageGet('plugin:acme/echo', 'k'))!.value_base64, 'base64').toString()).toBe(
        'plugin',
      );
      expect(Buffer.from((await stores.storageGet('binding:agent-1', 'k'))!.value_base64, 'base64').toString()).toBe(
        'binding',
      );
      expect(await stores.storageGet('workspace:ws-1', 'k')).toBeNull();
      expect(await stores.storageKeys('workspace:ws-1', '', 10)).toEqual([]);
    });

    it('lists keys by a literal prefix, ordered, up to the limit', async () => {
      const owner = 'plugin:acme/echo';
      for (const key of ['img/1', 'img/2', 'img_1', 'img%1', 'imgx', 'doc/1', 'img\\1', 'IMG/3']) {
        await stores.storageSet(owner, key, Buffer.from([1]));
      }
      await stores.storageSet('plugin:other/one', 'img/9', Buffer.from([1]));

      expect(await stores.storageKeys(owner, 'img/', 10)).toEqual(['img/1', 'img/2']);
      expect(await stores.storageKeys(owner, 'img_', 10)).toEqual(['img_1']);
      expect(await stores.storageKeys(owner, 'img%', 10)).toEqual(['img%1']);
      expect(await stores.storageKeys(owner, 'img\\', 10)).toEqual(['img\\1']);
      expect(await stores.storageKeys(owner, '%', 10)).toEqual([]);
      expect(await stores.storageKeys(owner, 'img', 10)).toEqual(
        ['img/1', 'img/2', 'img_1', 'img%1', 'imgx', 'img\\1'].sort(),
      );
      expect(await stores.storageKeys(owner, 'img', 2)).toEqual(['img%1', 'img/1']);
      expect(await stores.storageKeys(owner, 'IMG', 10)).toEqual(['IMG/3']);
      expect(await stores.storageKeys(owner, 'Img', 10)).toEqual([]);
      expect(await stores.storageKeys(owner, '', 100)).toHaveLength(8);
    });
  });

  describe('audit log', () => {
    it('appendAudit + auditOf: one run, in insertion order, after the cursor, at most limit', async () => {
      const mine = ['state_get', 'state_set', 'history_page', 'storage_get', 'event_page'];
      for (const [i, action] of mine.entries()) {
        await stores.appendAudit(audit('run-a', action, { created_at: T0 + i }));
        await stores.appendAudit(audit('run-b', `other_${action}`));
      }
      await stores.appendAudit(
        audit('run-a', 'model_invoke', {
          runner_id: null,
          plugin_id: null,
          resource: 'model:gpt',
          scope: 'conversation',
          outcome: 'denied',
          error_code: 'unauthorized',
          duration_us: 2_000_000,
          created_at: 4_102_444_800_000,
        }),
      );

      const all = await stores.auditOf('run-a', 0, 100);
      expect(all.map((a) => a.action)).toEqual([...mine, 'model_invoke']);
      const ids = all.map((a) => a.id);
      expect([...ids].sort((a, b) => a - b)).toEqual(ids);
      expect(all[5]).toEqual({
        id: expect.any(Number),
        run_id: 'run-a',
        runner_id: null,
        plugin_id: null,
        action: 'model_invoke',
        resource: 'model:gpt',
        scope: 'conversation',
        outcome: 'denied',
        error_code: 'unauthorized',
        duration_us: 2_000_000,
        created_at: 4_102_444_800_000,
      });
      expect(all[0]).toEqual({ ...audit('run-a', 'state_get', { created_at: T0 }), id: ids[0] });

      // Walk with the cursor (the id of the last row seen).
      const walked: string[] = [];
      let cursor = 0;
      for (let page = await stores.auditOf('run-a', cursor, 2); page.length > 0;) {
        walked.push(...page.map((a) => a.action));
        cursor = page[page.length - 1].id;
        page = await stores.auditOf('run-a', cursor, 2);
      }
      expect(walked).toEqual([...mine, 'model_invoke']);
      expect(await stores.auditOf('run-a', ids[1], 2)).toEqual(all.slice(2, 4));
      expect(await stores.auditOf('run-a', ids[5], 10)).toEqual([]);
      expect((await stores.auditOf('run-b', 0, 100)).map((a) => a.action)).toEqual(mine.map((m) => `other_${m}`));
      expect(await stores.auditOf('run-none', 0, 100)).toEqual([]);
    });
  });
});

/**
 * Concurrent appends and admissions: every one goes through the hot store's one writer, which
 * groups them into few transactions and computes each seq in its insert statement.
 */
describe.each(PERSISTENT_DIALECTS)('transcript seq under concurrency on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let context: ContextRepository;
  let runs: RunsRepository;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [Transactions, ContextRepository, RunsRepository]);
    ds = moduleRef.get(DataSource);
    context = moduleRef.get(ContextRepository);
    runs = moduleRef.get(RunsRepository);
  });

  afterAll(async () => {
    await moduleRef?.close();
    await db?.dispose();
  });

  it('gives concurrent appends and admissions in one conversation distinct, gapless seqs', async () => {
    const appends = Array.from({ length: 8 }, (_, i) =>
      context.appendTranscript(transcriptRow('conv-race', null, `assistant ${i}`, { role: 'assistant' })),
    );
    // One running run per conversation thread (uq_runs_running_conversation): each admission on its own thread.
    const admissions = Array.from({ length: 8 }, (_, i) => {
      const r = runRow({ conversation_id: 'conv-race', thread_id: `thread-${i}` });
      const e = eventRow({ event_id: r.event_id, run_id: r.run_id, conversation_id: 'conv-race' });
      return admit(
        runs,
        e,
        r,
        logRow({ event_id: e.event_id, conversation_id: 'conv-race' }),
        transcriptRow('conv-race', null, `user ${i}`),
      );
    });
    const other = context.appendTranscript(transcriptRow('conv-calm', null, 'alone'));

    const settled = await Promise.allSettled([...appends, ...admissions, other]);

    expect(settled.flatMap((s) => (s.status === 'rejected' ? [String(s.reason)] : []))).toEqual([]);
    const stored = await ds.getRepository(TranscriptEntity).find({ where: { conversation_id: 'conv-race' } });
    expect(stored.map((r) => r.seq).sort((a, b) => a - b)).toEqual(Array.from({ length: 16 }, (_, i) => i + 1));
    expect(await ds.getRepository(RunEntity).count()).toBe(8);
    expect((await ds.getRepository(TranscriptEntity).findOneBy({ conversation_id: 'conv-calm' }))!.seq).toBe(1);
  });
});
