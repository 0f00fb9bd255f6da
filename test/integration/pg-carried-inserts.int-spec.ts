import { Client, type QueryConfig } from 'pg';
import {
  admitUnit,
  appendTranscriptUnit,
  insertRunUnit,
  conversationKey,
  endRunUnit,
  EventEntity,
  EventLogEntity,
  FencedError,
  fenceUnit,
  HostProcessesRepository,
  resultUnit,
  RunEntity,
  RunResultEntity,
  TranscriptEntity,
  type AdmissionRows,
  type AdmitOutcome,
  type ConversationRef,
  type DecisionTable,
  type RunEnd,
  type RunLease,
  type Unit,
} from '@libs/persistence';
import { telemetry } from '@libs/telemetry';
import { SQL } from '../../libs/persistence/src/hot/hot-sql';
import { PgHot } from '../../libs/persistence/src/hot/pg-driver';
import { one } from '../../libs/persistence/src/hot/unit';
import { leasedRuns, leaseStores, type LeaseStores } from './support/leased-runs';
import { admission, completed, eventWithRun, logOf, newResult, transcriptRow } from './support/run-rows';

jest.setTimeout(120_000);

/**
 * The held inserts of a PostgreSQL group riding on its last unit's next statement that need not see
 * them (insert-batch.ts PgInsertCombiner.carrier, pg-driver.ts): one statement, the carrier's answer
 * its own, the rows written with it — or, when one of them fails, nothing of the group.
 */
describe('held inserts carried by the next statement on postgres', () => {
  let stores: LeaseStores;
  let hot: PgHot;
  let spy: jest.SpyInstance;

  beforeAll(async () => {
    stores = await leaseStores([]);
    hot = new PgHot((stores.db.config as { url: string }).url);
  });

  /** Round trips of the pipelined writer since the test began: statements written with none awaited. */
  let trips = 0;
  const inFlight = new WeakMap<Client, number>();
  // eslint-disable-next-line @typescript-eslint/unbound-method -- applied to the client the spy was called on
  const query = Client.prototype.query as (this: Client, ...args: unknown[]) => unknown;

  beforeEach(() => {
    trips = 0;
    // A spy calls the real query: it only records what was sent, and counts the writer's round trips.
    spy = jest.spyOn(Client.prototype, 'query').mockImplementation(function (this: Client, ...args: unknown[]) {
      const waiting = inFlight.get(this) ?? 0;
      if (this.pipeline && waiting === 0) {
        trips++;
      }
      const answer = query.apply(this, args);
      if (answer instanceof Promise) {
        inFlight.set(this, waiting + 1);
        const done = (): void => void inFlight.set(this, (inFlight.get(this) ?? 1) - 1);
        answer.then(done, done);
      }
      return answer;
    });
  });

  afterEach(() => spy.mockRestore());

  afterAll(async () => {
    await hot?.close();
    await stores?.dispose();
  });

  /** A result (held: a batchable insert), then a transcript append (its lock, then its insert: the carrier). */
  function* resultAndAppend(runId: string, seq: number, conversation: string): Unit<number> {
    yield* resultUnit(newResult(runId, seq), null);
    return yield* appendTranscriptUnit(transcriptRow('assistant', `r${seq}`, { conversation_id: conversation }));
  }

  /** The statements sent since the test began, a carried one as `carried`. */
  const shapes = (): string[] =>
    spy.mock.calls.map(([q]: [string | QueryConfig]) => {
      const s = typeof q === 'string' ? q : (q.name ?? q.text.slice(0, 40));
      return s.startsWith('hot_w_') ? 'carried' : s;
    });

  it('one unit: its held result rides on the transcript insert; the insert answers its own seq, both rows are written', async () => {
    expect(await hot.runGroup([() => resultAndAppend('run-a', 1, 'conv-a')])).toEqual([1]);
    expect(shapes()).toEqual(['BEGIN', 'hot_lock_conversation', 'carried', 'COMMIT']);
    expect(await hot.runGroup([() => resultAndAppend('run-a', 2, 'conv-a')])).toEqual([2]);
    const results = await stores.ds.getRepository(RunResultEntity).findBy({ run_id: 'run-a' });
    expect(results.map((r) => Number(r.sequence)).sort()).toEqual([1, 2]);
    const rows = await stores.ds.getRepository(TranscriptEntity).findBy({ conversation_id: 'conv-a' });
    expect(rows.map((r) => [r.content, Number(r.seq)]).sort()).toEqual([
      ['r1', 1],
      ['r2', 2],
    ]);
  });

  it('two units: only the last unit carries, the rows of both as one multi-row insert', async () => {
    const out = await hot.runGroup([
      () => resultAndAppend('run-b', 1, 'conv-b'),
      () => resultAndAppend('run-b', 2, 'conv-c'),
    ]);
    expect(out).toEqual([1, 1]);
    expect(shapes()).toEqual([
      'BEGIN',
      'hot_lock_conversation',
      'hot_insert_transcript', // the first unit's: its row stays held for the group's multi-row insert
      'hot_lock_conversation',
      'carried',
      'COMMIT',
    ]);
    const results = await stores.ds.getRepository(RunResultEntity).findBy({ run_id: 'run-b' });
    expect(results.map((r) => Number(r.sequence)).sort()).toEqual([1, 2]);
  });

  it('an admission: its run row rides on the user transcript row; the outcome is unchanged', async () => {
    const { event, run } = eventWithRun({ conversation_id: 'conv-d' }, { conversation_id: 'conv-d' });
    const [outcome] = await hot.runGroup([
      () => admitUnit(admission(event, run, transcriptRow('user', 'hi', { conversation_id: 'conv-d' }))),
    ]);
    expect(outcome).toMatchObject({ admitted: true, disposition: 'started', run_id: run.run_id, transcript_seq: 1 });
    expect(shapes()).toEqual([
      'BEGIN',
      'hot_lock_conversation',
      'hot_claim_event_logged', // the event and its log row: one statement (hot-sql.ts claimEventLogged)
      'carried',
      'COMMIT',
    ]);
    expect(await stores.ds.getRepository(RunEntity).findOneBy({ run_id: run.run_id })).toMatchObject({
      status: 'running',
      attempt: 1,
    });
  });

  it('a duplicate admission: the claim that inserted nothing wrote no log row; the recorded event is the answer', async () => {
    const { event, run } = eventWithRun({ conversation_id: 'conv-f' }, { conversation_id: 'conv-f' });
    await hot.runGroup([() => admitUnit(admission(event, run))]);
    spy.mockClear();
    const again = eventWithRun({ event_id: event.event_id, conversation_id: 'conv-f' }, { conversation_id: 'conv-f' });
    const [outcome] = await hot.runGroup([() => admitUnit(admission(again.event, again.run))]);
    expect(outcome).toMatchObject({ admitted: false, existing: { event_id: event.event_id, run_id: run.run_id } });
    // No conversation, no user row: no lock.
    expect(shapes()).toEqual(['BEGIN', 'hot_claim_event_logged', 'hot_event_by_id', 'COMMIT']);
    expect(await stores.ds.getRepository(EventLogEntity).countBy({ event_id: event.event_id })).toBe(1);
    expect(await stores.ds.getRepository(RunEntity).countBy({ run_id: again.run.run_id })).toBe(0);
  });

  it("a run's end in a conversation: its results ride on the transcript append, which also answers the conversation's wait (no read of its own)", async () => {
    const { event, run } = eventWithRun({ conversation_id: 'conv-g' }, { conversation_id: 'conv-g' });
    await hot.runGroup([() => admitUnit(admission(event, run))]);
    spy.mockClear();
    trips = 0;
    const end: RunEnd = {
      status: 'completed',
      status_reason: null,
      error_code: null,
      retryable: null,
      finished_at: Date.now(),
    };
    const assistant = transcriptRow('assistant', 'done', { conversation_id: 'conv-g', run_id: run.run_id });
    const [out] = await hot.runGroup([
      () =>
        endRunUnit(newResult(run.run_id, 1, { type: 'run.completed' }), end, null, assistant, [], null, 'key-conv-g'),
    ]);
    expect(out).toEqual({ ended: true, released: 0, waiting: false });
    // No lease here: the run row and the transcript key are locked by GROUP_LOCKS (a leased end is
    // its own lock statement, finish_run_fenced_locking). No hot_queued_of_run_and_waiting. The end
    // is written without waiting for its answer, the append with COMMIT (speculation.ts).
    expect(shapes()).toEqual(['BEGIN', 'hot_group_locks', 'hot_finish_run_locking_riding', 'carried', 'COMMIT']);
    expect(trips).toBe(2);
    const carried = spy.mock.calls
      .map(([q]: [string | QueryConfig]) => q)
      .find((q): q is QueryConfig => typeof q !== 'string' && (q.name ?? '').startsWith('hot_w_'))?.text;
    expect(carried).toMatch(/INSERT INTO "run_results"/);
    expect(carried).toMatch(/AS "conv_waiting"/);
    expect(carried).toMatch(/rh_expected/);
    expect(await stores.ds.getRepository(RunResultEntity).countBy({ run_id: run.run_id })).toBe(1);
    expect(await stores.ds.getRepository(TranscriptEntity).countBy({ conversation_id: 'conv-g' })).toBe(1);
  });

  it('a carried row that fails fails the group: nothing of it is written, the writer goes on', async () => {
    // run-a #1 exists: the held result conflicts (run_id, sequence), in the carrier's statement.
    await expect(hot.runGroup([() => resultAndAppend('run-a', 1, 'conv-e')])).rejects.toThrow(/duplicate key|unique/i);
    expect(shapes()).toContain('carried');
    expect(await stores.ds.getRepository(TranscriptEntity).countBy({ conversation_id: 'conv-e' })).toBe(0);
    expect(await hot.runGroup([() => resultAndAppend('run-a', 3, 'conv-e')])).toEqual([1]);
  });

  it('BEGIN is written with the first statement, COMMIT with the last held inserts: a results-only group is one round trip', async () => {
    expect(await hot.runGroup([() => resultUnit(newResult('run-h', 1), null)])).toEqual([undefined]);
    expect(shapes()).toEqual(['BEGIN', 'hot_insert_result', 'COMMIT']);
    expect(trips).toBe(1);
    spy.mockClear();
    trips = 0;
    // An admission: BEGIN with the lock, then the claim, then the carried rows with COMMIT — the user
    // row is the admission's final statement (3 round trips for 5 statements).
    const { event, run } = eventWithRun({ conversation_id: 'conv-h' }, { conversation_id: 'conv-h' });
    await hot.runGroup([
      () => admitUnit(admission(event, run, transcriptRow('user', 'hi', { conversation_id: 'conv-h' }))),
    ]);
    expect(shapes()).toEqual(['BEGIN', 'hot_lock_conversation', 'hot_claim_event_logged', 'carried', 'COMMIT']);
    expect(trips).toBe(3);
    expect(await stores.ds.getRepository(RunResultEntity).countBy({ run_id: 'run-h' })).toBe(1);
    expect(await stores.ds.getRepository(RunEntity).countBy({ run_id: run.run_id })).toBe(1);
  });

  it('an insert failing in the write with COMMIT fails the group: nothing of it is written, the writer goes on', async () => {
    // Two units: the first's lock and insert run, the held results of both go with COMMIT; run-h #1 exists.
    await expect(
      hot.runGroup([() => resultAndAppend('run-i', 1, 'conv-i'), () => resultUnit(newResult('run-h', 1), null)]),
    ).rejects.toThrow(/duplicate key|unique/i);
    // COMMIT ended the aborted transaction as a rollback: no ROLLBACK after it.
    expect(shapes().slice(-2)).toEqual(['hot_insert_result_x2', 'COMMIT']);
    expect(await stores.ds.getRepository(TranscriptEntity).countBy({ conversation_id: 'conv-i' })).toBe(0);
    expect(await stores.ds.getRepository(RunResultEntity).countBy({ run_id: 'run-i' })).toBe(0);
    expect(await hot.runGroup([() => resultAndAppend('run-i', 1, 'conv-i')])).toEqual([1]);
    expect(await stores.ds.getRepository(RunResultEntity).countBy({ run_id: 'run-i' })).toBe(1);
  });

  it('a first statement failing behind BEGIN fails the group alone; the writer goes on', async () => {
    await expect(hot.runGroup([() => resultUnit(newResult('run-h', 1), null)])).rejects.toThrow(
      /duplicate key|unique/i,
    );
    expect(await hot.runGroup([() => resultUnit(newResult('run-h', 2), null)])).toEqual([undefined]);
    expect(await stores.ds.getRepository(RunResultEntity).countBy({ run_id: 'run-h' })).toBe(2);
  });

  it('BEGIN refused (the session left in an aborted transaction): the group runs again on a new connection', async () => {
    const writer = (hot as unknown as { writer: Client }).writer;
    await writer.query('BEGIN');
    await expect(writer.query('SELECT 1/0')).rejects.toThrow(/division by zero/);
    spy.mockClear();
    trips = 0;
    expect(await hot.runGroup([() => resultUnit(newResult('run-j', 1), null)])).toEqual([undefined]);
    expect((hot as unknown as { writer: Client }).writer).not.toBe(writer);
    // BEGIN and the insert with COMMIT on the old connection (refused), then on the new one.
    expect(shapes()).toEqual(['BEGIN', 'hot_insert_result', 'COMMIT', 'BEGIN', 'hot_insert_result', 'COMMIT']);
    expect(trips).toBe(2);
    expect(await stores.ds.getRepository(RunResultEntity).countBy({ run_id: 'run-j' })).toBe(1);
  });

  it('a group that sends nothing sends neither BEGIN nor COMMIT', async () => {
    // eslint-disable-next-line require-yield -- a unit with no statement
    function* nothing(): Unit<number> {
      return 7;
    }
    expect(await hot.runGroup([() => nothing()])).toEqual([7]);
    expect(shapes()).toEqual([]);
    expect(trips).toBe(0);
  });

  it('a final statement that fails (its COMMIT written with it) fails the group with its own error: nothing of it is written', async () => {
    // A held result carried on the final transcript row, whose role is too long for its column.
    const bad = transcriptRow('user', 'x', { conversation_id: 'conv-k', role: 'r'.repeat(20) });
    function* unit(): Unit<number> {
      yield* resultUnit(newResult('run-k', 1), null);
      return yield* appendTranscriptUnit(bad, true, true);
    }
    await expect(hot.runGroup([() => unit()])).rejects.toThrow(/too long/);
    expect(shapes()).toEqual(['BEGIN', 'carried', 'COMMIT']);
    expect(await stores.ds.getRepository(RunResultEntity).countBy({ run_id: 'run-k' })).toBe(0);
    expect(await hot.runGroup([() => resultUnit(newResult('run-k', 1), null)])).toEqual([undefined]);
    expect(await stores.ds.getRepository(RunResultEntity).countBy({ run_id: 'run-k' })).toBe(1);
  });

  it('a unit that yields after its final statement fails its group (a unit bug: what the final statement wrote is committed)', async () => {
    function* wrong(): Unit<number> {
      yield* appendTranscriptUnit(transcriptRow('user', 'a', { conversation_id: 'conv-l' }), true, true);
      return yield* appendTranscriptUnit(transcriptRow('user', 'b', { conversation_id: 'conv-l' }), true);
    }
    await expect(hot.runGroup([() => wrong()])).rejects.toThrow(/after its final statement/);
    expect(await stores.ds.getRepository(TranscriptEntity).countBy({ conversation_id: 'conv-l' })).toBe(1);
    expect(await hot.runGroup([() => resultUnit(newResult('run-l', 1), null)])).toEqual([undefined]);
  });

  it("a final statement of a unit before the group's last is written without waiting; its unit returns its answer once the group is committed", async () => {
    // Each unit: a result (held), then its transcript row as its final statement (lock taken: `locked`).
    function* resultAndLast(runId: string, conversation: string): Unit<number> {
      yield* resultUnit(newResult(runId, 1), null);
      return yield* appendTranscriptUnit(
        transcriptRow('assistant', runId, { conversation_id: conversation }),
        true,
        true,
      );
    }
    expect(
      await hot.runGroup([
        () => resultAndLast('run-n1', 'conv-n1'),
        () => resultAndLast('run-n2', 'conv-n2'),
        () => resultAndLast('run-n3', 'conv-n1'),
      ]),
    ).toEqual([1, 1, 2]);
    // The two first units' rows are not awaited: one round trip, the last row carrying the held results with COMMIT.
    expect(shapes()).toEqual(['BEGIN', 'hot_insert_transcript', 'hot_insert_transcript', 'carried', 'COMMIT']);
    expect(trips).toBe(1);
    expect(await stores.ds.getRepository(RunResultEntity).countBy({ run_id: 'run-n2' })).toBe(1);
    expect(await stores.ds.getRepository(TranscriptEntity).countBy({ conversation_id: 'conv-n1' })).toBe(2);
  });

  it("a failing final statement not awaited fails the group with its own error, not the aborted transaction's: nothing of it is written", async () => {
    const bad = transcriptRow('assistant', 'x', { conversation_id: 'conv-o', role: 'r'.repeat(20) });
    function* read(): Unit<unknown> {
      yield* resultUnit(newResult('run-o', 1), null);
      return yield* one(SQL.eventById, ['evt-none']);
    }
    await expect(hot.runGroup([() => appendTranscriptUnit(bad, true, true), () => read()])).rejects.toThrow(/too long/);
    expect(await stores.ds.getRepository(RunResultEntity).countBy({ run_id: 'run-o' })).toBe(0);
    expect(await stores.ds.getRepository(TranscriptEntity).countBy({ conversation_id: 'conv-o' })).toBe(0);
    expect(await hot.runGroup([() => read()])).toEqual([undefined]);
  });

  it('held inserts a statement must see are written right ahead of it, not awaited', async () => {
    // The first unit's run row is held; the second unit reads `runs` (SQL.runningOfWorkspace): the row is written first.
    const { run } = eventWithRun({ conversation_id: 'conv-p' }, { conversation_id: 'conv-p', workspace_id: 'ws-p' });
    function* count(): Unit<unknown> {
      return yield* one(SQL.runningOfWorkspace, ['ws-p', 'ws-p']);
    }
    const [, n] = await hot.runGroup([() => insertRunUnit({ ...run, status: 'running' }), () => count()]);
    expect(Number((n as { n: number | string }).n)).toBe(1);
    expect(shapes()).toEqual(['BEGIN', 'hot_insert_run', 'hot_running_of_workspace', 'COMMIT']);
    expect(trips).toBe(2);
  });

  it('the key-lock statement of a group is written with the statement behind it: its answer decides nothing', async () => {
    function* locked(): Unit<unknown> {
      // Two advisory keys (one declared for later): the group takes them in one statement (GROUP_KEYS).
      yield* one(SQL.lockConversation, ['key-m1'], { keys: ['key-m2'] });
      return yield* one(SQL.eventById, ['evt-none']);
    }
    expect(await hot.runGroup([() => locked()])).toEqual([undefined]);
    expect(shapes()).toEqual(['BEGIN', 'hot_group_keys', 'hot_event_by_id', 'COMMIT']);
    expect(trips).toBe(2);
  });

  describe("an admission's claim made only when its conversation is free (admitUnit claimIfFree)", () => {
    const queueAll: DecisionTable = { busy: 'queued', steer_into: null, max_queue: 100 };

    function conv(id: string): ConversationRef {
      return {
        key: conversationKey('agent-1', null, id, null),
        agent_id: 'agent-1',
        runner_id: 'acme/echo/echo',
        workspace_id: null,
        conversation_id: id,
        thread_id: null,
      };
    }

    /** An event of `c` prepared to start, with its user row; `eventId`: a duplicate of that event. */
    function convRows(c: ConversationRef, table: DecisionTable = queueAll, eventId?: string): AdmissionRows {
      const { event, run } = eventWithRun(
        { conversation_id: c.conversation_id, ...(eventId ? { event_id: eventId } : {}) },
        { conversation_id: c.conversation_id },
      );
      return {
        ...admission(event, run, transcriptRow('user', 'hi', { conversation_id: c.conversation_id })),
        log: logOf(event),
        conversation: { ref: c, table, item: { text: 'hi' }, submission: { input: { text: 'hi' } } },
      };
    }

    const admit = async (a: AdmissionRows, claimIfFree = true): Promise<AdmitOutcome> =>
      (await hot.runGroup([() => admitUnit(a, claimIfFree)]))[0] as AdmitOutcome;

    /** What an admission stored of its event: the event row and its log row. */
    async function stored(eventId: string): Promise<{ event: unknown; log: unknown }> {
      const event = await stores.ds.getRepository(EventEntity).findOneByOrFail({ event_id: eventId });
      const log = await stores.ds.getRepository(EventLogEntity).findBy({ event_id: eventId });
      return { event: { disposition: event.disposition, run_id: event.run_id }, log: log.map((l) => l.metadata) };
    }

    it('free: the situation and the claim are one statement, the admission two round trips; the rows and the answer are those of the read, then the claim', async () => {
      const a = convRows(conv('conv-free-a'));
      const outcome = await admit(a);
      expect(shapes()).toContain('hot_claim_if_free');
      expect(shapes()).not.toContain('hot_situation');
      expect(shapes()).not.toContain('hot_claim_event_logged');
      expect(trips).toBe(2);
      // The same admission in another free conversation without it: the same answer and rows.
      const b = convRows(conv('conv-free-b'));
      const apart = await admit(b, false);
      expect(spy.mock.calls.map(([q]: [string | QueryConfig]) => (typeof q === 'string' ? q : q.name))).toContain(
        'hot_situation',
      );
      const shape = (o: AdmitOutcome) => (o.admitted ? { ...o, run_id: 'r', event_seq: typeof o.event_seq } : o);
      expect(shape(outcome)).toEqual(shape(apart));
      expect(outcome).toMatchObject({
        admitted: true,
        disposition: 'started',
        run_id: a.run!.run_id,
        transcript_seq: 1,
      });
      const [mine, theirs] = [await stored(a.event.event_id), await stored(b.event.event_id)];
      expect(mine).toEqual({
        event: { disposition: 'started', run_id: a.run!.run_id },
        log: [{ disposition: 'started' }],
      });
      expect(theirs).toEqual({
        event: { disposition: 'started', run_id: b.run!.run_id },
        log: [{ disposition: 'started' }],
      });
      expect(await stores.ds.getRepository(RunEntity).countBy({ run_id: a.run!.run_id })).toBe(1);
    });

    it('busy: it claims nothing; the decision on the situation it read claims as without it (queued, steered)', async () => {
      const c = conv('conv-busy');
      const first = await admit(convRows(c));
      const running = first.admitted ? first.run_id! : '';
      spy.mockClear();
      const queued = convRows(c);
      expect(await admit(queued)).toMatchObject({ admitted: true, disposition: 'queued', running_run_id: running });
      expect(shapes().filter((q) => q.startsWith('hot_claim'))).toEqual([
        'hot_claim_if_free',
        'hot_claim_event_logged',
      ]);
      expect(await stored(queued.event.event_id)).toEqual({
        event: { disposition: 'queued', run_id: queued.event.run_id },
        log: [{ disposition: 'queued', steering: { status: 'waiting', next_run_id: queued.event.run_id } }],
      });
      const steered = convRows(c, { ...queueAll, steer_into: running });
      // Something waits before it (the queued event): a follow-up never overtakes it.
      expect(await admit(steered)).toMatchObject({ admitted: true, disposition: 'queued' });
      expect(await stores.ds.getRepository(EventLogEntity).countBy({ event_id: steered.event.event_id })).toBe(1);
    });

    it('a duplicate of an event whose conversation is free again answers the event recorded first and writes nothing', async () => {
      const c = conv('conv-dup');
      const a = convRows(c);
      await admit(a);
      await hot.runGroup([
        () =>
          endRunUnit(newResult(a.run!.run_id, 1, { type: 'run.completed' }), completed(), null, null, [], null, c.key),
      ]);
      spy.mockClear();
      const again = convRows(c, queueAll, a.event.event_id);
      expect(await admit(again)).toEqual({
        admitted: false,
        existing: expect.objectContaining({
          event_id: a.event.event_id,
          run_id: a.run!.run_id,
          disposition: 'started',
        }),
      });
      expect(shapes()).toContain('hot_claim_if_free');
      expect(await stores.ds.getRepository(EventLogEntity).countBy({ event_id: a.event.event_id })).toBe(1);
      expect(await stores.ds.getRepository(RunEntity).countBy({ run_id: again.run!.run_id })).toBe(0);
      expect(await stores.ds.getRepository(TranscriptEntity).countBy({ conversation_id: 'conv-dup' })).toBe(1);
    });

    it("two admissions in one group: the first one's user row, and the rows the second's claim must see, are written without waiting — three round trips", async () => {
      const [a, b] = [convRows(conv('conv-two-a')), convRows(conv('conv-two-b'))];
      const out = (await hot.runGroup([() => admitUnit(a, true), () => admitUnit(b, true)])) as AdmitOutcome[];
      expect(out.map((o) => (o.admitted ? [o.disposition, o.run_id, o.transcript_seq] : o))).toEqual([
        ['started', a.run!.run_id, 1],
        ['started', b.run!.run_id, 1],
      ]);
      // The group's keys; A's claim (awaited); A's rows and user row, then B's claim (awaited); B's rows with COMMIT.
      expect(trips).toBe(3);
      expect(shapes().filter((q) => q === 'hot_claim_if_free')).toHaveLength(2);
      for (const x of [a, b]) {
        expect(await stored(x.event.event_id)).toEqual({
          event: { disposition: 'started', run_id: x.run!.run_id },
          log: [{ disposition: 'started' }],
        });
        expect(await stores.ds.getRepository(RunEntity).countBy({ run_id: x.run!.run_id })).toBe(1);
        expect(
          await stores.ds.getRepository(TranscriptEntity).countBy({ conversation_id: x.event.conversation_id! }),
        ).toBe(1);
      }
    });

    it("a run's end with a steering item still queued on it: the guess that none is misses, the group runs again awaited and releases the item; the end is written once", async () => {
      const c = conv('conv-guess');
      const a = convRows(c);
      await admit(a);
      const running = a.run!.run_id;
      const steered = convRows(c, { ...queueAll, steer_into: running });
      expect(await admit(steered)).toMatchObject({ admitted: true, disposition: 'steered' });
      spy.mockClear();
      const assistant = transcriptRow('assistant', 'done', { conversation_id: c.conversation_id, run_id: running });
      const [out] = await hot.runGroup([
        () =>
          endRunUnit(newResult(running, 1, { type: 'run.completed' }), completed(), null, assistant, [], null, c.key),
      ]);
      // The released item is a run of its own, waiting: the end says so.
      expect(out).toEqual({ ended: true, released: 1, waiting: true });
      const sent = shapes();
      // The guessed try (its last statement with COMMIT, failed: rolled back), then the awaited one.
      expect(sent.slice(0, 4)).toEqual(['BEGIN', 'hot_group_locks', 'hot_finish_run_locking_riding', 'carried']);
      expect(sent).toContain('hot_finish_run_locking');
      expect(sent).toContain('hot_queued_of_run');
      expect(sent).toContain('hot_mark_redispatched');
      expect(sent).not.toContain('ROLLBACK');
      const item = await stores.ds.query(`SELECT "state", "dispatch" FROM "steering_items" WHERE "event_id" = $1`, [
        steered.event.event_id,
      ]);
      expect(item).toEqual([{ state: 'redispatched', dispatch: 'waiting' }]);
      expect(await stores.ds.getRepository(RunResultEntity).countBy({ run_id: running })).toBe(1);
      expect(
        await stores.ds
          .getRepository(TranscriptEntity)
          .countBy({ conversation_id: c.conversation_id, role: 'assistant' }),
      ).toBe(1);
      expect(await stores.ds.getRepository(RunEntity).findOneByOrFail({ run_id: running })).toMatchObject({
        status: 'completed',
      });
    });
  });

  describe('a fence written without waiting for its answer (run-fence.ts ridingFence)', () => {
    let lease: RunLease;

    beforeAll(async () => {
      await stores.moduleRef
        .get(HostProcessesRepository)
        .register({ id: 'p-ride', instance: 'p-ride', http_address: 'h:1', grpc_address: 'h:2' });
      [lease] = await leasedRuns(stores.ds, 1, ['p-ride']);
    });

    const resultsOf = async (runId: string): Promise<number[]> =>
      (await stores.ds.getRepository(RunResultEntity).findBy({ run_id: runId })).map((r) => Number(r.sequence)).sort();

    it("a leased run's results group: its fence, its result and COMMIT in one round trip; a second fence of the run is not written", async () => {
      expect(
        await hot.runGroup([
          () => resultUnit(newResult(lease.run_id, 1), null, [], lease),
          () => resultUnit(newResult(lease.run_id, 2), null, [], lease),
        ]),
      ).toEqual([undefined, undefined]);
      expect(shapes()).toEqual(['BEGIN', 'hot_fence_run_riding', 'hot_insert_result_x2', 'COMMIT']);
      expect(trips).toBe(1);
      expect(await resultsOf(lease.run_id)).toEqual([1, 2]);
      const row = await stores.ds.getRepository(RunEntity).findOneByOrFail({ run_id: lease.run_id });
      expect(Number(row.last_write_at)).toBeGreaterThan(0);
    });

    it('a fence that matches nothing fails its group with FencedError, whatever statement waits behind it: nothing of the group is written, the writer goes on', async () => {
      const stale: RunLease = { ...lease, attempt: 2 };
      await expect(hot.runGroup([() => resultUnit(newResult(lease.run_id, 3), null, [], stale)])).rejects.toEqual(
        new FencedError(stale),
      );
      expect(shapes().slice(-2)).toEqual(['hot_insert_result', 'COMMIT']);
      // A statement awaited behind the failed fence: the group's error is the fence's, not "transaction aborted".
      function* fencedThenRead(): Unit<unknown> {
        yield* fenceUnit(stale);
        yield* resultUnit(newResult(lease.run_id, 4), null);
        return yield* one(SQL.eventById, ['evt-none']);
      }
      await expect(hot.runGroup([() => fencedThenRead()])).rejects.toBeInstanceOf(FencedError);
      expect(await resultsOf(lease.run_id)).toEqual([1, 2]);
      expect(await hot.runGroup([() => resultUnit(newResult(lease.run_id, 3), null, [], lease)])).toEqual([undefined]);
      expect(await resultsOf(lease.run_id)).toEqual([1, 2, 3]);
    });
  });

  describe("a leased run's end guessed to match (speculation.ts ridingEnd, Op.finalIf)", () => {
    let leases: RunLease[];

    beforeAll(async () => {
      await stores.moduleRef
        .get(HostProcessesRepository)
        .register({ id: 'p-guess', instance: 'p-guess', http_address: 'h:1', grpc_address: 'h:2' });
      leases = await leasedRuns(stores.ds, 3, ['p-guess'], 'conv-guess-');
    });

    const resultsOf = async (runId: string): Promise<number[]> =>
      (await stores.ds.getRepository(RunResultEntity).findBy({ run_id: runId })).map((r) => Number(r.sequence)).sort();
    const assistantRows = (conversation: string) =>
      stores.ds.getRepository(TranscriptEntity).countBy({ conversation_id: conversation, role: 'assistant' });

    /** The run's last result and its end in one group, as a c1 run's last results arrive. */
    const lastResultsAndEnd = (lease: RunLease, conversation: string, seq: number) => [
      () => resultUnit(newResult(lease.run_id, seq), null, [], lease),
      () =>
        endRunUnit(
          newResult(lease.run_id, seq + 1, { type: 'run.completed' }),
          completed(),
          null,
          transcriptRow('assistant', 'done', { conversation_id: conversation, run_id: lease.run_id }),
          [],
          lease,
          `key-${conversation}`,
        ),
    ];

    it('its last results and its end: one round trip — the end not awaited, the transcript append with COMMIT', async () => {
      const [lease] = leases;
      const out = await hot.runGroup(lastResultsAndEnd(lease, 'conv-end-a', 1));
      expect(out).toEqual([undefined, { ended: true, released: 0, waiting: false }]);
      expect(shapes()).toEqual(['BEGIN', 'hot_finish_run_fenced_locking_riding', 'carried', 'COMMIT']);
      expect(trips).toBe(1);
      expect(await resultsOf(lease.run_id)).toEqual([1, 2]);
      expect(await assistantRows('conv-end-a')).toBe(1);
      expect(await stores.ds.getRepository(RunEntity).findOneByOrFail({ run_id: lease.run_id })).toMatchObject({
        status: 'completed',
      });
    });

    it('a run already ended: the guess misses, the group runs again awaited and writes nothing (not ended)', async () => {
      const [, lease] = leases;
      await hot.runGroup(lastResultsAndEnd(lease, 'conv-end-b', 1));
      spy.mockClear();
      const metrics = telemetry.enableMetrics({ instance: 'it', processMetrics: false });
      const missed = async (): Promise<number> =>
        Number(/runnerhost_writer_guesses_missed_total\{[^}]*\} (\d+)/.exec(await metrics.text())?.[1] ?? NaN);
      const before = await missed();
      const out = await hot.runGroup(lastResultsAndEnd(lease, 'conv-end-b', 3));
      expect(await missed()).toBe(before + 1);
      // The results unit writes (its fence holds: the lease is still the run's), the end does not.
      expect(out).toEqual([undefined, { ended: false, released: 0, waiting: false }]);
      expect(shapes()).toContain('hot_finish_run_fenced_locking_riding');
      expect(shapes()).toContain('hot_finish_run_fenced_locking');
      expect(shapes()).not.toContain('ROLLBACK');
      expect(await resultsOf(lease.run_id)).toEqual([1, 2, 3]);
      expect(await assistantRows('conv-end-b')).toBe(1);
    });

    it('a stale lease: the guess misses, the group awaited fails with FencedError; nothing written, the writer goes on', async () => {
      const [, , lease] = leases;
      const stale: RunLease = { ...lease, attempt: 2 };
      await expect(hot.runGroup(lastResultsAndEnd(stale, 'conv-end-c', 1))).rejects.toEqual(new FencedError(stale));
      expect(await resultsOf(lease.run_id)).toEqual([]);
      expect(await assistantRows('conv-end-c')).toBe(0);
      expect(await hot.runGroup(lastResultsAndEnd(lease, 'conv-end-c', 1))).toEqual([
        undefined,
        { ended: true, released: 0, waiting: false },
      ]);
      expect(await resultsOf(lease.run_id)).toEqual([1, 2]);
    });
  });
});
