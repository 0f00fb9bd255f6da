import { FakeHost } from '@runner-host/runner-sdk/testing';
import { FakeWebhook } from './testing/fake-targets';
import { fillTemplate, webhook } from './webhook';

// The n8n-style webhook runner on the SDK's fake host against a scripted webhook (real HTTP; n8n's
// Chat Trigger body, its JSON and streamed responses).

describe('the webhook runner', () => {
  let target: FakeWebhook;

  beforeAll(async () => {
    target = await new FakeWebhook().start();
  });
  afterAll(() => target.close());
  beforeEach(() => (target.requests.length = 0));

  it("posts n8n's chat body by default and answers with the response's output", async () => {
    target.script({ json: [{ output: 'Hi from n8n' }] });
    const host = new FakeHost({ runners: [webhook] });
    const outcome = await host.run({ text: 'hello', config: { url: target.webhookUrl() }, conversationId: 'c1' });
    expect(outcome).toMatchObject({ status: 'completed', messages: ['Hi from n8n'] });
    expect(target.requests[0]).toMatchObject({
      path: '/webhook/chat',
      headers: { 'content-type': 'application/json' },
      body: { action: 'sendMessage', sessionId: 'c1', chatInput: 'hello' },
    });
  });

  it('maps the request with the body template and the answer with response_field; the auth header comes from the env', async () => {
    process.env.REF_RUNNER_HOOK_SECRET = 'hook-secret';
    target.script({ json: { data: { reply: { text: 'mapped' } } } });
    const host = new FakeHost({ runners: [webhook] });
    const outcome = await host.run({
      text: 'q',
      conversationId: 'c2',
      config: {
        url: target.webhookUrl('custom'),
        body_template: { message: { text: 'Q: {{text}}', user: '{{actor_id}}' }, tags: ['{{conversation_id}}'], n: 1 },
        response_field: 'data.reply.text',
        auth_header: 'X-Hook-Auth',
        auth_env: 'REF_RUNNER_HOOK_SECRET',
      },
    });
    delete process.env.REF_RUNNER_HOOK_SECRET;
    expect(outcome).toMatchObject({ status: 'completed', messages: ['mapped'] });
    expect(target.requests[0].headers['x-hook-auth']).toBe('hook-secret');
    expect(target.requests[0].body).toEqual({ message: { text: 'Q: q', user: 'u1' }, tags: ['c2'], n: 1 });
  });

  it("streams n8n's streamed response as deltas", async () => {
    target.script({ stream: ['Str', 'eam', 'ed'] });
    const host = new FakeHost({ runners: [webhook] });
    const outcome = await host.run({ text: 'hi', config: { url: target.webhookUrl(), response_mode: 'stream' } });
    expect(outcome).toMatchObject({ status: 'completed', messages: ['Streamed'], streamed: 'Streamed' });
    expect(outcome.results.filter((r) => r.type === 'message.delta')).toHaveLength(3);
  });

  it('answers each steered follow-up with its own webhook call', async () => {
    target.script({ json: { output: 'a1' } }, { text: 'a2 as text' });
    const host = new FakeHost({ runners: [webhook] });
    const run = host.start({ text: 'q1', config: { url: target.webhookUrl() } });
    host.steer(run.runId, 'q2');
    expect(await run.done).toMatchObject({ status: 'completed', messages: ['a1', 'a2 as text'] });
    expect(target.requests.map((r) => r.body.chatInput)).toEqual(['q1', 'q2']);
  });

  it('a missing answer field and an HTTP error fail the run as upstream errors', async () => {
    target.script({ json: { result: 'x' } }, { json: { message: 'Workflow could not be started!' }, status: 500 });
    const host = new FakeHost({ runners: [webhook] });
    expect(await host.run({ text: 'hi', config: { url: target.webhookUrl() } })).toMatchObject({
      status: 'failed',
      code: 'runner.upstream_error',
      error: 'webhook response has no output (runner_config.response_field)',
    });
    const failed = await host.run({ text: 'hi', config: { url: target.webhookUrl() } });
    expect(failed).toMatchObject({ status: 'failed', error: expect.stringContaining('webhook answered 500') });
    expect(failed.results.at(-1)?.data.retryable).toBe(true);
  });

  it('a bad config is a field-named error and sends nothing', async () => {
    const host = new FakeHost({ runners: [webhook] });
    const cases: [Record<string, unknown>, string][] = [
      [{ url: 'localhost:5678' }, 'runner_config.url: must be an http(s) URL'],
      [
        { url: target.webhookUrl(), body_template: { q: '{{question}}' } },
        'runner_config.body_template: q names an unknown placeholder {{question}}',
      ],
      [
        { url: target.webhookUrl(), response_field: 'a..b' },
        'runner_config.response_field: must be a dotted path of field names, e.g. output or data.text',
      ],
      [
        { url: target.webhookUrl(), response_mode: 'sse' },
        'runner_config.response_mode: must be one of "json", "stream"',
      ],
      [
        { url: target.webhookUrl(), auth_header: 'X-A', auth_env: 'REF_RUNNER_UNSET' },
        expect.stringContaining('runner_config.auth_env:'),
      ],
    ];
    for (const [config, error] of cases) {
      expect(await host.run({ text: 'hi', config: config as never })).toMatchObject({
        code: 'runner.config_invalid',
        error,
      });
    }
    expect(target.requests).toEqual([]);
  });

  it('fills placeholders inside nested strings only', () => {
    const values = { text: 't', conversation_id: 'c', actor_id: 'a', run_id: 'r', event_id: 'e' };
    expect(fillTemplate({ a: ['{{ text }}-{{run_id}}', 2, null, true], b: { c: '{{event_id}}' } }, values)).toEqual({
      a: ['t-r', 2, null, true],
      b: { c: 'e' },
    });
  });
});
