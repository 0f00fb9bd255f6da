import { FakeHost } from '@runner-host/runner-sdk/testing';
import { ScriptedOpenAIServer, scripts } from '@libs/testing';
import { openaiCompatible } from './runner';

// The OpenAI-compatible reference runner on the SDK's fake host, against the scripted
// OpenAI-compatible server (real HTTP, the real /chat/completions SSE wire format, the real
// openai SDK on the runner's side).

const KEY_ENV = 'REF_RUNNER_OPENAI_KEY';

describe('the OpenAI-compatible runner', () => {
  let server: ScriptedOpenAIServer;
  const config = () => ({
    base_url: server.baseUrl,
    model: 'gpt-test',
    api_key_env: KEY_ENV,
    system_prompt: 'Be brief.',
  });

  beforeAll(async () => {
    process.env[KEY_ENV] = 'sk-ref-test';
    server = await ScriptedOpenAIServer.start();
  });
  afterAll(async () => {
    delete process.env[KEY_ENV];
    await server.close();
  });
  beforeEach(() => server.reset());

  it('streams the endpoint deltas and completes with its answer and usage', async () => {
    server.chat(scripts.completion({ content: 'Hello there', deltas: ['Hel', 'lo ', 'there'] }));
    const host = new FakeHost({ runners: [openaiCompatible] });
    const outcome = await host.run({ text: 'hi', config: config() });
    expect(outcome).toMatchObject({ status: 'completed', messages: ['Hello there'], streamed: 'Hello there' });
    const deltas = outcome.results.filter((r) => r.type === 'message.delta').map((r) => r.data.chunk);
    expect(deltas.map((d) => (d as { content: string }).content)).toEqual(['Hel', 'lo ', 'there']);
    const done = outcome.results.find((r) => r.type === 'message.completed');
    expect(done?.usage).toMatchObject({ prompt_tokens: expect.any(Number), total_tokens: expect.any(Number) });
    expect(outcome.results.at(-1)).toMatchObject({ type: 'run.completed', data: { finish_reason: 'stop' } });
    const req = server.last()!;
    expect(req.path).toBe('/v1/chat/completions');
    expect(req.headers.authorization).toBe('Bearer sk-ref-test');
    expect(req.body).toMatchObject({
      model: 'gpt-test',
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'hi' },
      ],
    });
    expect(req.body.tools).toBeUndefined();
  });

  it('sends the conversation history read from the host before the input', async () => {
    const host = new FakeHost({
      runners: [openaiCompatible],
      history: [
        { item_type: 'message', role: 'user', content: 'first question', seq: 1 },
        { item_type: 'message', role: 'assistant', content: 'cut…', content_json: { content: 'first answer' }, seq: 2 },
      ],
    });
    expect(await host.run({ text: 'second question', config: { ...config(), system_prompt: '' } })).toMatchObject({
      status: 'completed',
    });
    expect(host.calls.map((c) => c.method)).toEqual(['HistoryPage', 'SteeringPull']);
    expect(server.last()!.body.messages).toEqual([
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: 'first answer' },
      { role: 'user', content: 'second question' },
    ]);
  });

  it('answers a steered follow-up in the same run, with the first exchange in its history', async () => {
    server.chat(scripts.reply('One.'), scripts.reply('Two.'));
    const host = new FakeHost({ runners: [openaiCompatible] });
    const run = host.start({ text: 'q1', config: config() });
    host.steer(run.runId, 'q2');
    expect(await run.done).toMatchObject({ status: 'completed', messages: ['One.', 'Two.'] });
    expect(server.requests[1].body.messages.slice(1)).toEqual([
      { role: 'user', content: 'q1' },
      { role: 'assistant', content: 'One.' },
      { role: 'user', content: 'q2' },
    ]);
  });

  it('offers the granted host tools as functions and calls them through the host', async () => {
    server.chat(
      scripts.toolCalls([{ id: 'call_1', name: 'current_time', arguments: '{"tz":"UTC"}' }]),
      scripts.reply('It is noon.'),
    );
    const seen: unknown[] = [];
    const host = new FakeHost({
      runners: [openaiCompatible],
      tools: {
        current_time: (p) => {
          seen.push(p);
          return { iso: '2026-01-01T12:00:00Z' };
        },
      },
    });
    const outcome = await host.run({ text: 'time?', config: config() });
    expect(outcome).toMatchObject({ status: 'completed', messages: ['It is noon.'] });
    expect(seen).toEqual([{ tz: 'UTC' }]);
    expect(outcome.results.map((r) => r.type)).toEqual(
      expect.arrayContaining(['tool.call.started', 'tool.call.completed']),
    );
    expect(outcome.results.find((r) => r.type === 'tool.call.completed')?.data).toMatchObject({
      tool_call_id: 'call_1',
      tool_name: 'current_time',
    });
    expect(server.requests[0].body.tools).toEqual([
      {
        type: 'function',
        function: { name: 'current_time', description: '', parameters: { type: 'object', properties: {} } },
      },
    ]);
    expect(server.requests[1].body.messages.slice(-2)).toEqual([
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'current_time', arguments: '{"tz":"UTC"}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '{"iso":"2026-01-01T12:00:00Z"}' },
    ]);
  });

  it('fails with a field-named error on a bad config, without calling the endpoint', async () => {
    const host = new FakeHost({ runners: [openaiCompatible] });
    expect(await host.run({ text: 'hi', config: { ...config(), base_url: 'ftp://x' } })).toMatchObject({
      status: 'failed',
      code: 'runner.config_invalid',
      error: 'runner_config.base_url: must be an http(s) URL',
    });
    expect(await host.run({ text: 'hi', config: { ...config(), api_key_env: 'REF_RUNNER_UNSET' } })).toMatchObject({
      status: 'failed',
      code: 'runner.config_invalid',
      error: expect.stringContaining('runner_config.api_key_env:'),
    });
    expect(await host.run({ text: 'hi', config: { base_url: server.baseUrl } })).toMatchObject({
      error: 'runner_config.model: is required',
    });
    expect(server.requests).toEqual([]);
  });

  it('reports an upstream refusal as runner.upstream_error, retryable for a 429', async () => {
    server.chat(scripts.rateLimited(), scripts.unauthorized());
    const host = new FakeHost({ runners: [openaiCompatible] });
    expect(await host.run({ text: 'hi', config: config() })).toMatchObject({
      status: 'failed',
      code: 'runner.upstream_error',
      error: expect.stringContaining('upstream answered 429'),
    });
    const denied = await host.run({ text: 'hi', config: config() });
    expect(denied).toMatchObject({ status: 'failed', code: 'runner.upstream_error' });
    expect(denied.results.at(-1)?.data.retryable).toBe(false);
  });

  it('a cancel aborts the request to the endpoint', async () => {
    server.chat(scripts.hang());
    const host = new FakeHost({ runners: [openaiCompatible] });
    const run = host.start({ text: 'hi', config: config() });
    while (server.requests.length === 0) {
      await new Promise((r) => setTimeout(r, 10));
    }
    host.cancel(run.runId, 'user stop');
    expect(await run.done).toMatchObject({ status: 'failed', code: 'cancelled', error: 'cancelled: user stop' });
  });
});
