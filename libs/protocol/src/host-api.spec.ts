import { DomainError } from './errors';
import {
  HOST_API_REQUESTS,
  MAX_EVENT_PAGE_TYPES,
  MAX_STEERING_PULL_WAIT_MS,
  historyPageSchema,
  hostApiRequest,
  toolDetailSchema,
  type HostApiAction,
} from './host-api';
import { agentRunContextSchema, chatMessageSchema, agentSteeringItemSchema } from './agent-shapes';

/** The DomainError hostApiRequest throws for `req`, or fails the test when it parses. */
function refusal(action: HostApiAction, req: unknown): DomainError {
  try {
    hostApiRequest(action, req);
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    return e as DomainError;
  }
  throw new Error(`${action} accepted ${JSON.stringify(req)}`);
}

describe('host-API request schemas', () => {
  it('has one schema per action of the host API (docs/protocol.md#host-api)', () => {
    expect(Object.keys(HOST_API_REQUESTS).sort()).toEqual(
      [
        'event.get',
        'event.page',
        'history.page',
        'history.search',
        'knowledge.retrieve',
        'model.count_tokens',
        'model.invoke',
        'model.rerank',
        'model.stream',
        'prompt.get',
        'run.get',
        'state.delete',
        'state.get',
        'state.list',
        'state.set',
        'steering.pull',
        'storage.delete',
        'storage.get',
        'storage.list',
        'storage.set',
        'tool.call',
        'tool.detail',
      ].sort(),
    );
  });

  it('parses a valid request and drops the fields an adapter passed along (run_id)', () => {
    expect(hostApiRequest('state.get', { run_id: 'r1', scope: 'conversation', key: 'k' })).toEqual({
      scope: 'conversation',
      key: 'k',
    });
    expect(hostApiRequest('model.count_tokens', { model_id: 'm', messages: [{ role: 'user' }] })).toEqual({
      model_id: 'm',
      messages: [{ role: 'user' }],
      tools: [],
    });
    expect(hostApiRequest('event.page', {})).toEqual({ event_types: [] });
    const types = Array.from({ length: MAX_EVENT_PAGE_TYPES }, (_, i) => `t${i}`);
    expect(hostApiRequest('event.page', { event_types: types })).toEqual({ event_types: types });
  });

  it.each([
    ['event.get', { event_id: '' }, 'event_id: is required', 'event_id'],
    ['storage.get', { area: 'x', key: 'k' }, 'area: must be "plugin", "workspace" or "binding"', 'area'],
    [
      'storage.set',
      { area: 'plugin', key: 'line\nbreak', value: Buffer.from('v') },
      'key: must be 1-255 characters without control characters',
      'key',
    ],
    ['storage.delete', { area: 'plugin', key: 'k'.repeat(256) }, 'key: must be 1-255', 'key'],
    ['storage.set', { area: 'plugin', key: 'k', value: 'not bytes' }, 'value: must be bytes', 'value'],
    ['tool.call', { tool_name: 't', parameters: [1] }, 'parameters: must be an object', 'parameters'],
    ['tool.call', { tool_name: 't', parameters: 'x' }, 'parameters: must be an object', 'parameters'],
    ['steering.pull', { mode: 'some' }, 'mode: must be "all" or "one"', 'mode'],
    ['steering.pull', { limit: 0 }, 'limit: must be > 0', 'limit'],
    ['steering.pull', { limit: 1.5 }, 'limit: must be an integer', 'limit'],
    ['steering.pull', { wait_ms: -1 }, 'wait_ms: must be >= 0', 'wait_ms'],
    ['steering.pull', { wait_ms: MAX_STEERING_PULL_WAIT_MS + 1 }, 'wait_ms: must be at most 30000', 'wait_ms'],
    ['model.invoke', { model_id: 'm', messages: ['hi'] }, 'messages.0:', 'messages.0'],
    ['model.rerank', { model_id: 'm', query: 'q', documents: [1] }, 'documents.0:', 'documents.0'],
    ['state.list', { scope: 'conversation', limit: '5' }, 'limit:', 'limit'],
    ['history.page', { include_attachments: 'yes' }, 'include_attachments:', 'include_attachments'],
    [
      'event.page',
      { event_types: Array.from({ length: MAX_EVENT_PAGE_TYPES + 1 }, (_, i) => `t${i}`) },
      'event_types: at most 100 event types',
      'event_types',
    ],
  ] as const)('%s refuses %j naming the field', (action, req, message, field) => {
    const e = refusal(action, req);
    expect(e.code).toBe('invalid_argument');
    expect(e.message.startsWith(message)).toBe(true);
    expect(e.details).toEqual({ field });
  });

  it('takes JSON objects that carry symbol-keyed bookkeeping, passing on their string keys', () => {
    const message: Record<string | symbol, unknown> = { role: 'user', content: 'hi' };
    message[Symbol('cursor')] = 3;
    expect(hostApiRequest('model.count_tokens', { model_id: 'm', messages: [message] }).messages).toEqual([
      { role: 'user', content: 'hi' },
    ]);
  });

  it('names the request itself when it is not an object', () => {
    const e = refusal('run.get', 'nope');
    expect(e.details).toEqual({ field: 'request' });
  });

  it('reads the steering modes and their aliases as "all" or "one"', () => {
    expect(hostApiRequest('steering.pull', { mode: 'ALL' }).mode).toBe('all');
    expect(hostApiRequest('steering.pull', { mode: 'one-at-a-time', wait_ms: 0 })).toEqual({ mode: 'one', wait_ms: 0 });
    expect(hostApiRequest('steering.pull', {}).mode).toBeUndefined();
  });

  it('keeps storage bytes as they are and narrows the area', () => {
    const value = Buffer.from([0, 1, 2]);
    const parsed = hostApiRequest('storage.set', { area: 'workspace', key: 'a/b', value });
    expect(parsed.area).toBe('workspace');
    expect(parsed.value).toBe(value);
  });
});

describe('the shapes the host and the local agent share', () => {
  it('keeps unknown fields of a message and of a run context', () => {
    const message = { role: 'assistant', content: 'hi', reasoning_content: 'why', tool_calls: null };
    expect(chatMessageSchema.parse(message)).toEqual(message);
    const context = { run_id: 'r', event: { event_id: 'e', extra: 1 }, labels: { a: 'b' } };
    expect(agentRunContextSchema.parse(context)).toEqual(context);
  });

  it('names the field of a message that does not fit', () => {
    const r = chatMessageSchema.safeParse({ role: 'user', content: [{ text: 'no type' }] });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0].path).toEqual(['content']);
    expect(chatMessageSchema.safeParse({ content: 'no role' }).error?.issues[0].path).toEqual(['role']);
  });

  it('reads a run context without a run id as invalid', () => {
    expect(agentRunContextSchema.safeParse({ input: { text: 'x' } }).error?.issues[0].path).toEqual(['run_id']);
  });

  it('reads the host answers the agent gets', () => {
    expect(agentSteeringItemSchema.parse({ event: { event_id: 'e2' }, input: { text: 'more' } })).toMatchObject({
      input: { text: 'more' },
    });
    expect(
      historyPageSchema.parse({
        items: [{ role: 'user', content: 'x', content_json: {}, seq: 1, cursor: '1', transcript_id: 't' }],
        next_cursor: null,
        has_more: false,
      }).items[0],
    ).toMatchObject({ transcript_id: 't', seq: 1 });
    expect(toolDetailSchema.safeParse({ description: 'no name' }).error?.issues[0].path).toEqual(['name']);
  });
});
