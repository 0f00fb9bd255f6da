import { scripts } from '@libs/testing';
import {
  KB_FACT,
  LOCAL_AGENT,
  LocalAgentWorld,
  SKILL_DESCRIPTION,
  SKILL_INSTRUCTIONS,
  shown,
  waitFor,
  type AuditRow,
} from './local-agent-setup';
import { RawPlugin, manifestFor } from './raw-plugin';
import { HostApiClient } from './host-api-client';

/*
 * The built-in local agent through the real host: events over HTTP start runs of
 * `builtin:local-agent/default`, which the host dispatches in process; the agent calls the host
 * API through the in-process adapter (same gate, audit, limits as a gRPC plugin); the host calls
 * the scripted OpenAI-compatible server with the real openai SDK over real HTTP and a real MCP
 * server over stdio. SQLite by default, PostgreSQL with E2E_DATABASE=postgres.
 */

jest.setTimeout(120_000);

describe('the built-in local agent, end to end', () => {
  const world = new LocalAgentWorld();
  const { host } = world;

  beforeAll(async () => {
    await world.start();
    await world.agent('helper', { tools: ['add'], kbs: [] });
    await world.agent('librarian', { kbs: ['manual'], config: { 'knowledge-bases': ['manual'] } });
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

  it('is listed as a built-in runner, always connected, with its manifest and config_schema', async () => {
    const runners = (await host.api<any[]>('GET', '/v1/admin/runners')).body;
    const builtin = runners.find((r) => r.runner_id === LOCAL_AGENT);
    expect(builtin).toMatchObject({ kind: 'builtin', state: 'connected', plugin_id: 'builtin' });
    expect(builtin.manifest.capabilities).toMatchObject({
      streaming: true,
      tool_calling: true,
      knowledge_retrieval: true,
      steering: true,
      interrupt: true,
    });
    const fields = builtin.manifest.config_schema.map((f: any) => f.name);
    expect(fields).toEqual(
      expect.arrayContaining([
        'model',
        'timeout',
        'prompt',
        'remove-think',
        'knowledge-bases',
        'date-grounding',
        'retrieval-top-k',
        'rerank-model',
        'rerank-top-k',
        'max-tool-iterations',
        'tool-execution-mode',
        'max-tool-result-chars',
        'context-history-fetch-limit',
        'context-window-tokens',
        'context-reserve-tokens',
        'context-keep-recent-tokens',
        'context-summary-tokens',
      ]),
    );
  });

  it('holds a multi-turn conversation: streams each answer and shows the model the history', async () => {
    world.server.chat(
      scripts.completion({ content: 'Nice to meet you, Ada.' }),
      scripts.completion({ content: 'Your name is Ada.' }),
    );
    const first = await world.say('helper', 'conv-multi', 'Hi, my name is Ada.');
    const firstEvents = await world.results(first);
    expect(firstEvents.filter((e) => e.event === 'message.delta').length).toBeGreaterThan(1);
    expect(firstEvents.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    expect(firstEvents.find((e) => e.event === 'message.completed')!.data.data.message).toMatchObject({
      role: 'assistant',
      content: 'Nice to meet you, Ada.',
    });

    const second = await world.say('helper', 'conv-multi', 'What is my name?');
    const events = await world.results(second);
    expect(events.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    expect((await world.run(second)).status).toBe('completed');
    const [, call] = world.chats();
    const roles = call.messages.map((m: any) => m.role);
    expect(shown(call.messages)).toContain('Hi, my name is Ada.');
    expect(shown(call.messages)).toContain('Nice to meet you, Ada.');
    expect(call.messages.at(-1)).toMatchObject({ role: 'user', content: expect.stringContaining('What is my name?') });
    expect(roles.filter((r: string) => r === 'user')).toHaveLength(2);

    const transcript = await host.api('GET', '/v1/conversations/conv-multi/transcript?limit=10');
    expect(transcript.body.items.map((i: any) => [i.role, i.content])).toEqual(
      expect.arrayContaining([
        ['user', 'Hi, my name is Ada.'],
        ['assistant', 'Nice to meet you, Ada.'],
        ['user', 'What is my name?'],
        ['assistant', 'Your name is Ada.'],
      ]),
    );
    const audit = await world.audit(second);
    expect(audit.filter((a) => a.action === 'history.page')).not.toHaveLength(0);
    expect(audit.find((a) => a.action === 'model.stream')).toMatchObject({
      outcome: 'allowed',
      resource: 'model:primary',
      runner_id: LOCAL_AGENT,
      plugin_id: 'builtin',
    });
  });

  it('calls a real MCP tool the model asks for and answers with its result', async () => {
    world.server.chat(
      scripts.toolCalls([{ id: 'call_add', name: 'add', arguments: '{"a":2,"b":3}' }]),
      scripts.reply('2 + 3 = 5'),
    );
    const runId = await world.say('helper', 'conv-tool', 'What is 2 + 3?');
    const events = await world.results(runId);
    expect(events.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    expect(events.find((e) => e.event === 'tool.call.started')!.data.data).toMatchObject({
      tool_call_id: 'call_add',
      tool_name: 'add',
      parameters: { a: 2, b: 3 },
    });
    const completed = events.find((e) => e.event === 'tool.call.completed')!.data.data;
    expect(completed).toMatchObject({ tool_call_id: 'call_add', tool_name: 'add', error: null });
    expect(JSON.stringify(completed.result)).toContain('5');
    const [first, second] = world.chats();
    // Granted host tools (not `echo`) and the skill tools of the local agent.
    expect(first.tools.map((t: any) => t.function.name).sort()).toEqual(['activate', 'add', 'read_skill_file']);
    expect(second.messages.find((m: any) => m.role === 'tool')).toMatchObject({
      tool_call_id: 'call_add',
      content: expect.stringContaining('5'),
    });
    expect((await world.audit(runId)).find((a) => a.action === 'tool.call')).toMatchObject({
      resource: 'tool:add',
      outcome: 'allowed',
    });
  });

  it('refuses an ungranted tool at the gate; the model gets the refusal as the tool result', async () => {
    world.server.chat(
      scripts.toolCalls([{ id: 'call_echo', name: 'echo', arguments: '{"text":"hi"}' }]),
      scripts.reply('I may not use that tool.'),
    );
    const runId = await world.say('helper', 'conv-ungranted', 'Echo hi');
    const events = await world.results(runId);
    expect(events.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    const completed = events.find((e) => e.event === 'tool.call.completed')!.data.data;
    expect(completed).toMatchObject({ tool_call_id: 'call_echo', tool_name: 'echo' });
    expect(completed.error).toEqual(expect.stringContaining('not authorized'));
    const [, second] = world.chats();
    expect(second.messages.find((m: any) => m.role === 'tool')).toMatchObject({
      tool_call_id: 'call_echo',
      content: expect.stringContaining('not authorized'),
    });
    expect((await world.audit(runId)).filter((a) => a.action === 'tool.call')).toEqual([
      expect.objectContaining({
        resource: 'tool:echo',
        outcome: 'denied',
        error_code: 'unauthorized',
        runner_id: LOCAL_AGENT,
      }),
    ]);
  });

  it('answers from a knowledge base: the retrieved passage reaches the model', async () => {
    world.server.chat(scripts.reply('The reset code is 4711.'));
    const runId = await world.say('librarian', 'conv-kb', 'What is the reset code of the Model 7 router?');
    const events = await world.results(runId);
    expect(events.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    expect(shown(world.chats()[0].messages)).toContain(KB_FACT);
    expect((await world.audit(runId)).find((a) => a.action === 'knowledge.retrieve')).toMatchObject({
      resource: 'knowledge_base:manual',
      outcome: 'allowed',
    });
  });

  it('offers the skills of SKILLS_DIR: an index in the prompt, activation, reads confined to the skill', async () => {
    world.server.chat(
      scripts.toolCalls([{ id: 'call_act', name: 'activate', arguments: '{"skill_name":"router-reset"}' }]),
      scripts.toolCalls([
        {
          id: 'call_ref',
          name: 'read_skill_file',
          arguments: '{"skill_name":"router-reset","path":"references/codes.md"}',
        },
        {
          id: 'call_out',
          name: 'read_skill_file',
          arguments: '{"skill_name":"router-reset","path":"../../admin-api-key"}',
        },
      ]),
      scripts.reply('Unplug it, hold RESET for ten seconds.'),
    );
    const runId = await world.say('helper', 'conv-skill', 'How do I reset my router?');
    const events = await world.results(runId);
    expect(events.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    const [first, second, third] = world.chats();
    expect(shown(first.messages)).toContain('router-reset');
    expect(shown(first.messages)).toContain(SKILL_DESCRIPTION);
    expect(shown(first.messages)).not.toContain(SKILL_INSTRUCTIONS);
    expect(first.tools.map((t: any) => t.function.name)).toEqual(
      expect.arrayContaining(['activate', 'read_skill_file']),
    );
    expect(second.messages.find((m: any) => m.tool_call_id === 'call_act').content).toContain(SKILL_INSTRUCTIONS);
    const byCall = Object.fromEntries(
      third.messages.filter((m: any) => m.role === 'tool').map((m: any) => [m.tool_call_id, m.content]),
    );
    expect(byCall.call_ref).toContain('Factory code: 0000');
    expect(byCall.call_out).not.toContain('e2e-admin-key');
    expect(
      events
        .filter((e) => e.event === 'tool.call.completed')
        .map((e) => [e.data.data.tool_call_id, e.data.data.error !== null])
        .sort(), // the two reads of one batch run in parallel: completions in any order
    ).toEqual([
      ['call_act', false],
      ['call_out', true],
      ['call_ref', false],
    ]);
  });

  it('takes a follow-up steered into its run at the next turn: one run answers both, the item injected once', async () => {
    // The first model turn asks for a tool, slowly: the follow-up arrives while the run works.
    world.server.chat(
      scripts.completion(
        { tool_calls: [{ id: 'call_add', name: 'add', arguments: '{"a":1,"b":1}' }] },
        { delay_ms: 800 },
      ),
      scripts.reply('1 + 1 = 2, and yes: I will remind you to call Bob.'),
    );
    const runId = await world.say('helper', 'conv-steer', 'What is 1 + 1?');
    await waitFor('the first model request', () => Promise.resolve(world.chats().length >= 1));
    const follow = await host.api('POST', '/v1/events', {
      agent_id: 'helper',
      event: { event_type: 'message.received', source: 'api' },
      conversation: { conversation_id: 'conv-steer' },
      actor: { actor_type: 'user', actor_id: 'u1' },
      input: { text: 'Also remind me to call Bob.' },
    });
    expect(follow.status).toBe(202);
    expect(follow.body).toMatchObject({ disposition: 'steered', run_id: runId, position: 1 });

    const events = await world.results(runId);
    expect(events.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    // Pulled after the tool batch: the second model request shows the follow-up as a user message.
    const chats = world.chats();
    expect(chats).toHaveLength(2);
    expect(shown(chats[0].messages)).not.toContain('call Bob');
    expect(chats[1].messages.filter((m: any) => m.role === 'user').map((m: any) => shown([m]))).toEqual([
      expect.stringContaining('What is 1 + 1?'),
      expect.stringContaining('Also remind me to call Bob.'),
    ]);
    // One run answered both: no second run for the conversation, the item injected exactly once.
    const runs = (await host.api('GET', '/v1/runs?conversation_id=conv-steer')).body.items;
    expect(runs.map((r: any) => r.run_id)).toEqual([runId]);
    const view = (await host.api('GET', '/v1/admin/steering?conversation_id=conv-steer')).body;
    expect(view.items).toEqual([
      expect.objectContaining({ run_id: runId, state: 'injected', pull_mode: 'all', next_run_id: null }),
    ]);
    const pulls = (await world.audit(runId)).filter((a) => a.action === 'steering.pull');
    expect(pulls.length).toBeGreaterThan(0);
    expect(pulls.every((a) => a.outcome === 'allowed' && a.runner_id === LOCAL_AGENT)).toBe(true);
  });

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
