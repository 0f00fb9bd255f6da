import { scripts } from '@libs/testing';
import { LOCAL_AGENT, LocalAgentWorld, shown, waitFor, type AuditRow } from './local-agent-setup';
import { HostApiClient } from './host-api-client';
import { RawPlugin, manifestFor } from './raw-plugin';

/*
 * The built-in local agent through the real host when things go wrong or must stop: a provider
 * 500 (fallback), a context overflow (compaction and one retry), a cancel mid-stream, the run
 * deadline; and its audit rows next to a gRPC plugin's. SQLite by default, PostgreSQL with
 * E2E_DATABASE=postgres.
 */

jest.setTimeout(120_000);

describe('the built-in local agent: fallback, overflow, cancel, deadline, audit', () => {
  const world = new LocalAgentWorld();
  const { host } = world;

  beforeAll(async () => {
    await world.start();
    await world.agent('helper', { tools: ['add'] });
    await world.agent('hasty', { config: { timeout: 2 } });
    await world.agent('compact', {
      config: {
        model: { primary: 'primary', fallbacks: [] },
        'context-window-tokens': 3000,
        'context-reserve-tokens': 500,
        'context-keep-recent-tokens': 200,
        'context-summary-tokens': 200,
      },
    });
  });

  afterAll(() => world.stop());

  beforeEach(() => world.server.reset());

  it('falls back to the next model after a 500 from the primary', async () => {
    world.server.chat(scripts.serverError(500), scripts.reply('Answer from the backup.'));
    const runId = await world.say('helper', 'conv-fallback', 'Hello?');
    const events = await world.results(runId);
    expect(events.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    expect(world.chats().map((c) => c.model)).toEqual(['scripted-primary', 'scripted-backup']);
    expect(events.find((e) => e.event === 'message.completed')!.data.data.message.content).toBe(
      'Answer from the backup.',
    );
    // The gate audits a stream when it opens it (as on gRPC); the provider's 500 came after.
    const streams = (await world.audit(runId)).filter((a) => a.action === 'model.stream');
    expect(streams.map((a) => [a.resource, a.outcome])).toEqual([
      ['model:primary', 'allowed'],
      ['model:backup', 'allowed'],
    ]);
  });

  it('after a context overflow compacts the history and retries once, on the same model', async () => {
    // A conversation of about 2,000 tokens in a 3,000-token window (2,500 of input): it fits, but
    // the provider says it does not. The one retry is at 3/4 of the input budget, so the earlier
    // turn is summarised (one invoke) and the request sent again, smaller, to the same model.
    const apples = 'apple '.repeat(1150).trim();
    world.server.chat(scripts.reply('banana '.repeat(850).trim()));
    const first = await world.say('compact', 'conv-overflow', apples);
    expect((await world.results(first)).at(-1)!.data).toMatchObject({ type: 'run.completed' });
    world.server.reset();
    world.server.chat(
      scripts.contextLengthExceeded(2000, 2100),
      scripts.reply('The user listed apples; the assistant answered with bananas.'),
      scripts.reply('Fits now.'),
    );
    const runId = await world.say('compact', 'conv-overflow', 'What did we talk about?');
    const events = await world.results(runId);
    expect(events.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    expect(events.find((e) => e.event === 'message.completed')!.data.data.message.content).toBe('Fits now.');
    const calls = world.server.requests.map((r) => ({
      model: r.body.model,
      stream: r.body.stream === true,
      bytes: JSON.stringify(r.body.messages).length,
    }));
    expect(calls.map((c) => [c.model, c.stream])).toEqual([
      ['scripted-primary', true],
      ['scripted-primary', false],
      ['scripted-primary', true],
    ]);
    expect(calls[2].bytes).toBeLessThan(calls[0].bytes);
    expect(shown(world.chats()[2].messages)).toContain('<conversation_summary>');
  });

  it('cancels mid-stream: the provider request is aborted and the run ends cancelled', async () => {
    world.server.chat(
      scripts.completion({ deltas: Array.from({ length: 100 }, (_, i) => `word${i} `) }, { chunk_delay_ms: 100 }),
    );
    const runId = await world.say('helper', 'conv-cancel', 'Talk for a long time.');
    const events = await world.streamUntil(
      runId,
      (e) => e.event === 'message.delta',
      async () => {
        const c = await host.api('POST', `/v1/runs/${runId}/cancel`, { reason: 'user left' });
        expect(c.status).toBe(200);
      },
    );
    expect(events.at(-1)!.data).toMatchObject({ type: 'run.failed', data: { code: 'cancelled' } });
    expect(events.filter((e) => e.event === 'message.delta').length).toBeLessThan(100);
    expect(await world.run(runId)).toMatchObject({ status: 'cancelled' });
  });

  it('ends at its deadline: runner.timeout while the model hangs', async () => {
    world.server.chat(scripts.hang());
    const runId = await world.say('hasty', 'conv-deadline', 'Take your time.');
    const events = await world.results(runId);
    expect(events.at(-1)!.data).toMatchObject({
      type: 'run.failed',
      data: { code: 'runner.timeout', retryable: true },
    });
    await waitFor('run status', async () => (await world.run(runId)).status === 'timeout');
  });

  it("writes audit rows exactly like a plugin's", async () => {
    // A plugin's run: its history.page call over gRPC.
    const token = (await host.api('POST', '/v1/admin/plugins', { author: 'cmp', name: 'raw' })).body.token as string;
    const plugin = new RawPlugin(host.grpc, token);
    const client = new HostApiClient(host.grpc, token);
    try {
      plugin.hello('cmp', 'raw', [manifestFor('cmp', 'raw', { permissions: { history: ['page'] } })]);
      expect((await plugin.next()).welcome.runners).toHaveLength(1);
      await host.api('POST', '/v1/admin/agents', { agent_id: 'cmp', runner_id: 'plugin:cmp/raw/default' });
      const posted = await host.api('POST', '/v1/events', {
        agent_id: 'cmp',
        event: { event_type: 'message.received', source: 'api' },
        conversation: { conversation_id: 'conv-cmp' },
        input: { text: 'hi' },
      });
      const pluginRun = posted.body.run_id as string;
      await plugin.next();
      await client.call('HistoryPage', { run_id: pluginRun, limit: 5 });
      plugin.result(pluginRun, 'run.completed', { finish_reason: 'stop' });
      await world.results(pluginRun);

      world.server.chat(scripts.reply('hello'));
      const builtinRun = await world.say('helper', 'conv-cmp-builtin', 'hi');
      await world.results(builtinRun);

      const shape = (row: AuditRow | undefined) =>
        row && {
          keys: Object.keys(row).sort(),
          action: row.action,
          outcome: row.outcome,
          scope: row.scope,
          resource: row.resource,
          duration: typeof row.duration_us,
        };
      const fromPlugin = (await world.audit(pluginRun)).find((a) => a.action === 'history.page');
      const fromBuiltin = (await world.audit(builtinRun)).find((a) => a.action === 'history.page');
      expect(shape(fromBuiltin)).toEqual(shape(fromPlugin));
      expect([fromPlugin!.runner_id, fromPlugin!.plugin_id]).toEqual(['plugin:cmp/raw/default', 'cmp/raw']);
      expect([fromBuiltin!.runner_id, fromBuiltin!.plugin_id]).toEqual([LOCAL_AGENT, 'builtin']);
    } finally {
      client.close();
      plugin.close();
    }
  });
});
