import { randomBytes } from 'node:crypto';
import { defineRunner, HostApiError, RunnerPlugin, UnauthorizedError, type Logger } from '@runner-host/runner-sdk';
import { ScriptedOpenAIServer, scripts } from '@libs/testing';
import { assistant } from '../../libs/runner-sdk/examples/assistant';
import { Host, SHORT_LEASE, TestDatabase, freePort, runnerConnected, waitFor } from './harness';
import { message } from './steering-support';

/*
 * The TypeScript runner SDK against the real host (a child process): the example runner of
 * libs/runner-sdk/examples/assistant.ts, connected in this process, streams a model answer
 * through the host after calling a host tool, answers a follow-up steered into its run, honours
 * cancel, and reconnects after the host restarts.
 */

jest.setTimeout(120_000);

const KEY = `sk-scripted-${randomBytes(12).toString('hex')}`;
const RUNNER_ID = 'plugin:sdk/assistant/default';
const quiet: Logger = () => undefined;

/** A second runner of the same plugin: calls the host API and reports what it got as its message. */
const probe = defineRunner({
  name: 'probe',
  permissions: { models: ['invoke', 'count_tokens'], tools: ['call'], storage: ['plugin'] },
  async run(_ctx, io) {
    const refused = await io.host.tools.call('http_fetch', { url: 'http://127.0.0.1:1/' }).catch((e: unknown) => e);
    const unknownModel = await io.host.models.invoke('nope', 'hi').catch((e: unknown) => e);
    const answer = await io.host.models.invoke('scripted', 'say ok');
    const tokens = await io.host.models.countTokens('scripted', 'one two three');
    await io.host.storage.set('plugin', 'k', 'stored');
    await io.host.state.set('conversation', 'n', 41);
    const describe = (e: unknown) =>
      e instanceof HostApiError
        ? { class: e.constructor.name, code: e.code, method: e.method, unauthorized: e instanceof UnauthorizedError }
        : String(e);
    await io.message(
      JSON.stringify({
        refused: describe(refused),
        unknown_model: describe(unknownModel),
        answer: answer.message.content,
        tokens_positive: tokens > 0,
        stored: (await io.host.storage.get('plugin', 'k'))?.toString(),
        missing: await io.host.storage.get('plugin', 'absent'),
        state: await io.host.state.get('conversation', 'n'),
      }),
    );
  },
});

describe('runner SDK against the real host', () => {
  const db = new TestDatabase();
  let grpcPort: number;
  let host: Host;
  let server: ScriptedOpenAIServer;
  let plugin: RunnerPlugin;

  /** The host on a fixed gRPC port, so that the plugin finds it again after a restart. */
  const startHost = async () =>
    // After a kill -9 the restarted host takes the killed one's runs over once its lease ran out
    // (docs/scale-out.md#dead-owner-sweep): a short lease keeps the test short.
    new Host(db, {
      SCRIPTED_KEY: KEY,
      SECRET_ENV_ALLOWLIST: 'SCRIPTED_KEY',
      GRPC_PORT: String(grpcPort),
      ...SHORT_LEASE,
    }).start();
  const modelAsked = (text: string) =>
    waitFor(`the model call with "${text}"`, () =>
      Promise.resolve(server.requests.some((r) => JSON.stringify(r.body).includes(text))),
    );
  const runOf = async (runId: string) => (await host.api('GET', `/v1/runs/${runId}`)).body;

  beforeAll(async () => {
    grpcPort = await freePort();
    server = await ScriptedOpenAIServer.start();
    host = await startHost();
    const model = await host.api('POST', '/v1/admin/models', {
      model_id: 'scripted',
      kind: 'chat',
      provider: 'openai',
      base_url: server.baseUrl,
      api_key_env: 'SCRIPTED_KEY',
      model_name: 'scripted-gpt',
      context_window: 128000,
      max_output_tokens: 4096,
      abilities: { tool_calling: true, vision: false, streaming: true },
      tokenizer: 'o200k_base',
    });
    expect(model.body).toMatchObject({ model_id: 'scripted' });
    const reg = await host.api('POST', '/v1/admin/plugins', { author: 'sdk', name: 'assistant' });
    expect(reg.status).toBe(201);
    plugin = new RunnerPlugin({
      url: `127.0.0.1:${grpcPort}`,
      token: reg.body.token,
      author: 'sdk',
      plugin: 'assistant',
      runners: [assistant, probe],
      reconnect: { initialDelayMs: 100, maxDelayMs: 500 },
      log: quiet,
    });
    const welcome = await plugin.start();
    expect(welcome.runners).toEqual([
      { runner_id: RUNNER_ID, name: 'default' },
      { runner_id: 'plugin:sdk/assistant/probe', name: 'probe' },
    ]);
    expect(welcome.rejected).toEqual([]);
    const agent = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'assistant',
      runner_id: RUNNER_ID,
      runner_config: { steer_wait_ms: 1500 },
      resource_policy: { allowed_model_ids: ['scripted'], allowed_tool_names: ['current_time'] },
    });
    expect(agent.status).toBe(201);
    const probeAgent = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'probe',
      runner_id: 'plugin:sdk/assistant/probe',
      resource_policy: { allowed_model_ids: ['scripted'] },
    });
    expect(probeAgent.status).toBe(201);
  });

  afterAll(async () => {
    await plugin?.stop();
    await host?.stop();
    await server?.close();
    await db.drop();
  });

  it('streams a model answer after a host tool call, and answers a steered follow-up in the same run', async () => {
    // The first answer is slow, so that the follow-up arrives while the run is busy.
    server.chat(
      scripts.completion({ content: 'Hello there, friend.' }, { delay_ms: 1500 }),
      scripts.reply('Second answer.'),
    );
    const first = await host.api('POST', '/v1/events', message('assistant', 'c-steer', 'hi'));
    expect(first.body).toMatchObject({ disposition: 'started' });
    const follow = await host.api('POST', '/v1/events', message('assistant', 'c-steer', 'and then?'));
    expect(follow.body).toMatchObject({ disposition: 'steered', run_id: first.body.run_id });

    const events = (await host.sse(first.body.run_id)).map((e) => e.data);
    const types = events.map((e) => e.type);
    expect(types.slice(0, 2)).toEqual(['tool.call.started', 'tool.call.completed']);
    expect(events[1].data).toMatchObject({ tool_name: 'current_time', error: null });
    expect(events[1].data.result.structured_content.timezone).toBe('UTC');
    expect(events.filter((e) => e.type === 'message.completed').map((e) => e.data.message.content)).toEqual([
      'Hello there, friend.',
      'Second answer.',
    ]);
    const streamed = events.filter((e) => e.type === 'message.delta').map((e) => e.data.chunk.content as string);
    expect(streamed.join('')).toBe('Hello there, friend.Second answer.');
    expect(types.at(-1)).toBe('run.completed');
    // Every result came from the runner, numbered 1, 2, 3, ... by the SDK.
    expect(events.filter((e) => e.source === 'runner').map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    expect((await runOf(first.body.run_id)).status).toBe('completed');

    // The model saw the tool's answer and each turn's text, through the host.
    const asked = server.requests
      .slice(-2)
      .map((r) => (r.body as { messages: { role: string; content: string }[] }).messages);
    expect(asked.map((m) => m.at(-1)?.content)).toEqual(['hi', 'and then?']);
    expect(asked[0][0].content).toContain('"timezone":"UTC"');
  });

  it('honours cancel: the stream to the model is abandoned and the runner reports the cancel', async () => {
    server.chat({ type: 'hang' });
    const started = await host.api('POST', '/v1/events', message('assistant', 'c-cancel', 'take your time'));
    const runId = started.body.run_id as string;
    await modelAsked('take your time');
    const c = await host.api('POST', `/v1/runs/${runId}/cancel`, { reason: 'user left' });
    expect(c.status).toBe(200);
    const last = (await host.sse(runId)).at(-1)!.data;
    expect(last).toMatchObject({ type: 'run.failed', source: 'runner', data: { code: 'cancelled' } });
    expect((await runOf(runId)).status).toBe('cancelled');
  });

  it('host API through the SDK: typed refusals, models, token counting, storage and state', async () => {
    server.chat(scripts.reply('ok'));
    const started = await host.api('POST', '/v1/events', message('probe', 'c-probe', 'probe'));
    const events = (await host.sse(started.body.run_id)).map((e) => e.data);
    expect(events.map((e) => e.type)).toEqual(['message.completed', 'run.completed']);
    expect(JSON.parse(events[0].data.message.content)).toEqual({
      refused: { class: 'UnauthorizedError', code: 'unauthorized', method: 'CallTool', unauthorized: true },
      unknown_model: { class: 'UnauthorizedError', code: 'unauthorized', method: 'InvokeModel', unauthorized: true },
      answer: 'ok',
      tokens_positive: true,
      stored: 'stored',
      missing: null,
      state: 41,
    });
  });

  it('reconnects after the host restarts: the run in flight ends as the host decides, new runs arrive', async () => {
    server.chat({ type: 'hang' });
    const inFlight = await host.api('POST', '/v1/events', message('assistant', 'c-restart', 'are you there?'));
    await modelAsked('are you there?');
    expect(plugin.connections).toBe(1);
    await host.stop('SIGKILL');
    await waitFor('the plugin to notice', () => Promise.resolve(plugin.welcome === null));

    host = await startHost();
    await runnerConnected(host, RUNNER_ID);
    // The host lists the runner once its Hello is accepted; the plugin counts the connection when
    // the Welcome reaches it, a moment later.
    await waitFor('the plugin to be welcomed again', () => Promise.resolve(plugin.welcome !== null));
    expect(plugin.connections).toBe(2);
    const old = await waitFor('the old run to end', async () => {
      const run = await runOf(inFlight.body.run_id);
      return ['queued', 'running'].includes(run.status) ? null : run;
    });
    expect(old.status).toBe('interrupted');

    server.chat(scripts.reply('Back again.'));
    const next = await host.api('POST', '/v1/events', message('assistant', 'c-after', 'hello again'));
    expect(next.status).toBe(202);
    const events = (await host.sse(next.body.run_id)).map((e) => e.data);
    expect(events.at(-1)?.type).toBe('run.completed');
    expect(events.filter((e) => e.type === 'message.completed').map((e) => e.data.message.content)).toEqual([
      'Back again.',
    ]);
  });
});
