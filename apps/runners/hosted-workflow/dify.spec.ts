import { FakeHost } from '@runner-host/runner-sdk/testing';
import { DIFY_STATE_KEY, dify } from './dify';
import { FakeDify } from './testing/fake-targets';

// The Dify runner on the SDK's fake host against a scripted Dify app API (real HTTP, Dify's
// streaming chat-messages wire format).

const KEY_ENV = 'REF_RUNNER_DIFY_KEY';

describe('the Dify runner', () => {
  let target: FakeDify;
  const config = () => ({ base_url: target.baseUrl, api_key_env: KEY_ENV, inputs: { tone: 'dry' } });

  beforeAll(async () => {
    process.env[KEY_ENV] = 'app-ref-test';
    target = await new FakeDify('app-ref-test').start();
  });
  afterAll(async () => {
    delete process.env[KEY_ENV];
    await target.close();
  });
  beforeEach(() => (target.requests.length = 0));

  it('streams the message events, closes with message_end usage and keeps the Dify conversation in state', async () => {
    target.script({ answer: ['Hel', 'lo'], usage: { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 } });
    const host = new FakeHost({ runners: [dify] });
    const outcome = await host.run({ text: 'hi', config: config(), conversationId: 'c1' });
    expect(outcome).toMatchObject({ status: 'completed', messages: ['Hello'], streamed: 'Hello' });
    expect(outcome.results.find((r) => r.type === 'message.completed')?.usage).toEqual({
      prompt_tokens: 7,
      completion_tokens: 2,
      total_tokens: 9,
    });
    const [sent] = target.chats;
    expect(sent.headers.authorization).toBe('Bearer app-ref-test');
    expect(sent.body).toEqual({
      inputs: { tone: 'dry' },
      query: 'hi',
      response_mode: 'streaming',
      conversation_id: '',
      user: 'user:u1',
      files: [],
    });
    const state = outcome.results.find((r) => r.type === 'state.updated');
    expect(state?.data).toMatchObject({ scope: 'conversation', key: DIFY_STATE_KEY });
    expect(target.conversations.has(state?.data.value as string)).toBe(true);
  });

  it('continues the Dify conversation from the conversation state, and a steered follow-up continues it too', async () => {
    target.script({ answer: ['first'] }, { answer: ['second'] }, { answer: ['third'] });
    const host = new FakeHost({ runners: [dify] });
    const first = await host.run({ text: 'one', config: config(), conversationId: 'c2' });
    const difyConversation = first.results.find((r) => r.type === 'state.updated')?.data.value as string;
    // The host hands the persisted state to the conversation's next run in ctx.state.
    const run = host.start({
      text: 'two',
      config: config(),
      conversationId: 'c2',
      context: (ctx) => ({ ...ctx, state: { ...ctx.state!, conversation: { [DIFY_STATE_KEY]: difyConversation } } }),
    });
    host.steer(run.runId, 'three');
    const second = await run.done;
    expect(second).toMatchObject({ status: 'completed', messages: ['second', 'third'] });
    expect(second.results.some((r) => r.type === 'state.updated')).toBe(false);
    expect(target.chats.map((r) => r.body.conversation_id)).toEqual(['', difyConversation, difyConversation]);
    expect(target.conversations.get(difyConversation)).toEqual(['one', 'two', 'three']);
  });

  it('starts a new Dify conversation when Dify no longer knows the stored one', async () => {
    const host = new FakeHost({ runners: [dify] });
    const outcome = await host.run({
      text: 'hi',
      config: config(),
      conversationId: 'c3',
      context: (ctx) => ({ ...ctx, state: { ...ctx.state!, conversation: { [DIFY_STATE_KEY]: 'gone' } } }),
    });
    expect(outcome.status).toBe('completed');
    expect(target.chats.map((r) => r.body.conversation_id)).toEqual(['gone', '']);
    const fresh = outcome.results.find((r) => r.type === 'state.updated')?.data.value;
    expect(fresh).not.toBe('gone');
    expect(target.conversations.has(fresh as string)).toBe(true);
  });

  it('fails the run on an error event, with Dify code and message', async () => {
    target.script({
      answer: ['par'],
      error: { status: 400, code: 'completion_request_error', message: 'model quota' },
    });
    const host = new FakeHost({ runners: [dify] });
    const outcome = await host.run({ text: 'hi', config: config() });
    expect(outcome).toMatchObject({
      status: 'failed',
      code: 'runner.upstream_error',
      error: 'dify answered 400 completion_request_error: model quota',
    });
    expect(outcome.results.at(-1)?.data.retryable).toBe(false);
  });

  it('a wrong key is Dify 401, and a bad config is a field-named error without a request', async () => {
    const host = new FakeHost({ runners: [dify] });
    process.env.REF_RUNNER_DIFY_WRONG = 'app-wrong';
    expect(await host.run({ text: 'hi', config: { ...config(), api_key_env: 'REF_RUNNER_DIFY_WRONG' } })).toMatchObject(
      {
        status: 'failed',
        error: 'dify answered 401 unauthorized: Access token is invalid',
      },
    );
    delete process.env.REF_RUNNER_DIFY_WRONG;
    target.requests.length = 0;
    expect(await host.run({ text: 'hi', config: { ...config(), base_url: 'api.dify.ai' } })).toMatchObject({
      code: 'runner.config_invalid',
      error: 'runner_config.base_url: must be an http(s) URL',
    });
    expect(await host.run({ text: 'hi', config: { ...config(), inputs: 'x' } })).toMatchObject({
      error: 'runner_config.inputs: must be of type object',
    });
    expect(target.requests).toEqual([]);
  });

  it('a cancel aborts the stream and stops the Dify task', async () => {
    target.script({ answer: ['thinking'], hang: true });
    const host = new FakeHost({ runners: [dify] });
    const run = host.start({ text: 'hi', config: config() });
    await run.waitFor('message.delta');
    host.cancel(run.runId, 'stop it');
    expect(await run.done).toMatchObject({ status: 'failed', code: 'cancelled' });
    while (target.stopped.length === 0) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const stop = target.requests.find((r) => r.path.endsWith('/stop'))!;
    expect(stop.body).toEqual({ user: 'user:u1' });
  });
});
