import { spawn } from 'node:child_process';
import * as path from 'node:path';

// The ACP runner on the SDK's fake host against the scripted ACP agent (testing/scripted-agent.ts,
// the ACP SDK's agent side over stdio). The ACP SDK is ESM-only, which jest's module system cannot
// load: the scenarios run in a plain Node process (testing/drive.ts, through ts-node) and this
// spec asserts on what each run produced and on the ACP methods the agent received.

jest.setTimeout(240_000);

interface Scenario {
  outcome: {
    status: string;
    code?: string;
    error?: string;
    messages: string[];
    streamed: string;
    results: { type: string; sequence: number; data: any }[];
  };
  log: string[];
  /** The host API calls of the run (method and tool name). */
  hostCalls: string[];
}

const ROOT = path.resolve(__dirname, '..', '..', '..');

function drive(): Promise<Record<string, Scenario>> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '-r',
        'ts-node/register/transpile-only',
        '-r',
        'tsconfig-paths/register',
        path.join(__dirname, 'testing', 'drive.ts'),
      ],
      { cwd: ROOT, env: { ...process.env, TS_NODE_PROJECT: path.join(ROOT, 'tsconfig.json') } },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('exit', (code) =>
      code === 0
        ? resolve(JSON.parse(out) as Record<string, Scenario>)
        : reject(new Error(`drive.ts exited ${code}: ${err}`)),
    );
  });
}

describe('the ACP runner against a scripted ACP agent', () => {
  let s: Record<string, Scenario>;
  const types = (name: string) => s[name].outcome.results.map((r) => r.type);
  const sessionOf = (name: string) => s[name].outcome.results.find((r) => r.type === 'state.updated')?.data;

  beforeAll(async () => {
    s = await drive();
  });

  it('streams the agent message chunks as deltas and completes the run at the end of the turn', () => {
    const { outcome, log } = s.prompt;
    expect(outcome).toMatchObject({ status: 'completed', messages: ['echo: hello there [turn 1]'] });
    expect(outcome.streamed).toBe('echo: hello there [turn 1]');
    expect(types('prompt').filter((t) => t === 'message.delta').length).toBeGreaterThan(1);
    expect(types('prompt').at(-1)).toBe('run.completed');
    expect(outcome.results.at(-1)?.data.finish_reason).toBe('stop');
    // A new session, given the run's MCP bridge (stdio: this agent does not advertise mcpCapabilities.http).
    expect(log.slice(0, 2)).toEqual(['initialize', 'session/new mcpServers=1 stdio']);
    const session = sessionOf('prompt');
    expect(session).toMatchObject({ scope: 'conversation', key: 'acp.session_id' });
    expect(log[2]).toBe(`session/prompt ${session.value} hello there`);
  });

  it("maps the agent's tool call to tool.call.started and tool.call.completed", () => {
    const { outcome } = s.tool;
    expect(outcome.status).toBe('completed');
    const started = outcome.results.find((r) => r.type === 'tool.call.started');
    const completed = outcome.results.find((r) => r.type === 'tool.call.completed');
    expect(started?.data).toEqual({
      tool_call_id: 'call-1',
      tool_name: 'read_file',
      parameters: { path: '/tmp/notes.txt' },
    });
    expect(completed?.data).toEqual({
      tool_call_id: 'call-1',
      tool_name: 'read_file',
      result: { content: 'contents of /tmp/notes.txt' },
      error: null,
    });
    expect(started!.sequence).toBeLessThan(completed!.sequence);
    expect(outcome.messages).toEqual(['read /tmp/notes.txt']);
  });

  it('prompts a steered follow-up into the same ACP session, in the same run', () => {
    const { outcome, log } = s.steer;
    expect(outcome).toMatchObject({ status: 'completed', messages: ['echo: first [turn 1]', 'echo: second [turn 2]'] });
    const id = sessionOf('steer').value as string;
    expect(log).toEqual([
      'initialize',
      'session/new mcpServers=1 stdio',
      `session/prompt ${id} first`,
      `session/prompt ${id} second`,
    ]);
  });

  it("a later run of the conversation loads the session kept in conversation state; the agent's replay is not a result", () => {
    const id = sessionOf('steer').value as string;
    const { outcome, log } = s.resume;
    expect(log).toEqual(['initialize', `session/load ${id}`, `session/prompt ${id} third`]);
    expect(outcome).toMatchObject({ status: 'completed', messages: ['echo: third [turn 3]'] });
    expect(outcome.streamed).toBe('echo: third [turn 3]');
    expect(types('resume')).not.toContain('state.updated');
  });

  it('a session the agent no longer knows is replaced by a new one, kept in state', () => {
    const { outcome, log } = s['unknown-session'];
    expect(log.slice(0, 3)).toEqual(['initialize', 'session/load forgotten', 'session/new mcpServers=1 stdio']);
    expect(outcome).toMatchObject({ status: 'completed', messages: ['echo: again [turn 1]'] });
    expect(sessionOf('unknown-session').value).not.toBe('forgotten');
  });

  it("the host's cancel ends the run as cancelled and sends session/cancel to the agent", () => {
    const { outcome, log } = s.cancel;
    expect(outcome).toMatchObject({ status: 'failed', code: 'cancelled', error: 'cancelled: user stop' });
    const id = sessionOf('cancel').value as string;
    expect(log).toContain(`session/cancel ${id}`);
    expect(types('cancel').at(-1)).toBe('run.failed');
  });

  it("hands the agent the run's MCP bridge over the stdio relay: it lists the granted tools and its call goes through the host", () => {
    const { outcome, log, hostCalls } = s['mcp-stdio'];
    expect(log).toEqual(
      expect.arrayContaining([
        'session/new mcpServers=1 stdio',
        'mcp tools/list lookup,history_page,history_search',
        'mcp tools/call lookup ok',
      ]),
    );
    expect(hostCalls).toContain('CallTool lookup');
    expect(outcome).toMatchObject({
      status: 'completed',
      messages: ['mcp tools: lookup,history_page,history_search; lookup answered: found cats'],
    });
    // The agent reports its MCP call as a tool call of its own.
    expect(outcome.results.find((r) => r.type === 'tool.call.started')?.data).toMatchObject({
      tool_name: 'lookup',
      parameters: { q: 'cats' },
    });
  });

  it('prefers the streamable HTTP entry (the run secret as a header) when the agent advertises mcpCapabilities.http', () => {
    const { outcome, log, hostCalls } = s['mcp-http'];
    expect(log).toEqual(expect.arrayContaining(['session/new mcpServers=1 http', 'mcp tools/call lookup ok']));
    expect(hostCalls).toContain('CallTool lookup');
    expect(outcome.messages).toEqual(['mcp tools: lookup,history_page,history_search; lookup answered: found dogs']);
  });

  it('a tool the run was not granted is refused by the host through the bridge; mcp_bridge: false hands none', () => {
    const refused = s['mcp-refused'];
    expect(refused.hostCalls).toContain('CallTool secret_tool');
    expect(refused.log).toContain('mcp tools/call secret_tool error');
    expect(refused.outcome.messages[0]).toMatch(
      /^mcp tools: lookup,history_page,history_search; secret_tool failed: .*unauthorized/,
    );
    const completed = refused.outcome.results.find((r) => r.type === 'tool.call.completed');
    expect(completed?.data.error).toContain('unauthorized');

    expect(s['mcp-off'].log).toContain('session/new mcpServers=0');
    expect(s['mcp-off'].outcome.messages).toEqual(['no MCP server']);
    expect(s['mcp-off'].hostCalls).not.toContain('CallTool lookup');
  });

  it("answers the agent's permission requests as the config says (reject by default)", () => {
    expect(s['permission-allow'].outcome.messages).toEqual(['permission: yes']);
    expect(s['permission-reject'].outcome.messages).toEqual(['permission: no']);
  });

  it('a bad config is a field-named error; an agent that cannot start fails the run', () => {
    expect(s['bad-cwd'].outcome).toMatchObject({
      status: 'failed',
      code: 'runner.config_invalid',
      error: 'runner_config.cwd: must be an absolute path',
    });
    expect(s['bad-cwd'].log).toEqual([]);
    expect(s['no-agent'].outcome).toMatchObject({
      status: 'failed',
      code: 'runner.agent_failed',
      error: expect.stringContaining('the agent exited before initializing'),
    });
  });
});
