import { buildSnapshot, type RunScope } from '@libs/authz';
import type { AgentEntity } from '@libs/persistence';
import { redactSubmission, type EventSubmission } from './event-submission';
import { asJson, buildRunContext, storedContext } from './run-context.builder';

const agent = (runner_config: Record<string, unknown>): AgentEntity => ({
  agent_id: 'a1',
  workspace_id: 'default',
  runner_id: 'plugin:demo/echo/default',
  description: '',
  runner_config: runner_config as AgentEntity['runner_config'],
  resource_policy: {},
  state_policy: {},
  delivery_policy: {},
  concurrency_policy: {},
  version: 1,
  created_at: 0,
  updated_at: 0,
});

const sub: EventSubmission = {
  agent_id: 'a1',
  event: { event_type: 'message.received', source: 'platform', event_time: 1700000000 },
  conversation: { conversation_id: 'c1', thread_id: 't1' },
  actor: { actor_type: 'user', actor_id: 'u1' },
  input: {
    text: 'hi',
    contents: [{ type: 'image_base64', image_base64: 'QUJD' }],
    attachments: [{ type: 'file', content: 'QUJD' }],
  },
};

const scope: RunScope = {
  agent_id: 'a1',
  runner_id: 'plugin:demo/echo/default',
  plugin_id: 'demo/echo',
  conversation_id: 'c1',
  thread_id: 't1',
  bot_id: null,
  workspace_id: null,
  actor_type: 'user',
  actor_id: 'u1',
  subject_type: null,
  subject_id: null,
};

const access = (deadline_at_ms: number | null, latest_seq: number | null = null) => ({
  snapshot: buildSnapshot({
    run_id: 'run-1',
    scope,
    manifest: { capabilities: {}, permissions: { history: ['page'] } },
    policy: { resource: {}, state: { enable_state: true, state_scopes: ['conversation'] } },
    catalog: { models: [], tools: [], knowledge_bases: [] },
    limits: {
      max_payload_bytes: 1,
      max_state_value_bytes: 1,
      max_storage_value_bytes: 1,
      calls_per_second: 1,
      burst: 1,
    },
    deadline_at_ms,
  }),
  state: { conversation: { 'external.conversation_id': 'c1' } },
  latest_seq,
  model_context_window_tokens: 128000,
});

describe('buildRunContext', () => {
  it('builds the protocol context: trigger, conversation, inline policy, runtime, config', () => {
    const { context, deadlineAtMs } = buildRunContext(
      'run-1',
      'evt-1',
      sub,
      agent({ timeout: 10 }),
      access(1_010_000, 7),
    );
    expect(deadlineAtMs).toBe(1_010_000);
    expect(context.context).toMatchObject({ latest_cursor: '7', transcript_seq: 7, has_history_before: true });
    expect(context.context?.available_apis).toMatchObject({
      history_page: true,
      history_search: false,
      state: true,
      run_get: true,
    });
    expect(context.state?.conversation).toEqual({ 'external.conversation_id': 'c1' });
    expect(context.runtime).toMatchObject({ trace_id: 'run-1', deadline_at: 1010, protocol_version: '1' });
    expect(context.runtime?.metadata).toMatchObject({ model_context_window_tokens: 128000 });
    expect(context.trigger).toEqual({ type: 'message.received', source: 'platform', timestamp: 1700000000 });
    expect(context.conversation).toMatchObject({ conversation_id: 'c1', thread_id: 't1', sender_id: 'u1' });
    expect(context.context?.inline_policy).toEqual({
      mode: 'current_event',
      delivered_count: 0,
      messages_complete: false,
      reason: 'current_event_only',
    });
    expect(context.config).toEqual({ timeout: 10 });
    // The runner gets the input as sent, base64 included.
    expect(context.input?.contents[0].image_base64).toBe('QUJD');
  });

  it('takes the available APIs and storage flags from the snapshot', () => {
    const a = access(null);
    const { context } = buildRunContext('r', 'e', sub, agent({}), a);
    expect(context.context?.available_apis).toEqual(a.snapshot.available_apis);
    expect(context.resources?.storage).toEqual({
      plugin_storage: 'plugin' in a.snapshot.storage,
      workspace_storage: 'workspace' in a.snapshot.storage,
      binding_storage: 'binding' in a.snapshot.storage,
    });
  });

  it('has no deadline when the snapshot has none', () => {
    const { context, deadlineAtMs } = buildRunContext('r', 'e', sub, agent({ timeout: 0 }), access(null));
    expect(deadlineAtMs).toBeNull();
    expect(context.runtime?.deadline_at).toBeUndefined();
    expect(context.context).toMatchObject({ has_history_before: false });
  });

  it('stores only the resolved delivery context, the conversation and the actor: no input, no grants, no state, no base64', () => {
    const built = buildRunContext('r', 'e', { ...sub, delivery: { surface: 'slack' } }, agent({}), access(null));
    const stored = storedContext(built.context);
    expect(Object.keys(stored)).toEqual(['delivery', 'conversation', 'actor']);
    // An interaction submission becomes a new event of this conversation (interactions.service.ts).
    expect(stored.conversation).toMatchObject({ conversation_id: 'c1', thread_id: 't1' });
    expect(stored.delivery).toMatchObject(JSON.parse(JSON.stringify(built.context.delivery)) as object);
    expect(stored.delivery).toMatchObject({ surface: 'slack' });
    const json = JSON.stringify(stored);
    expect(json).not.toContain('QUJD');
    expect(json).not.toContain('external.conversation_id');
  });

  it('gives null for unset delivery fields in its JSON form', () => {
    const built = buildRunContext('r', 'e', sub, agent({}), access(null));
    const stored = storedContext(built.context) as { delivery: Record<string, unknown> };
    const unset = Object.entries(built.context.delivery!).filter(([, v]) => v === undefined);
    for (const [k] of unset) {
      expect(stored.delivery[k]).toBeNull();
    }
    expect(storedContext({ ...built.context, delivery: undefined })).toMatchObject({ delivery: null });
  });
});

describe('redactSubmission', () => {
  it('removes base64 payloads and inline attachment contents from what is stored', () => {
    const stored = JSON.stringify(redactSubmission(sub));
    expect(stored).not.toContain('QUJD');
    expect(stored).toContain('content_redacted');
    expect(sub.input.contents?.[0].image_base64).toBe('QUJD');
  });

  it('with the body text given, still removes them', () => {
    const stored = JSON.stringify(redactSubmission(sub, JSON.stringify(sub)));
    expect(stored).not.toContain('QUJD');
    expect(stored).toBe(JSON.stringify(redactSubmission(sub)));
  });

  it('with the body text given and nothing to remove, is the same copy as without it', () => {
    const plain = {
      ...sub,
      input: {
        text: 'hi',
        contents: [{ type: 'text', text: 'x' }],
        attachments: [{ attachment_id: 'f1', url: 'https://x/y', content: undefined }],
      },
      locale: undefined,
    } as unknown as EventSubmission;
    const copy = redactSubmission(plain, JSON.stringify(plain));
    expect(copy).toEqual(redactSubmission(plain));
    expect(JSON.stringify(copy)).toBe(JSON.stringify(redactSubmission(plain)));
    expect(copy).not.toBe(plain);
  });
});

describe('asJson (a context part as protocol JSON)', () => {
  const viaText = (part: object) =>
    JSON.parse(JSON.stringify(part, (_k, v: unknown) => (v === undefined ? null : v))) as unknown;
  /** Seeded values of plain JSON with undefined, non-finite numbers, -0, holes, integer-like and odd keys. */
  function randomValue(next: () => number, depth: number): unknown {
    const pick = Math.floor(next() * (depth > 3 ? 7 : 9));
    const leaves: unknown[] = ['', 'text é 😀', 0, -0, 1.5, -7, NaN, Infinity, true, false, null, undefined];
    if (pick < 7) {
      return leaves[Math.floor(next() * leaves.length)];
    }
    if (pick === 7) {
      const list = Array.from({ length: Math.floor(next() * 4) }, () => randomValue(next, depth + 1));
      if (next() < 0.2) {
        list.length += 2; // holes
      }
      return list;
    }
    const keys = ['a', 'b_c', '10', '2', '__proto__', 'constructor', 'zé'];
    const out: Record<string, unknown> = next() < 0.2 ? (Object.create(null) as Record<string, unknown>) : {};
    for (let i = Math.floor(next() * 5); i > 0; i--) {
      const key = keys[Math.floor(next() * keys.length)];
      Object.defineProperty(out, key, {
        value: randomValue(next, depth + 1),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }

  it('equals the JSON route, key order included, on 2,000 seeded parts', () => {
    let seed = 0x2026;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 2000; i++) {
      const part = { value: randomValue(next, 0) };
      const got = asJson(part);
      const want = viaText(part);
      expect(got).toEqual(want);
      expect(JSON.stringify(got)).toBe(JSON.stringify(want));
      expect(Object.is((got as { value: unknown }).value, -0)).toBe(false);
    }
  });

  it('takes the JSON route for a toJSON, a Date, a function or a symbol, and is null when absent', () => {
    const part = {
      at: new Date(5),
      own: { toJSON: () => 'mine' },
      f: () => 1,
      s: Symbol('x'),
      list: [() => 1, undefined],
    };
    expect(asJson(part)).toEqual(viaText(part));
    expect(asJson(part)).toEqual({ at: new Date(5).toISOString(), own: 'mine', list: [null, null] });
    expect(asJson(undefined)).toBeNull();
  });
});
