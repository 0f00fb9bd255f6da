import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { FakeHost, type FakeRunOutcome } from '@runner-host/runner-sdk/testing';
import { ACP_STATE_KEY, acp } from '../runner';

/*
 * The ACP runner's test scenarios on the SDK's fake host against the scripted ACP agent, run in
 * a plain Node process (the ACP SDK is ESM-only: jest cannot load it, Node's require() can).
 * runner.spec.ts starts this file with ts-node and asserts on the JSON it prints: per scenario,
 * the run's outcome and the ACP methods the agent received.
 */

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acp-runner-'));
const logFile = path.join(dir, 'agent.log');
process.env.ACP_FIXTURE_STATE = path.join(dir, 'sessions.json');
process.env.ACP_FIXTURE_LOG = logFile;
// The agent runs from its own working directory: ts-node needs the repository's tsconfig by its absolute path.
process.env.TS_NODE_PROJECT = path.resolve(__dirname, '..', '..', '..', '..', 'tsconfig.json');

const agentConfig = {
  command: process.execPath,
  args: ['-r', require.resolve('ts-node/register/transpile-only'), path.join(__dirname, 'scripted-agent.ts')],
  cwd: dir,
};

const httpAgentConfig = { ...agentConfig, args: [...agentConfig.args, '--mcp-http'] };

function summary(o: FakeRunOutcome) {
  return {
    status: o.status,
    code: o.code,
    error: o.error,
    messages: o.messages,
    streamed: o.streamed,
    results: o.results.map((r) => ({ type: r.type, sequence: r.sequence, data: r.data })),
  };
}

function takeLog(): string[] {
  const lines = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').filter(Boolean) : [];
  fs.rmSync(logFile, { force: true });
  return lines;
}

async function main() {
  const host = new FakeHost({
    runners: [acp],
    tools: {
      lookup: (p) => ({
        is_error: false,
        content: [{ type: 'text', text: `found ${typeof p.q === 'string' ? p.q : JSON.stringify(p.q)}` }],
      }),
    },
  });
  const out: Record<string, unknown> = {};
  const scenario = async (name: string, fn: () => Promise<FakeRunOutcome>) => {
    const before = host.calls.length;
    const outcome = await fn();
    const hostCalls = host.calls
      .slice(before)
      .map((c) =>
        c.method === 'CallTool' || c.method === 'GetToolDetail' ? `${c.method} ${c.request.tool_name}` : c.method,
      );
    out[name] = { outcome: summary(outcome), log: takeLog(), hostCalls };
    return outcome;
  };

  await scenario('prompt', () => host.run({ text: 'hello there', config: agentConfig, conversationId: 'c1' }));
  await scenario('tool', () => host.run({ text: 'tool: /tmp/notes.txt', config: agentConfig, conversationId: 'c2' }));
  const steered = await scenario('steer', async () => {
    const run = host.start({ text: 'first', config: { ...agentConfig, steer_wait_ms: 0 }, conversationId: 'c3' });
    host.steer(run.runId, 'second');
    return run.done;
  });
  const sessionId = steered.results.find((r) => r.type === 'state.updated')?.data.value as string;
  await scenario('resume', () =>
    host.run({
      text: 'third',
      config: agentConfig,
      conversationId: 'c3',
      context: (ctx) => ({ ...ctx, state: { ...ctx.state!, conversation: { [ACP_STATE_KEY]: sessionId } } }),
    }),
  );
  await scenario('unknown-session', () =>
    host.run({
      text: 'again',
      config: agentConfig,
      conversationId: 'c4',
      context: (ctx) => ({ ...ctx, state: { ...ctx.state!, conversation: { [ACP_STATE_KEY]: 'forgotten' } } }),
    }),
  );
  await scenario('cancel', async () => {
    const run = host.start({ text: 'hang', config: agentConfig });
    await run.waitFor('message.delta').catch(() => undefined);
    host.cancel(run.runId, 'user stop');
    const outcome = await run.done;
    // The cancel notification reaches the agent after the run's end was reported.
    for (
      let i = 0;
      i < 200 && !(fs.existsSync(logFile) && fs.readFileSync(logFile, 'utf8').includes('session/cancel'));
      i++
    ) {
      await new Promise((r) => setTimeout(r, 25));
    }
    return outcome;
  });
  // The run's MCP bridge: over the stdio relay, or streamable HTTP when the agent advertises it.
  await scenario('mcp-stdio', () => host.run({ text: 'mcp: lookup {"q":"cats"}', config: agentConfig }));
  await scenario('mcp-http', () => host.run({ text: 'mcp: lookup {"q":"dogs"}', config: httpAgentConfig }));
  await scenario('mcp-refused', () => host.run({ text: 'mcp: secret_tool {}', config: httpAgentConfig }));
  await scenario('mcp-off', () =>
    host.run({ text: 'mcp: lookup {"q":"x"}', config: { ...httpAgentConfig, mcp_bridge: false } }),
  );
  await scenario('permission-allow', () => host.run({ text: 'ask', config: { ...agentConfig, permissions: 'allow' } }));
  await scenario('permission-reject', () => host.run({ text: 'ask', config: agentConfig }));
  await scenario('bad-cwd', () => host.run({ text: 'x', config: { ...agentConfig, cwd: 'relative/dir' } }));
  await scenario('no-agent', () => host.run({ text: 'x', config: { command: path.join(dir, 'no-such-agent') } }));
  process.stdout.write(`${JSON.stringify(out)}\n`);
  fs.rmSync(dir, { recursive: true, force: true });
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
    process.exit(1);
  },
);
