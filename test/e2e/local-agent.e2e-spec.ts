import { scripts } from '@libs/testing';
import {
  KB_FACT,
  LOCAL_AGENT,
  LocalAgentWorld,
  SKILL_DESCRIPTION,
  SKILL_INSTRUCTIONS,
  shown,
} from './local-agent-setup';

/*
 * The built-in local agent through the real host: events over HTTP start runs of
 * `builtin:local-agent/default`, which the host dispatches in process; the agent calls the host
 * API through the in-process adapter (same gate, audit, limits as a gRPC plugin); the host calls
 * the scripted OpenAI-compatible server with the real openai SDK over real HTTP and a real MCP
 * server over stdio. SQLite by default, PostgreSQL with E2E_DATABASE=postgres. Fallback, overflow,
 * cancel, deadline and the audit comparison: local-agent-control.e2e-spec.ts.
 */

jest.setTimeout(120_000);

describe('the built-in local agent, end to end', () => {
  const world = new LocalAgentWorld();
  const { host } = world;

  beforeAll(async () => {
    await world.start();
    await world.agent('helper', { tools: ['add'], kbs: [] });
    await world.agent('librarian', { kbs: ['manual'], config: { 'knowledge-bases': ['manual'] } });
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
});
