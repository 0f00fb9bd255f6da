import { RUN_COLUMNS, SQL } from './hot-sql';
import { appendTranscriptUnit, insertRunUnit, type NewRun } from './run-units';
import { LARGE_JSON_CHARS, joined, json, rowParams, writtenJson, type Op } from './unit';

describe('json: the JSON text of a large object is made once', () => {
  it('keeps the text of a large object for writtenJson, not of a small one', () => {
    const small = { text: 'hello', part: 0 };
    const large = { text: 'x'.repeat(LARGE_JSON_CHARS), part: 0 };
    expect(json(small)).toBe(JSON.stringify(small));
    expect(writtenJson(small)).toBeUndefined();
    const text = json(large);
    expect(text).toBe(JSON.stringify(large));
    expect(writtenJson(large)).toBe(text);
    expect(writtenJson({ ...large })).toBeUndefined(); // by object, not by value
  });

  it('null and undefined are SQL NULL', () => {
    expect(json(null)).toBeNull();
    expect(json(undefined)).toBeNull();
  });
});

describe('rowParams with columns replaced (no spread copy of the row)', () => {
  it("binds `over`'s value for its keys, even null or undefined, and the row's otherwise", () => {
    const row = { a: 1, b: 'x', c: true, d: { k: 1 } };
    expect(rowParams(['a', 'b', 'c', 'd', 'e'], row)).toEqual([1, 'x', 1, '{"k":1}', null]);
    expect(rowParams(['a', 'b', 'c', 'd', 'e'], row, { b: null, d: undefined, e: 'y' })).toEqual([
      1,
      null,
      1,
      null,
      'y',
    ]);
  });

  it('insertRunUnit binds what the spread copy of the run with its replaced columns bound', () => {
    const run = {
      run_id: 'r1',
      event_id: 'e1',
      agent_id: 'a',
      runner_id: 'rn',
      conversation_id: 'c',
      thread_id: 't',
      workspace_id: null,
      status: 'running',
      status_reason: null,
      error_code: null,
      retryable: null,
      context: { context: { x: 1 } },
      usage: null,
      authorization: null,
      authorization_hash: null,
      created_at: 1,
      started_at: 1,
      finished_at: null,
      deadline_at: null,
      cancel_requested_at: null,
      owner_process_id: 'p1',
    } as NewRun;
    const params = (u: Generator<Op, void, unknown>): unknown => {
      const r = u.next();
      return r.done ? undefined : r.value.stmt === SQL.insertRun ? r.value.params : params(u);
    };
    const spread = (r: NewRun) =>
      rowParams(RUN_COLUMNS, { ...r, attempt: r.attempt ?? 0, snapshot_hash: null, authorization_run: null });
    expect(params(insertRunUnit(run))).toEqual(spread(run));
    expect(params(insertRunUnit(run, { context: { event_seq: 7 }, attempt: 1 }))).toEqual(
      spread({ ...run, context: { event_seq: 7 }, attempt: 1 }),
    );
    expect(params(insertRunUnit(run, { owner_process_id: null }))).toEqual(spread({ ...run, owner_process_id: null }));
    expect(params(insertRunUnit(run, { conversation_id: null, thread_id: null }))).toEqual(
      spread({ ...run, conversation_id: null, thread_id: null }),
    );
  });
});

describe('Op.final: the last statement of a top-level unit', () => {
  const row = {
    conversation_id: 'c',
    thread_id: null,
    workspace_id: null,
    role: 'user',
    item_type: 'message',
    content: 'hi',
    content_json: { role: 'user', content: 'hi' },
    attachment_refs: [],
    event_id: 'e1',
    run_id: null,
    agent_id: 'a',
    metadata: {},
    created_at: 1,
  } as const;

  /** The ops a unit yields, each answered with `answer`, and its return value. */
  function stepped<T>(unit: Generator<Op, T, unknown>, answer: unknown): { ops: Op[]; value: T } {
    const ops: Op[] = [];
    let r = unit.next();
    while (!r.done) {
      ops.push(r.value);
      r = unit.next(answer);
    }
    return { ops, value: r.value };
  }

  it('a transcript append asked to be last marks its insert final and returns right after its answer', () => {
    const { ops, value } = stepped(appendTranscriptUnit({ ...row, attachment_refs: [] }, true, true), { seq: 4 });
    expect(ops.map((o) => [o.stmt.name, o.final])).toEqual([['hot_insert_transcript', true]]);
    expect(value).toBe(4);
  });

  it('otherwise no op is final (its lock, then its insert)', () => {
    const { ops } = stepped(appendTranscriptUnit({ ...row, attachment_refs: [] }), { seq: 1 });
    expect(ops.map((o) => o.final)).toEqual([undefined, undefined]);
    expect(ops).toHaveLength(2);
  });
});

describe('joined: parameter lists one after another', () => {
  it('answers a new list of every value in order, the inputs unchanged', () => {
    const a = ['a', 1, null];
    const b: string[] = [];
    const c = ['c'];
    const out = joined([a, b, c]);
    expect(out).toEqual(['a', 1, null, 'c']);
    expect(out).not.toBe(a);
    expect(a).toEqual(['a', 1, null]);
    expect(joined([])).toEqual([]);
  });
});
