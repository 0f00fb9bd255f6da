import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ScriptedOpenAIServer, scripts } from '@libs/testing';
import { FakeDify } from '../../apps/runners/hosted-workflow/testing/fake-targets';
import { Host, TestDatabase, runnerConnected, waitFor } from './harness';
import { message } from './steering-support';

/*
 * The reference runners (docs/reference-runners.md) as real processes, started from the build
 * (`node dist/apps/runners/...`) with the SDK's environment variables, against the real host and
 * the scripted fakes of their targets: the OpenAI-compatible runner against the scripted
 * OpenAI-compatible server, the Dify runner against a scripted Dify app API, the ACP runner driving
 * the scripted ACP agent (built to dist/apps/runners/acp/testing/scripted-agent.js).
 */

jest.setTimeout(120_000);

const ROOT = path.resolve(__dirname, '..', '..');
const OPENAI_KEY = 'sk-ref-e2e';
const DIFY_KEY = 'app-ref-e2e';
const ACP_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'ref-e2e-acp-'));

function startRunner(
  main: string,
  host: Host,
  token: string,
  plugin: string,
): { child: ChildProcess; logs: () => string } {
  const child = spawn(process.execPath, [path.join(ROOT, 'dist/apps/runners', main)], {
    env: {
      ...process.env,
      RUNNERHOST_GRPC_URL: host.grpc,
      RUNNERHOST_PLUGIN_TOKEN: token,
      RUNNERHOST_PLUGIN_AUTHOR: 'ref',
      RUNNERHOST_PLUGIN_NAME: plugin,
      REF_E2E_OPENAI_KEY: OPENAI_KEY,
      REF_E2E_DIFY_KEY: DIFY_KEY,
      // Read by the scripted ACP agent, which the ACP runner starts with its own environment.
      ACP_FIXTURE_STATE: path.join(ACP_DIR, 'sessions.json'),
      ACP_FIXTURE_LOG: path.join(ACP_DIR, 'agent.log'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const chunks: string[] = [];
  child.stdout.on('data', (d: Buffer) => chunks.push(d.toString()));
  child.stderr.on('data', (d: Buffer) => chunks.push(d.toString()));
  return { child, logs: () => chunks.join('') };
}

async function stop(child: ChildProcess | undefined): Promise<void> {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
}

describe('reference runners as processes against the real host', () => {
  const db = new TestDatabase();
  let host: Host;
  let openai: ScriptedOpenAIServer;
  let dify: FakeDify;
  const runners: { child: ChildProcess; logs: () => string }[] = [];

  const answerOf = async (runId: string) => {
    const events = (await host.sse(runId)).map((e) => e.data);
    return {
      types: events.map((e) => e.type),
      streamed: events
        .filter((e) => e.type === 'message.delta')
        .map((e) => e.data.chunk.content as string)
        .join(''),
      messages: events.filter((e) => e.type === 'message.completed').map((e) => e.data.message.content as string),
      events,
    };
  };

  beforeAll(async () => {
    openai = await ScriptedOpenAIServer.start();
    dify = await new FakeDify(DIFY_KEY).start();
    host = await new Host(db).start();
    for (const [plugin, main, runnerIds] of [
      ['openai', 'openai-compatible/main.js', ['plugin:ref/openai/default']],
      ['workflow', 'hosted-workflow/main.js', ['plugin:ref/workflow/dify', 'plugin:ref/workflow/webhook']],
      ['acp', 'acp/main.js', ['plugin:ref/acp/default']],
    ] as const) {
      const reg = await host.api('POST', '/v1/admin/plugins', { author: 'ref', name: plugin });
      expect(reg.status).toBe(201);
      runners.push(startRunner(main, host, reg.body.token as string, plugin));
      for (const id of runnerIds) {
        await runnerConnected(host, id);
      }
    }
    const agents = [
      {
        agent_id: 'oai',
        runner_id: 'plugin:ref/openai/default',
        runner_config: {
          base_url: openai.baseUrl,
          model: 'gpt-e2e',
          api_key_env: 'REF_E2E_OPENAI_KEY',
          system_prompt: 'Be brief.',
        },
      },
      {
        agent_id: 'dify',
        runner_id: 'plugin:ref/workflow/dify',
        runner_config: { base_url: dify.baseUrl, api_key_env: 'REF_E2E_DIFY_KEY' },
      },
      {
        agent_id: 'acp',
        runner_id: 'plugin:ref/acp/default',
        runner_config: {
          command: process.execPath,
          args: [path.join(ROOT, 'dist/apps/runners/acp/testing/scripted-agent.js')],
          cwd: ACP_DIR,
        },
        resource_policy: { allowed_tool_names: ['current_time'] },
      },
      {
        agent_id: 'acp-http',
        runner_id: 'plugin:ref/acp/default',
        runner_config: {
          command: process.execPath,
          args: [path.join(ROOT, 'dist/apps/runners/acp/testing/scripted-agent.js'), '--mcp-http'],
          cwd: ACP_DIR,
        },
        resource_policy: { allowed_tool_names: ['current_time'] },
      },
    ];
    for (const agent of agents) {
      const created = await host.api('POST', '/v1/admin/agents', agent);
      expect(created.status).toBe(201);
    }
  });

  afterAll(async () => {
    for (const r of runners) {
      await stop(r.child);
    }
    await host?.stop();
    await openai?.close();
    await dify?.close();
    await db.drop();
    fs.rmSync(ACP_DIR, { recursive: true, force: true });
  });

  it("the host refuses a binding whose config misses a field the runner's config_schema requires", async () => {
    const refused = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'oai-bad',
      runner_id: 'plugin:ref/openai/default',
      runner_config: { base_url: openai.baseUrl },
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain('runner_config.model: is required');
    expect((await host.api('GET', '/v1/admin/agents/oai-bad')).status).toBe(404);
  });

  it('the OpenAI-compatible runner streams the endpoint answer and sends the conversation history on the next message', async () => {
    openai.chat(
      scripts.completion({ content: 'Hello from the endpoint.', deltas: ['Hello ', 'from the ', 'endpoint.'] }),
    );
    const first = await host.api('POST', '/v1/events', message('oai', 'c-oai', 'hi there'));
    expect(first.body).toMatchObject({ disposition: 'started' });
    const a1 = await answerOf(first.body.run_id);
    expect(a1.streamed).toBe('Hello from the endpoint.');
    expect(a1.messages).toEqual(['Hello from the endpoint.']);
    expect(a1.types.at(-1)).toBe('run.completed');
    expect(openai.last()).toMatchObject({
      path: '/v1/chat/completions',
      headers: { authorization: `Bearer ${OPENAI_KEY}` },
      body: {
        model: 'gpt-e2e',
        stream: true,
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'hi there' },
        ],
      },
    });

    openai.chat(scripts.reply('Second.'));
    const second = await host.api('POST', '/v1/events', message('oai', 'c-oai', 'and again'));
    expect((await answerOf(second.body.run_id)).messages).toEqual(['Second.']);
    // The history came from the host's transcript, through the history API.
    expect(openai.last()!.body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'hi there' },
      { role: 'assistant', content: 'Hello from the endpoint.' },
      { role: 'user', content: 'and again' },
    ]);
    expect((await host.api('GET', `/v1/runs/${second.body.run_id}`)).body.status).toBe('completed');
  });

  it("the Dify runner streams the app's answer and continues the same Dify conversation on the next message", async () => {
    dify.script({ answer: ['Hi ', 'from ', 'Dify.'] }, { answer: ['Again.'] });
    const first = await host.api('POST', '/v1/events', message('dify', 'c-dify', 'hello dify'));
    const a1 = await answerOf(first.body.run_id);
    expect(a1.streamed).toBe('Hi from Dify.');
    expect(a1.messages).toEqual(['Hi from Dify.']);
    expect(a1.types.at(-1)).toBe('run.completed');
    const completed = a1.events.find((e) => e.type === 'message.completed');
    expect(completed?.usage).toMatchObject({ total_tokens: 15 });

    const second = await host.api('POST', '/v1/events', message('dify', 'c-dify', 'follow up'));
    expect((await answerOf(second.body.run_id)).messages).toEqual(['Again.']);
    const [c1, c2] = dify.chats.map((r) => r.body.conversation_id as string);
    expect(c1).toBe('');
    // The second run read Dify's conversation id from the host's conversation state.
    expect(c2).not.toBe('');
    expect(dify.conversations.get(c2)).toEqual(['hello dify', 'follow up']);
    expect(dify.chats.every((r) => r.headers.authorization === `Bearer ${DIFY_KEY}`)).toBe(true);
  });

  it('the ACP runner answers through the agent and continues its ACP session on the next message of the conversation', async () => {
    const first = await host.api('POST', '/v1/events', message('acp', 'c-acp', 'hello agent'));
    const a1 = await answerOf(first.body.run_id);
    expect(a1.streamed).toBe('echo: hello agent [turn 1]');
    expect(a1.messages).toEqual(['echo: hello agent [turn 1]']);
    expect(a1.types.at(-1)).toBe('run.completed');

    const second = await host.api('POST', '/v1/events', message('acp', 'c-acp', 'tool: /etc/hostname'));
    const a2 = await answerOf(second.body.run_id);
    expect(a2.types).toEqual(expect.arrayContaining(['tool.call.started', 'tool.call.completed']));
    expect(a2.messages).toEqual(['read /etc/hostname']);
    // The second run's agent loaded the session the first run created (its id in conversation state).
    const log = fs.readFileSync(path.join(ACP_DIR, 'agent.log'), 'utf8').split('\n').filter(Boolean);
    const created = log.filter((l) => l.startsWith('session/new'));
    const loaded = log.filter((l) => l.startsWith('session/load'));
    expect(created).toHaveLength(1);
    expect(loaded).toHaveLength(1);
    const sessionId = loaded[0].split(' ')[1];
    expect(log.filter((l) => l.startsWith('session/prompt')).map((l) => l.split(' ')[1])).toEqual([
      sessionId,
      sessionId,
    ]);
  });

  it("the ACP runner hands the agent the run's MCP bridge: the agent lists the granted tools and its call is audited in the run", async () => {
    type AuditRow = { action: string; resource: string | null; outcome: string };
    const auditOf = async (runId: string) =>
      ((await host.api('GET', `/v1/admin/runs/${runId}/audit?limit=100`)).body.items as AuditRow[])
        .filter((a) => a.action === 'tool.call')
        .map((a) => [a.resource, a.outcome]);
    const cases = [
      ['acp', 'c-acp-mcp', 'stdio'],
      ['acp-http', 'c-acp-mcp-http', 'http'],
    ] as const;
    const logFile = path.join(ACP_DIR, 'agent.log');
    const agentLog = () => (fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').filter(Boolean) : []);
    for (const [agentId, conversation, transport] of cases) {
      const before = agentLog().length;
      const run = await host.api('POST', '/v1/events', message(agentId, conversation, 'mcp: current_time {}'));
      expect(run.body).toMatchObject({ disposition: 'started' });
      const answer = await answerOf(run.body.run_id);
      expect(answer.types.at(-1)).toBe('run.completed');
      // The bridge lists what the run was granted: current_time, not the host's other tools.
      expect(answer.messages).toHaveLength(1);
      const [, listed, result] = /^mcp tools: (\S*); current_time answered: (.*)$/s.exec(answer.messages[0]) ?? [];
      expect(listed.split(',')).toContain('current_time');
      expect(listed.split(',')).not.toContain('http_fetch');
      // current_time answers its text content: the time in UTC.
      expect(result).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
      const log = agentLog().slice(before);
      expect(log).toEqual(
        expect.arrayContaining([`session/new mcpServers=1 ${transport}`, 'mcp tools/call current_time ok']),
      );
      // The agent's call went through the host API with the run's identity: in the run's audit.
      await waitFor('the tool call in the audit', async () =>
        (await auditOf(run.body.run_id)).length > 0 ? true : null,
      );
      expect(await auditOf(run.body.run_id)).toEqual([['tool:current_time', 'allowed']]);
    }

    // A tool the run was not granted: the host refuses it (audited as denied) and the tool never runs.
    const refused = await host.api(
      'POST',
      '/v1/events',
      message('acp-http', 'c-acp-mcp-no', 'mcp: http_fetch {"url":"http://127.0.0.1:1/"}'),
    );
    const answer = await answerOf(refused.body.run_id);
    expect(answer.messages[0]).toMatch(/http_fetch failed: .*unauthorized/);
    await waitFor('the refusal in the audit', async () =>
      (await auditOf(refused.body.run_id)).length > 0 ? true : null,
    );
    expect(await auditOf(refused.body.run_id)).toEqual([['tool:http_fetch', 'denied']]);
  });
});
