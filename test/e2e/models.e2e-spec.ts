import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { ScriptedOpenAIServer, scripts } from '@libs/testing';
import { Host, TestDatabase, dbRows, event, waitFor } from './harness';
import { HostApiClient } from './host-api-client';
import { RawPlugin, fromStruct, manifestFor, rawPkg, toStruct } from './raw-plugin';

/*
 * Models through the host, end to end: the admin API registers models (the key by reference,
 * an environment variable the host gets at start), a hand-driven runner plugin with model
 * permissions calls InvokeModel / StreamModel / CountTokens / Rerank over real gRPC during a run,
 * the host calls the scripted OpenAI-compatible server (started in this process) with the real
 * openai SDK over real HTTP. Checked: answers, provider errors as protocol errors with details,
 * refusals audited, model_usage rows, and the key in no API response and no host log line.
 */

jest.setTimeout(120_000);

const S = grpc.status;
const KEY = `sk-scripted-${randomBytes(20).toString('hex')}`;
const PERMISSIONS = { models: ['invoke', 'stream', 'count_tokens', 'rerank'] };

interface RawError {
  code: grpc.status;
  xcode: string | undefined;
  xdetails: Record<string, unknown>;
  details: string;
}

function rawError(e: grpc.ServiceError): RawError {
  const details = e.metadata?.get('x-error-details')[0];
  return {
    code: e.code,
    xcode: e.metadata?.get('x-error-code')[0] as string | undefined,
    xdetails: details ? JSON.parse(String(details)) : {},
    details: e.details,
  };
}

describe('models through the host (admin API, gRPC model RPCs, scripted provider)', () => {
  const db = new TestDatabase();
  const host = new Host(db, { SCRIPTED_KEY: KEY, SECRET_ENV_ALLOWLIST: 'SCRIPTED_KEY' });
  let server: ScriptedOpenAIServer;
  let plugin: RawPlugin;
  let token: string;
  let api: HostApiClient;
  let raw: any;
  /** Every HTTP and gRPC answer the tests saw, as text: none may contain the key. */
  const seen: string[] = [];
  const runs: string[] = [];

  const admin = async (method: string, path: string, body?: unknown) => {
    const r = await host.api(method, path, body);
    seen.push(JSON.stringify(r.body ?? null));
    return r;
  };
  const md = () => {
    const m = new grpc.Metadata();
    m.set('authorization', `Bearer ${token}`);
    return m;
  };
  const msgs = (text: string) => [toStruct({ role: 'user', content: text })];

  /** StreamModel: every item ({chunk} or {usage}), or the error that ended the stream. */
  const stream = (req: Record<string, unknown>) =>
    new Promise<{ items: any[]; err?: RawError }>((resolve) => {
      const items: any[] = [];
      const call = raw.StreamModel(req, md(), { deadline: new Date(Date.now() + 20_000) });
      call.on('data', (c: any) => {
        const item = c.chunk ? { chunk: fromStruct(c.chunk) } : { usage: fromStruct(c.usage) };
        seen.push(JSON.stringify(item));
        items.push(item);
      });
      call.on('error', (e: grpc.ServiceError) => {
        seen.push(e.details, JSON.stringify(e.metadata?.getMap() ?? {}));
        resolve({ items, err: rawError(e) });
      });
      call.on('end', () => resolve({ items }));
    });
  /** A unary call with the raw client: the answer, or the error with its x-error-details. */
  const unary = (method: string, req: Record<string, unknown>) =>
    new Promise<{ res?: any; err?: RawError }>((resolve) => {
      raw[method](req, md(), (e: grpc.ServiceError | null, res: any) => {
        if (e) {
          seen.push(e.details, JSON.stringify(e.metadata?.getMap() ?? {}));
          resolve({ err: rawError(e) });
        } else {
          seen.push(JSON.stringify(res));
          resolve({ res });
        }
      });
    });
  const startRun = async (agentId: string) => {
    const r = await host.api('POST', '/v1/events', event(agentId, 'use the model'));
    expect(r.status).toBe(202);
    const msg = await plugin.next();
    expect(msg.run.context.run_id).toBe(r.body.run_id);
    runs.push(r.body.run_id);
    return r.body.run_id as string;
  };
  const audit = async (runId: string) => (await admin('GET', `/v1/admin/runs/${runId}/audit?limit=100`)).body.items;

  beforeAll(async () => {
    server = await ScriptedOpenAIServer.start();
    await host.start();
    token = (await host.api('POST', '/v1/admin/plugins', { author: 'mdl', name: 'raw' })).body.token;
    plugin = new RawPlugin(host.grpc, token);
    plugin.hello('mdl', 'raw', [manifestFor('mdl', 'raw', { permissions: PERMISSIONS })]);
    expect((await plugin.next()).welcome.runners).toHaveLength(1);
    api = new HostApiClient(host.grpc, token);
    raw = new rawPkg.runnerhost.v1.HostApiService(host.grpc, grpc.credentials.createInsecure());
  });

  afterAll(async () => {
    runs.forEach((runId, i) => plugin?.result(runId, 'run.completed', { finish_reason: 'stop' }, 1000 + i));
    await new Promise((r) => setTimeout(r, 300));
    raw?.close();
    api?.close();
    plugin?.close();
    await host.stop();
    await server?.close();
    await db.drop();
  });

  it('registers models over the admin API, validating strictly; the key is referenced, never returned', async () => {
    const chat = {
      model_id: 'scripted',
      kind: 'chat',
      provider: 'openai',
      base_url: server.baseUrl,
      api_key_env: 'SCRIPTED_KEY',
      model_name: 'scripted-gpt',
      context_window: 128000,
      max_output_tokens: 4096,
      abilities: { tool_calling: true, vision: true, streaming: true },
      tokenizer: 'o200k_base',
    };
    const created = await admin('POST', '/v1/admin/models', chat);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      model_id: 'scripted',
      model_type: 'llm',
      api_key_env: 'SCRIPTED_KEY',
      api_key_set: true,
    });
    const rerank = {
      kind: 'rerank',
      base_url: server.baseUrl,
      api_key_env: 'SCRIPTED_KEY',
      model_name: 'scripted-rerank',
    };
    expect((await admin('POST', '/v1/admin/models', { model_id: 'scripted-rerank', ...rerank })).status).toBe(201);
    expect((await admin('POST', '/v1/admin/models', { ...chat, model_id: 'ungranted' })).status).toBe(201);
    expect(
      (await admin('POST', '/v1/admin/models', { ...chat, model_id: 'no-tokenizer', tokenizer: null })).status,
    ).toBe(201);

    const refusals: [Record<string, unknown>, string][] = [
      [{ ...chat, model_id: 'x1', base_url: 'not a url' }, 'base_url'],
      [{ ...chat, model_id: 'x2', base_url: 'https://user:pw@example.test/v1' }, 'base_url'],
      [{ ...chat, model_id: 'x3', api_key_env: KEY }, 'api_key_env'],
      [{ ...chat, model_id: 'x4', api_key_env: 'ADMIN_API_KEY' }, 'api_key_env'],
      [{ ...chat, model_id: 'x5', context_window: 1.5 }, 'context_window'],
      [{ ...chat, model_id: 'x6', tokenizer: 'llama' }, 'tokenizer'],
      [{ ...chat, model_id: 'x7', abilities: { telepathy: true } }, 'abilities.telepathy'],
      [{ ...chat, model_id: 'bad id' }, 'model_id'],
      [{ ...chat, model_id: 'x8', extra_args: { messages: [] } }, 'extra_args.messages'],
      [{ ...chat, model_id: 'x9', api_key: KEY }, 'api_key'],
    ];
    for (const [body, field] of refusals) {
      const r = await admin('POST', '/v1/admin/models', body);
      expect({ status: r.status, code: r.body.error.code, field: r.body.error.details.field }).toEqual({
        status: 400,
        code: 'invalid_argument',
        field,
      });
    }
    expect((await admin('POST', '/v1/admin/models', chat)).status).toBe(409);

    const list = await admin('GET', '/v1/admin/models?limit=10');
    expect(list.body.items.map((m: any) => m.model_id)).toEqual([
      'no-tokenizer',
      'scripted',
      'scripted-rerank',
      'ungranted',
    ]);
    const { model_id: _id, ...body } = chat;
    const replaced = await admin('PUT', '/v1/admin/models/scripted', { ...body, extra_args: { temperature: 0 } });
    expect(replaced.status).toBe(200);
    expect(replaced.body.extra_args).toEqual({ temperature: 0 });
    expect((await admin('GET', '/v1/admin/models/scripted')).body.extra_args).toEqual({ temperature: 0 });
    expect((await admin('POST', '/v1/admin/models', { ...chat, model_id: 'temp' })).status).toBe(201);
    expect((await admin('DELETE', '/v1/admin/models/temp')).status).toBe(204);
    expect((await admin('GET', '/v1/admin/models/temp')).status).toBe(404);
    expect((await admin('PUT', '/v1/admin/models/temp', body)).status).toBe(404);

    const agent = (agent_id: string, allowed_model_ids: string[]) =>
      admin('POST', '/v1/admin/agents', {
        agent_id,
        runner_id: 'plugin:mdl/raw/default',
        resource_policy: { allowed_model_ids },
      });
    expect((await agent('model-user', ['scripted', 'scripted-rerank', 'no-tokenizer'])).status).toBe(201);
    const unknown = await agent('bad-agent', ['nope']);
    expect(unknown.body.error.details.field).toBe('resource_policy.allowed_model_ids[0]');
  });

  it('grants what the manifest and the policy both allow, with the catalogue type and provider', async () => {
    const runId = await startRun('model-user');
    const authz = await admin('GET', `/v1/admin/runs/${runId}/authorization`);
    expect(authz.body.authorization.resources.models).toEqual([
      { model_id: 'scripted', model_type: 'llm', provider: 'openai', operations: ['invoke', 'stream', 'count_tokens'] },
      { model_id: 'scripted-rerank', model_type: 'rerank', provider: 'openai-compatible', operations: ['rerank'] },
      {
        model_id: 'no-tokenizer',
        model_type: 'llm',
        provider: 'openai',
        operations: ['invoke', 'stream', 'count_tokens'],
      },
    ]);
  });

  it('InvokeModel: the provider gets the mapped request with the key; the runner gets a Protocol message and usage', async () => {
    const runId = runs[0];
    server.chat(
      scripts.reply('<think>plan</think>\nHello from the model', {
        usage: { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 },
      }),
    );
    const r = await api.call('InvokeModel', {
      run_id: runId,
      model_id: 'scripted',
      messages: [
        { role: 'system', content: 'be brief' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'hi' },
            { type: 'image_base64', image_base64: 'iVBORw0KGgo=' },
          ],
        },
      ],
      tools: [
        {
          name: 'search',
          description: 'Search',
          parameters: { type: 'object', properties: { q: { type: 'string' } } },
        },
      ],
      remove_think: true,
    } as any);
    expect(r.err).toBeUndefined();
    seen.push(JSON.stringify(r.res));
    expect(r.res!.message).toEqual({
      role: 'assistant',
      content: 'Hello from the model',
      provider_specific_fields: { finish_reason: 'stop' },
    });
    expect(r.res!.usage).toEqual({ prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 });
    const sent = server.last()!;
    expect(sent.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(sent.body).toMatchObject({
      model: 'scripted-gpt',
      temperature: 0,
      stream: false,
      messages: [
        { role: 'system', content: 'be brief' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'hi' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
          ],
        },
      ],
      tools: [{ type: 'function', function: { name: 'search', description: 'Search' } }],
    });
  });

  it('StreamModel: text chunks, tool calls assembled from split deltas, then one usage-only item', async () => {
    server.chat(
      scripts.completion({
        deltas: ['Let me ', 'check.'],
        tool_calls: [{ id: 'call_1', name: 'search', arguments: '{"q": "weather in Oslo"}' }],
        argument_pieces: 5,
        usage: { prompt_tokens: 20, completion_tokens: 9, total_tokens: 29 },
      }),
    );
    const { items, err } = await stream({ run_id: runs[0], model_id: 'scripted', messages: msgs('weather?') });
    expect(err).toBeUndefined();
    expect(items.map((i) => i.chunk?.content ?? i.usage)).toEqual([
      'Let me ',
      'check.',
      '',
      { prompt_tokens: 20, completion_tokens: 9, total_tokens: 29 },
    ]);
    expect(items[2].chunk).toMatchObject({
      is_final: true,
      all_content: 'Let me check.',
      tool_calls: [
        { id: 'call_1', type: 'function', function: { name: 'search', arguments: '{"q": "weather in Oslo"}' } },
      ],
      provider_specific_fields: { finish_reason: 'tool_calls' },
    });
    expect(server.last()!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });

  it('CountTokens counts with the model tokenizer; a model without one fails closed', async () => {
    const r = await api.call('CountTokens', {
      run_id: runs[0],
      model_id: 'scripted',
      messages: [{ role: 'user', content: 'hello world' }],
    });
    // 3 per message + "user" (1) + "hello world" (2) + 3 to prime the reply, in o200k_base
    expect(r.res).toEqual({ tokens: 9 });
    const none = await unary('CountTokens', { run_id: runs[0], model_id: 'no-tokenizer', messages: msgs('x') });
    expect(none.err).toMatchObject({ code: S.UNAVAILABLE, xcode: 'unavailable', xdetails: { reason: 'no_tokenizer' } });
  });

  it('Rerank: results sorted by score, top_k kept; more than 64 documents refused', async () => {
    const documents = ['ducks swim', 'cats purr', 'ducks quack loudly'];
    const r = await unary('Rerank', {
      run_id: runs[0],
      model_id: 'scripted-rerank',
      query: 'ducks quack',
      documents,
      top_k: 2,
    });
    expect(r.res.results).toEqual([
      { index: 2, relevance_score: 1 },
      { index: 0, relevance_score: 0.5 },
    ]);
    expect(server.last()!).toMatchObject({ path: '/v1/rerank', body: { model: 'scripted-rerank', top_n: 2 } });
    const many = await unary('Rerank', {
      run_id: runs[0],
      model_id: 'scripted-rerank',
      query: 'q',
      documents: Array(65).fill('d'),
    });
    expect(many.err).toMatchObject({ code: S.INVALID_ARGUMENT, xdetails: { field: 'documents', limit: 64 } });
  });

  it('maps provider errors to protocol errors with their details, without the key', async () => {
    const call = { run_id: runs[0], model_id: 'scripted', messages: msgs('long') };
    server.chat(scripts.contextLengthExceeded());
    expect((await unary('InvokeModel', call)).err).toMatchObject({
      code: S.INVALID_ARGUMENT,
      xcode: 'invalid_argument',
      xdetails: { reason: 'context_length_exceeded' },
    });
    server.chat(scripts.rateLimited(3));
    expect((await unary('InvokeModel', call)).err).toMatchObject({
      code: S.RESOURCE_EXHAUSTED,
      xcode: 'rate_limited',
      xdetails: { reason: 'provider_rate_limited', retry_after_ms: 3000 },
    });
    server.chat(scripts.unauthorized(KEY));
    const unauth = (await unary('InvokeModel', call)).err!;
    expect(unauth).toMatchObject({ code: S.UNAUTHENTICATED, xcode: 'unauthenticated' });
    expect(unauth.details).not.toContain(KEY);
    server.chat(scripts.serverError(503));
    expect((await stream(call)).err).toMatchObject({ code: S.UNAVAILABLE, xcode: 'unavailable' });
    server.chat(scripts.malformed('bad_json'));
    const broken = await stream(call);
    expect(broken.items.length).toBeGreaterThan(0);
    expect(broken.err).toMatchObject({
      code: S.INTERNAL,
      xcode: 'runtime_error',
      xdetails: { reason: 'malformed_response' },
    });
  });

  it('refuses an ungranted model or operation with PERMISSION_DENIED, audited as denied', async () => {
    const runId = runs[0];
    const before = server.requests.length;
    const denied: [string, Record<string, unknown>, string][] = [
      ['InvokeModel', { model_id: 'ungranted', messages: msgs('x') }, 'model.invoke'],
      ['CountTokens', { model_id: 'ungranted', messages: msgs('x') }, 'model.count_tokens'],
      ['Rerank', { model_id: 'scripted', query: 'q', documents: ['d'] }, 'model.rerank'],
      ['InvokeModel', { model_id: 'scripted-rerank', messages: msgs('x') }, 'model.invoke'],
    ];
    for (const [method, req, action] of denied) {
      const r = await unary(method, { run_id: runId, ...req });
      expect(r.err).toMatchObject({ code: S.PERMISSION_DENIED, xcode: 'unauthorized' });
      expect((await audit(runId)).at(-1)).toMatchObject({ action, outcome: 'denied', error_code: 'unauthorized' });
    }
    const s = await stream({ run_id: runId, model_id: 'ungranted', messages: msgs('x') });
    expect(s.err).toMatchObject({ code: S.PERMISSION_DENIED });
    expect((await audit(runId)).at(-1)).toMatchObject({
      action: 'model.stream',
      resource: 'model:ungranted',
      outcome: 'denied',
    });
    expect(server.requests.length).toBe(before);
  });

  it('a run cancelled during a model call stops the provider call', async () => {
    const runId = await startRun('model-user');
    server.chat(scripts.hang());
    const asked = server.requests.length;
    const pending = stream({ run_id: runId, model_id: 'scripted', messages: msgs('slow') });
    // The cancel lands during the provider call: once the provider has the request, not after a delay.
    await waitFor('the provider call', () => Promise.resolve(server.requests.length > asked));
    const cancelled = host.api('POST', `/v1/runs/${runId}/cancel`, { reason: 'test' });
    const { err } = await pending;
    expect(err).toMatchObject({
      code: S.DEADLINE_EXCEEDED,
      xcode: 'deadline_exceeded',
      xdetails: { reason: 'cancelled' },
    });
    expect((await plugin.next()).cancel.run_id).toBe(runId);
    plugin.result(runId, 'run.failed', { error: 'cancelled', code: 'cancelled' }, 1);
    expect((await cancelled).status).toBe(200);
    runs.pop();
  });

  it('meters every proxied call in model_usage, incomplete when the provider gave no usage', async () => {
    const rows = (await dbRows(db, 'model_usage')).filter((r) => r.run_id === runs[0]);
    const summary = rows.map((r) => [
      r.model_id,
      r.operation,
      r.total_tokens === null ? null : Number(r.total_tokens),
      Boolean(r.complete),
    ]);
    expect(summary).toEqual([
      ['scripted', 'invoke', 16, true],
      ['scripted', 'stream', 29, true],
      ['scripted-rerank', 'rerank', expect.any(Number), true],
      ['scripted', 'invoke', null, false],
      ['scripted', 'invoke', null, false],
      ['scripted', 'invoke', null, false],
      ['scripted', 'stream', null, false],
      ['scripted', 'stream', null, false],
    ]);
  });

  it('the API key appears in no API response and no host log line', async () => {
    for (const path of ['/v1/admin/models', '/v1/admin/models/scripted', `/v1/admin/runs/${runs[0]}/audit?limit=100`]) {
      await admin('GET', path);
    }
    expect(seen.length).toBeGreaterThan(40);
    expect(seen.filter((s) => s.includes(KEY))).toEqual([]);
    expect(host.proc.logs()).not.toContain(KEY);
    expect(host.proc.logs()).not.toContain(KEY.slice(0, 16));
  });
});
