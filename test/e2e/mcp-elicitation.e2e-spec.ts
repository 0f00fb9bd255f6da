import * as path from 'node:path';
import { scripts } from '@libs/testing';
import { ADMIN_KEY, parseSse, waitFor } from './harness';
import { LocalAgentWorld } from './local-agent-setup';

/*
 * MCP elicitation as a structured interaction (docs/interactions.md#mcp-elicitation): a real MCP
 * server (stdio, @modelcontextprotocol/sdk) whose tool `ask_user` calls `elicitInput` during a
 * tool call of the local agent. The question reaches the platform as an `interaction.request` op;
 * the submission goes back to the server inside the waiting call; a call that times out first
 * closes the interaction `expired`. The capability is offered only to runs that may ask.
 */

jest.setTimeout(180_000);

const MCP_STDIO_ARGS = [
  '-r',
  require.resolve('ts-node/register/transpile-only'),
  path.join(__dirname, 'fixtures', 'mcp-stdio-server.ts'),
];

interface Op {
  op: string;
  payload: Record<string, any>;
}

describe('MCP elicitation', () => {
  // A run's own MCP connection spawns the server (ts-node): room for a busy machine.
  const world = new LocalAgentWorld({ MCP_CONNECT_TIMEOUT_MS: '60000' });
  const ON = { enable_interactions: true };
  let hurried = '';

  /** Reads the run's deliveries SSE (live) until an op of that type arrives. */
  const opOf = async (runId: string, type: string): Promise<Op> => {
    const ctl = new AbortController();
    const res = await fetch(`${world.host.http}/v1/runs/${runId}/deliveries`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
      signal: ctl.signal,
    });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          throw new Error(`the deliveries of ${runId} ended without ${type}`);
        }
        text += decoder.decode(value, { stream: true });
        const found = parseSse(text.slice(0, text.lastIndexOf('\n\n') + 2))
          .map((e) => e.data as unknown as Op)
          .find((o) => o.op === type);
        if (found) {
          return found;
        }
      }
    } finally {
      ctl.abort();
    }
  };
  const finished = (runId: string) =>
    waitFor(
      `run ${runId} finished`,
      async () => {
        const r = await world.host.api('GET', `/v1/runs/${runId}`);
        return ['completed', 'failed', 'cancelled', 'timeout'].includes(r.body?.status) ? r.body : null;
      },
      90_000,
    );
  const toolResult = async (runId: string) =>
    (await world.results(runId)).find((e) => e.event === 'tool.call.completed')!.data.data;

  beforeAll(async () => {
    await world.start();
    const src = await world.host.api('POST', '/v1/admin/tools/sources', {
      source_id: 'hurried',
      kind: 'mcp_stdio',
      config: { command: process.execPath, args: MCP_STDIO_ARGS, timeout_ms: 20_000 },
    });
    expect(src.status).toBe(201);
    hurried = (src.body.tools as string[]).find((n) => n.endsWith('ask_user'))!;
    await world.agent('asker', { tools: ['ask_user'], delivery: ON });
    await world.agent('hurried-asker', { tools: [hurried], delivery: ON });
    await world.agent('asker-off', { tools: ['ask_user'] });
  });

  afterAll(() => world.stop());

  beforeEach(() => world.server.reset());

  it("the server's question becomes a form; the answer goes back inside the waiting tool call", async () => {
    world.server.chat(
      scripts.toolCalls([{ id: 'call_ask', name: 'ask_user', arguments: '{}' }]),
      scripts.reply('Painting it green, two coats.'),
    );
    const runId = await world.say('asker', 'conv-elicit', 'Paint the fence.');
    const op = await opOf(runId, 'interaction.request');
    const p = op.payload;
    expect(p).toMatchObject({ kind: 'form', origin: 'mcp.elicitation' });
    expect(p.request.title).toBe('Which colour shall I paint it?');
    expect(p.request.fields).toEqual([
      expect.objectContaining({
        id: 'colour',
        label: 'Colour',
        type: 'select',
        required: true,
        options: [expect.objectContaining({ value: 'red' }), expect.objectContaining({ value: 'green' })],
      }),
      expect.objectContaining({ id: 'coats', label: 'Coats', type: 'number', required: false }),
    ]);
    expect(p.request.actions.map((a: { id: string }) => a.id)).toEqual(['accept', 'decline']);
    expect(p.fallback_text).toContain('Colour (required)');

    const submit = (body: object) =>
      world.host.api('POST', `/v1/interactions/${p.id}/submit`, { callback_token: p.callback_token, ...body });
    const bad = await submit({ action_id: 'accept', values: { colour: 'blue' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.field).toBe('values.colour');
    const ok = await submit({ action_id: 'accept', values: { colour: 'green', coats: 2 } });
    expect(ok.status).toBe(202);
    expect(ok.body).toMatchObject({ status: 'submitted', disposition: 'delivered', run_id: runId });
    expect((await submit({ action_id: 'accept', values: { colour: 'red' } })).status).toBe(409);

    expect((await finished(runId)).status).toBe('completed');
    const result = await toolResult(runId);
    expect(result.error).toBeNull();
    expect(JSON.stringify(result.result)).toContain('elicitation accept {\\"colour\\":\\"green\\",\\"coats\\":2}');
    const timeline = await world.host.api('GET', '/v1/admin/conversations/conv-elicit/timeline');
    const types = timeline.body.entries.map((e: { type: string }) => e.type);
    expect(types).toEqual(expect.arrayContaining(['interaction.requested', 'interaction.submitted']));
  });

  it('a tool call that times out first closes the interaction expired; a late answer gets 409', async () => {
    world.server.chat(
      scripts.toolCalls([{ id: 'call_hurry', name: hurried, arguments: '{}' }]),
      scripts.reply('Nobody answered.'),
    );
    const runId = await world.say('hurried-asker', 'conv-hurry', 'Paint the shed.');
    const op = await opOf(runId, 'interaction.request');
    expect((await finished(runId)).status).toBe('completed');
    const result = await toolResult(runId);
    expect(result.error).toMatch(/did not finish within 20000 ms/);
    const expired = await waitFor('the interaction expired', async () => {
      const r = await world.host.api('GET', '/v1/admin/interactions?status=expired');
      return r.body.items.find((i: { id: string }) => i.id === op.payload.id);
    });
    expect(expired.status_reason).toContain('the tool call that asked has ended');
    const late = await world.host.api('POST', `/v1/interactions/${op.payload.id}/submit`, {
      callback_token: op.payload.callback_token,
      action_id: 'accept',
      values: { colour: 'red' },
    });
    expect(late.status).toBe(409);
    expect(late.body.error.details.status).toBe('expired');
    const update = await opOf(runId, 'interaction.update');
    expect(update.payload).toMatchObject({ id: op.payload.id, status: 'expired' });
  });

  it('a run that may not ask is not offered elicitation: the server says so, nothing is requested', async () => {
    world.server.chat(
      scripts.toolCalls([{ id: 'call_off', name: 'ask_user', arguments: '{}' }]),
      scripts.reply('I cannot ask here.'),
    );
    const runId = await world.say('asker-off', 'conv-no-elicit', 'Paint the gate.');
    expect((await finished(runId)).status).toBe('completed');
    const result = await toolResult(runId);
    expect(result.error).toMatch(/elicitation failed/);
    const pending = await world.host.api('GET', '/v1/admin/interactions?status=pending');
    expect(pending.body.items.some((i: { run_id: string }) => i.run_id === runId)).toBe(false);
  });
});
