import * as fc from 'fast-check';
import { extremeNumber, headerValue, mutated, nastyString, pathSegment, queryString, serialise } from './arbitraries';

/** One generated HTTP request. */
export interface FuzzRequest {
  method: string;
  path: string;
  body?: string;
  auth: 'admin' | 'platform' | 'none' | 'garbage';
  headers: Record<string, string>;
}

/** Placeholders replaced at send time so that valid bodies do not collide with earlier cases. */
const FRESH_ID = '__fresh_id__';

export function templates(runnerId: string) {
  const agentBody = {
    runner_id: runnerId,
    description: 'fuzz',
    runner_config: { timeout: 10, mode: 'echo' },
    resource_policy: { allowed_model_ids: [], allow_all_tools: false, history: ['page'], allow_binding_storage: true },
    state_policy: { enable_state: true, state_scopes: ['conversation'] },
    delivery_policy: { edit_interval_ms: 100, max_message_size: 1000 },
    concurrency_policy: { mode: 'queue' },
  };
  const modelBody = {
    kind: 'chat',
    provider: 'openai',
    base_url: 'http://127.0.0.1:9/v1',
    api_key_env: 'FUZZ_MODEL_KEY',
    model_name: 'm',
    context_window: 1000,
    max_output_tokens: 100,
    abilities: { tool_calling: true },
    tokenizer: 'cl100k_base',
    extra_args: { temperature: 0 },
  };
  const toolSourceBody = {
    kind: 'http',
    config: { tools: [{ name: 't', url: 'http://127.0.0.1:9/x', method: 'GET' }], timeout_ms: 100 },
    enabled: true,
  };
  return {
    event: {
      agent_id: 'fuzz-agent',
      event: {
        event_id: FRESH_ID,
        event_type: 'message.received',
        source: 'api',
        event_time: 1_700_000_000,
        data: { k: 'v', n: [1, 2] },
        raw_ref: { ref_id: 'r' },
      },
      conversation: { conversation_id: FRESH_ID, thread_id: 't' },
      actor: { actor_type: 'user', actor_id: 'u', metadata: { a: 1 } },
      subject: { subject_type: 's', data: { b: true } },
      input: {
        text: 'hello fuzz',
        contents: [{ type: 'text', text: 'x' }],
        attachments: [{ type: 'file', size: 1, name: 'n', url: 'http://x' }],
      },
      delivery: { surface: 'api', max_message_size: 100, reply_target: { r: 1 } },
      locale: 'en_US',
      timezone: 'UTC',
      metadata: { m: 1 },
    },
    agent: { agent_id: FRESH_ID, ...agentBody },
    agentReplace: { ...agentBody },
    model: { model_id: FRESH_ID, ...modelBody },
    modelReplace: modelBody,
    kb: { kb_id: FRESH_ID, name: 'n', description: 'd', chunk_size: 1000, chunk_overlap: 100 },
    document: { name: 'd.md', content_type: 'text/markdown', content: '# hi\nsome text', metadata: { a: 1 } },
    search: { query_text: 'some', top_k: 5, filters: {} },
    apiKey: { name: 'k', role: 'platform' },
    plugin: { author: FRESH_ID, name: 'p' },
    toolSource: { source_id: FRESH_ID, ...toolSourceBody },
    toolSourceReplace: toolSourceBody,
    builtin: { enabled: true },
    cancel: { reason: 'fuzz' },
  };
}

let fresh = 0;
/** The body text, with each placeholder replaced by a new id. */
export function bodyText(value: unknown): string {
  return serialise(value).replace(new RegExp(`"${FRESH_ID}"`, 'g'), () => `"fz-${process.pid}-${++fresh}"`);
}

const auth = fc.constantFrom<FuzzRequest['auth']>(
  'admin',
  'admin',
  'admin',
  'admin',
  'admin',
  'admin',
  'platform',
  'none',
  'garbage',
);
const contentType = fc.constantFrom(
  'application/json',
  'application/json',
  'application/json',
  'application/json; charset=utf-8',
  'text/plain',
  'application/json; charset=latin1',
  'application/x-www-form-urlencoded',
);

/** A body: a mutated valid one mostly, garbage text sometimes. */
function body(template: Record<string, unknown>): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 8, arbitrary: mutated(template).map(bodyText) },
    { weight: 1, arbitrary: nastyString.map((s) => s) },
    { weight: 1, arbitrary: fc.constantFrom('{', '[]', 'null', '"x"', '{"a":1}}', '{"__proto__":{"x":1}}') },
  );
}

function req(
  method: string,
  pathArb: fc.Arbitrary<string>,
  bodyArb?: fc.Arbitrary<string>,
  extraHeaders: fc.Arbitrary<Record<string, string>> = fc.constant({}),
): fc.Arbitrary<FuzzRequest> {
  return fc
    .record({ path: pathArb, body: bodyArb ?? fc.constant(undefined), auth, ct: contentType, extra: extraHeaders })
    .map(({ path, body: b, auth: a, ct, extra }) => ({
      method,
      path,
      body: b,
      auth: a,
      headers: { ...(b !== undefined ? { 'content-type': ct } : {}), ...extra },
    }));
}

/** Ids of real runs, filled in by the test once it has them: paths then reach past the 404. */
export const knownRunIds: string[] = [];
const runSeg = fc.oneof(
  pathSegment,
  fc.nat().map((i) => (knownRunIds.length > 0 ? knownRunIds[i % knownRunIds.length] : 'no-run-yet')),
);
const seg = pathSegment;
const q = queryString;
const p = (...parts: (string | fc.Arbitrary<string>)[]) =>
  fc.tuple(...parts.map((x) => (typeof x === 'string' ? fc.constant(x) : x))).map((xs) => xs.join(''));

/** Every HTTP route of the host (apps/host/src/http/**), grouped by area. */
export function routeGroups(runnerId: string): Record<string, fc.Arbitrary<FuzzRequest>> {
  const t = templates(runnerId);
  return {
    events: req(
      'POST',
      fc.constant('/v1/events'),
      body(t.event),
      fc
        .option(headerValue, { nil: undefined })
        .map((k): Record<string, string> => (k === undefined ? {} : { 'idempotency-key': k })),
    ),
    runs: fc.oneof(
      req('GET', p('/v1/runs', q)),
      req('GET', p('/v1/runs/', runSeg)),
      req('POST', p('/v1/runs/', runSeg, '/cancel'), body(t.cancel)),
      req('POST', p('/v1/runs/', runSeg, '/stream-tokens')),
      req(
        'GET',
        p('/v1/runs/', runSeg, '/events', q),
        undefined,
        headerValue.map((v) => ({ 'last-event-id': v })),
      ),
    ),
    conversations: req('GET', p('/v1/conversations/', seg, '/transcript', q)),
    agents: fc.oneof(
      req('POST', fc.constant('/v1/admin/agents'), body(t.agent)),
      req('GET', p('/v1/admin/agents', q)),
      req('GET', p('/v1/admin/agents/', seg)),
      req('PUT', p('/v1/admin/agents/', seg), body(t.agentReplace)),
      req('DELETE', p('/v1/admin/agents/', seg)),
    ),
    keysPluginsRunners: fc.oneof(
      req('POST', fc.constant('/v1/admin/api-keys'), body(t.apiKey)),
      req('GET', p('/v1/admin/api-keys', q)),
      req('DELETE', p('/v1/admin/api-keys/', seg)),
      req('POST', fc.constant('/v1/admin/plugins'), body(t.plugin)),
      req('GET', p('/v1/admin/plugins', q)),
      req('POST', p('/v1/admin/plugins/', seg, '/', seg, '/token')),
      req('DELETE', p('/v1/admin/plugins/', seg, '/', seg)),
      req('GET', p('/v1/admin/runners', q)),
    ),
    models: fc.oneof(
      req('POST', fc.constant('/v1/admin/models'), body(t.model)),
      req('GET', p('/v1/admin/models', q)),
      req('GET', p('/v1/admin/models/', seg)),
      req('PUT', p('/v1/admin/models/', seg), body(t.modelReplace)),
      req('DELETE', p('/v1/admin/models/', seg)),
    ),
    knowledge: fc.oneof(
      req('POST', fc.constant('/v1/admin/knowledge-bases'), body(t.kb)),
      req('GET', p('/v1/admin/knowledge-bases', q)),
      req('GET', p('/v1/admin/knowledge-bases/', seg)),
      req('DELETE', p('/v1/admin/knowledge-bases/', seg)),
      req('POST', p('/v1/admin/knowledge-bases/', seg, '/documents'), body(t.document)),
      req('GET', p('/v1/admin/knowledge-bases/', seg, '/documents', q)),
      req('GET', p('/v1/admin/knowledge-bases/', seg, '/documents/', seg)),
      req('DELETE', p('/v1/admin/knowledge-bases/', seg, '/documents/', seg)),
      req('POST', p('/v1/admin/knowledge-bases/', seg, '/search'), body(t.search)),
    ),
    tools: fc.oneof(
      req('GET', p('/v1/admin/tools', q)),
      req('PUT', p('/v1/admin/tools/builtins/', seg), body(t.builtin)),
      req('POST', fc.constant('/v1/admin/tools/sources'), body(t.toolSource)),
      req('GET', p('/v1/admin/tools/sources', q)),
      req('GET', p('/v1/admin/tools/sources/', seg)),
      req('PUT', p('/v1/admin/tools/sources/', seg), body(t.toolSourceReplace)),
      req('DELETE', p('/v1/admin/tools/sources/', seg)),
      req('POST', p('/v1/admin/tools/sources/', seg, '/refresh')),
    ),
    inspection: fc.oneof(
      req('GET', p('/v1/admin/runs/', runSeg, '/authorization')),
      req('GET', p('/v1/admin/runs/', runSeg, '/audit', q)),
      // Cursors and limits at the edges of the integer columns, on a run that exists.
      req(
        'GET',
        p(
          '/v1/admin/runs/',
          runSeg.filter(() => knownRunIds.length > 0).map(() => knownRunIds[0]),
          '/audit?cursor=',
          fc.oneof(extremeNumber.map(String), fc.constantFrom('1e23', '99999999999', '-1', '0x10')),
        ),
      ),
    ),
    healthAndUnknown: fc.oneof(
      req('GET', fc.constant('/health/live')),
      req('GET', fc.constant('/health/ready')),
      req('GET', p('/', seg)),
      req('POST', p('/v1/', seg), body({ a: 1 })),
      req('PATCH', p('/v1/admin/agents/', seg), body({ a: 1 })),
    ),
  };
}
