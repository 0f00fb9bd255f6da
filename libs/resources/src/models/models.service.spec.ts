import {
  ScriptedOpenAIServer,
  UNIT_KEY as KEY,
  chatModel,
  collect,
  failure,
  invokeRequest as req,
  modelsFixture as fixture,
  runCall,
  scripts,
} from '@libs/testing';
import { encodingFor } from './tokenizer';

describe('ModelsService over the real openai SDK and HTTP', () => {
  // A registered model warms its encoder on a later tick; build it first so none runs after teardown.
  beforeAll(() => encodingFor('o200k_base'));

  let server: ScriptedOpenAIServer;
  let f: ReturnType<typeof fixture>;

  beforeAll(async () => {
    server = await ScriptedOpenAIServer.start();
  });
  afterAll(() => server.close());
  beforeEach(async () => {
    server.reset();
    f = fixture();
    await f.registry.create('m', chatModel(server.baseUrl, { extra_args: { temperature: 0.2 } }));
  });

  it('invokes: mapped request with the key from the environment, Protocol message and usage back, metered', async () => {
    server.chat(
      scripts.reply('<think>hmm</think>\n\nHello there', {
        usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 },
      }),
    );
    const res = await f.service.invoke(runCall(), req({ remove_think: true, extra_args: { max_tokens: 50 } }));
    expect(res).toEqual({
      message: { role: 'assistant', content: 'Hello there', provider_specific_fields: { finish_reason: 'stop' } },
      usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 },
    });
    const sent = server.last()!;
    expect(sent.path).toBe('/v1/chat/completions');
    expect(sent.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(sent.body).toEqual({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hello' }],
      temperature: 0.2,
      max_tokens: 50,
      stream: false,
    });
    expect(f.repo.usageRows).toEqual([
      expect.objectContaining({
        run_id: 'run-1',
        model_id: 'm',
        operation: 'invoke',
        prompt_tokens: 9,
        completion_tokens: 3,
        total_tokens: 12,
        complete: true,
      }),
    ]);
  });

  it('keeps <think> without remove_think, and meters a call without usage as incomplete', async () => {
    server.chat(scripts.reply('<think>x</think>ok', { usage: null, reasoning_content: 'r' }));
    const res = await f.service.invoke(runCall(), req());
    expect(res.message).toMatchObject({ content: '<think>x</think>ok', reasoning_content: 'r' });
    expect(res.usage).toBeUndefined();
    expect(f.repo.usageRows[0]).toMatchObject({ complete: false, total_tokens: null });
  });

  it('streams text deltas, tool calls assembled from split deltas, then one usage-only item', async () => {
    server.chat(
      scripts.completion({
        deltas: ['Hel', 'lo'],
        tool_calls: [
          { id: 'call_a', name: 'search', arguments: '{"q": "ducks", "limit": 3}' },
          { id: 'call_b', name: 'clock', arguments: '{}' },
        ],
        argument_pieces: 4,
        usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 },
      }),
    );
    const items = await collect(
      f.service.stream(
        runCall(),
        req({ tools: [{ name: 'search', description: 'Find', parameters: { type: 'object', properties: {} } }] }),
      ),
    );
    expect(items).toEqual([
      { chunk: { role: 'assistant', content: 'Hel', is_final: false, msg_sequence: 1 } },
      { chunk: { role: 'assistant', content: 'lo', is_final: false, msg_sequence: 2 } },
      {
        chunk: {
          role: 'assistant',
          content: '',
          all_content: 'Hello',
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'search', arguments: '{"q": "ducks", "limit": 3}' } },
            { id: 'call_b', type: 'function', function: { name: 'clock', arguments: '{}' } },
          ],
          is_final: true,
          msg_sequence: 3,
          provider_specific_fields: { finish_reason: 'tool_calls' },
        },
      },
      { usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 } },
    ]);
    expect(server.last()!.body).toMatchObject({
      stream: true,
      stream_options: { include_usage: true },
      tools: [{ type: 'function', function: { name: 'search', description: 'Find' } }],
    });
    expect(f.repo.usageRows).toEqual([
      expect.objectContaining({ operation: 'stream', total_tokens: 12, complete: true }),
    ]);
  });

  it('strips <think> split across stream chunks with remove_think', async () => {
    server.chat(scripts.completion({ deltas: ['<th', 'ink>secret', ' plan</thi', 'nk>\n', 'Answer'] }));
    const items = await collect(f.service.stream(runCall(), req({ remove_think: true })));
    const text = items.flatMap((i) => (i.chunk ? [i.chunk.content] : [])).join('');
    expect(text).toBe('Answer');
    expect(items.at(-2)!.chunk).toMatchObject({ all_content: 'Answer', is_final: true });
  });

  it('emulates a stream for a model without the streaming ability', async () => {
    await f.registry.replace('m', chatModel(server.baseUrl, { abilities: { streaming: false } }));
    server.chat(scripts.reply('whole answer', { usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }));
    const items = await collect(f.service.stream(runCall(), req()));
    expect(items.map((i) => i.chunk?.content ?? i.usage)).toEqual([
      'whole answer',
      '',
      { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
    ]);
    expect(server.last()!.body.stream).toBe(false);
    expect(f.repo.usageRows[0]).toMatchObject({ operation: 'stream', complete: true });
  });

  it('drops tools for a model without tool calling, and refuses images for one without vision', async () => {
    await f.registry.replace('m', chatModel(server.baseUrl, { abilities: { tool_calling: false, vision: false } }));
    await f.service.invoke(runCall(), req({ tools: [{ name: 'search' }] }));
    expect(server.last()!.body.tools).toBeUndefined();
    const e = await failure(
      f.service.invoke(
        runCall(),
        req({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }] }] }),
      ),
    );
    expect(e).toMatchObject({
      code: 'invalid_argument',
      details: { field: 'messages[0].content[0]', reason: 'vision_unsupported' },
    });
  });

  it('sends no authorization header for a model without a key; refuses a model whose key variable is unset', async () => {
    await f.registry.create('keyless', chatModel(server.baseUrl, { api_key_env: null }));
    await f.service.invoke(runCall(), req({ model_id: 'keyless' }));
    expect(server.last()!.headers.authorization).toBeUndefined();

    await f.registry.create('unset', chatModel(server.baseUrl, { api_key_env: 'NOT_SET_ANYWHERE' }));
    const e = await failure(f.service.invoke(runCall(), req({ model_id: 'unset' })));
    expect(e).toMatchObject({ code: 'unavailable', retryable: false, details: { reason: 'api_key_missing' } });
    expect(e.message).not.toContain('NOT_SET_ANYWHERE');
  });

  it('reranks: ≤ 64 documents, sorted by score, top_k, metered', async () => {
    await f.registry.create('rr', {
      kind: 'rerank',
      base_url: server.baseUrl,
      api_key_env: 'UNIT_KEY',
      model_name: 'rerank-v1',
    });
    server.rerank(scripts.rerank([0.1, 0.9, 0.5], { total_tokens: 42 }));
    const call = { run_id: 'run-1', model_id: 'rr', query: 'ducks', documents: ['a', 'b', 'c'], top_k: 2 };
    expect(await f.service.rerank(runCall(), call)).toEqual({
      results: [
        { index: 1, relevance_score: 0.9 },
        { index: 2, relevance_score: 0.5 },
      ],
    });
    expect(server.last()!).toMatchObject({
      path: '/v1/rerank',
      body: { model: 'rerank-v1', query: 'ducks', documents: ['a', 'b', 'c'], top_n: 2 },
    });
    expect(f.repo.usageRows.at(-1)).toMatchObject({ operation: 'rerank', total_tokens: 42, complete: true });

    const tooMany = await failure(f.service.rerank(runCall(), { ...call, documents: Array(65).fill('d') }));
    expect(tooMany).toMatchObject({ code: 'invalid_argument', details: { field: 'documents', limit: 64 } });
    server.rerank(scripts.rerankRaw({ results: [{ index: 7, relevance_score: 1 }] }));
    expect(await failure(f.service.rerank(runCall(), call))).toMatchObject({
      code: 'runtime_error',
      details: { reason: 'malformed_response' },
    });
    // the model kinds do not mix
    expect(await failure(f.service.invoke(runCall(), req({ model_id: 'rr' })))).toMatchObject({
      code: 'invalid_argument',
    });
  });

  it('counts tokens with the model tokenizer, and fails closed without one', async () => {
    const n = await f.service.countTokens(runCall(), {
      model_id: 'm',
      messages: [{ role: 'user', content: 'hello world' }],
      tools: [],
    });
    // 3 (message) + 1 ("user") + 2 ("hello world") + 3 (reply priming)
    expect(n).toEqual({ tokens: 9 });
    await f.registry.create('plain', chatModel(server.baseUrl, { tokenizer: null }));
    const e = await failure(f.service.countTokens(runCall(), { model_id: 'plain', messages: [], tools: [] }));
    expect(e).toMatchObject({ code: 'unavailable', retryable: false, details: { reason: 'no_tokenizer' } });
    expect(server.requests).toHaveLength(0);
  });

  it('refuses a missing model and invalid arguments before calling the provider', async () => {
    expect(await failure(f.service.invoke(runCall(), req({ model_id: 'gone' })))).toMatchObject({ code: 'not_found' });
    expect(await failure(f.service.invoke(runCall(), req({ messages: [] })))).toMatchObject({
      details: { field: 'messages' },
    });
    expect(await failure(f.service.invoke(runCall(), req({ timeout_ms: 0 })))).toMatchObject({
      details: { field: 'timeout_ms' },
    });
    expect(await failure(f.service.invoke(runCall(), req({ extra_args: { model: 'other' } })))).toMatchObject({
      details: { field: 'extra_args.model' },
    });
    expect(server.requests).toHaveLength(0);
    expect(f.repo.usageRows).toHaveLength(0);
  });
});
