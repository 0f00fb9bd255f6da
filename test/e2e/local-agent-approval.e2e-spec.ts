import * as fs from 'node:fs';
import * as path from 'node:path';
import { scripts } from '@libs/testing';
import { ADMIN_KEY, parseSse, waitFor } from './harness';
import { LocalAgentWorld, shown } from './local-agent-setup';

/*
 * The local agent's tool approval through the real host (docs/interactions.md#tool-approval-local-agent):
 * a tool call the agent's config marks is not executed; the run asks through an interaction (an
 * `interaction.request` op on the deliveries) and ends; the platform's submission starts the next
 * run, which executes the approved call exactly once (a real MCP server over stdio appends a line
 * to a file: the file counts executions) or tells the model it was refused. Also across a host
 * killed with SIGKILL while the approval is pending. SQLite by default, PostgreSQL with
 * E2E_DATABASE=postgres.
 */

jest.setTimeout(180_000);

interface Op {
  op: string;
  payload: Record<string, any>;
}

describe('local agent: tool approval', () => {
  // The restarted host spawns the MCP server (ts-node) again: room for a busy machine.
  const world = new LocalAgentWorld({ MCP_CONNECT_TIMEOUT_MS: '60000' });
  const ON = { enable_interactions: true };
  let dir: string;

  const deliveries = async (runId: string): Promise<Op[]> => {
    const res = await fetch(`${world.host.http}/v1/runs/${runId}/deliveries`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
    });
    expect(res.status).toBe(200);
    return parseSse(await res.text()).map((e) => e.data as unknown as Op);
  };
  const finished = (runId: string) =>
    waitFor(`run ${runId} finished`, async () => {
      const r = await world.host.api('GET', `/v1/runs/${runId}`);
      return ['completed', 'failed', 'cancelled', 'timeout'].includes(r.body?.status) ? r.body : null;
    });
  const lines = (file: string) =>
    fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
  const submit = (p: Record<string, any>, action: string) =>
    world.host.api('POST', `/v1/interactions/${p.id}/submit`, { callback_token: p.callback_token, action_id: action });

  /** A message whose answer is a call of `append` to `file`; answers the asking run and its request op. */
  const askToAppend = async (agent: string, conversation: string, file: string) => {
    world.server.chat(
      scripts.toolCalls([
        { id: `call_${conversation}`, name: 'append', arguments: JSON.stringify({ file, line: 'one' }) },
      ]),
    );
    const runId = await world.say(agent, conversation, `Please write "one" to ${path.basename(file)}.`);
    const run = await finished(runId);
    const request = (await deliveries(runId)).find((o) => o.op === 'interaction.request');
    return { runId, run, request };
  };

  beforeAll(async () => {
    await world.start();
    dir = fs.mkdtempSync(path.join(world.db.dataDir, 'approval-'));
    await world.agent('careful', { tools: ['append', 'add'], config: { 'approval-tools': ['append'] }, delivery: ON });
    await world.agent('careful-source', {
      tools: ['append'],
      config: { 'approval-sources': ['local'], 'approval-expires-in': 2 },
      delivery: ON,
    });
    await world.agent('careful-off', { tools: ['append'], config: { 'approval-tools': ['append'] } });
  });

  afterAll(() => world.stop());

  beforeEach(() => world.server.reset());

  it('approved: the run asks and ends; the submission starts the run that executes the call exactly once', async () => {
    const file = path.join(dir, 'approved.txt');
    const { runId, run, request } = await askToAppend('careful', 'conv-approve', file);
    expect(run.status).toBe('completed');
    const events = await world.results(runId);
    expect(events.at(-1)!.data).toMatchObject({
      type: 'run.completed',
      data: { finish_reason: 'interaction_requested' },
    });
    expect(events.some((e) => e.event === 'tool.call.started')).toBe(false);
    expect(lines(file)).toEqual([]);

    const p = request!.payload;
    expect(p).toMatchObject({ kind: 'confirmation', presentation: 'fallback' });
    expect(p.request.title).toBe('Approve tool call: append');
    expect(p.request.description).toContain(`append({"file":${JSON.stringify(file)},"line":"one"})`);
    expect(p.fallback_text).toContain('append(');
    expect(p.request.actions.map((a: { id: string }) => a.id)).toEqual(['approve', 'reject']);
    const pending = await world.host.api('GET', '/v1/admin/interactions');
    expect(pending.body.items.find((i: { id: string }) => i.id === p.id)).toMatchObject({
      run_id: runId,
      agent_id: 'careful',
      kind: 'confirmation',
      status: 'pending',
    });

    world.server.chat(scripts.reply('Done: "one" is written.'));
    const ok = await submit(p, 'approve');
    expect(ok.status).toBe(202);
    expect(ok.body).toMatchObject({ status: 'submitted', disposition: 'started' });
    const next = await finished(ok.body.run_id);
    expect(next.status).toBe('completed');
    expect(lines(file)).toEqual(['one']);
    const results = await world.results(ok.body.run_id);
    expect(results.filter((e) => e.event === 'tool.call.completed').map((e) => e.data.data.tool_name)).toEqual([
      'append',
    ]);
    expect(results.find((e) => e.event === 'message.completed')!.data.data.message.content).toBe(
      'Done: "one" is written.',
    );
    // The model saw the original question, its own call and the tool's result, not "approve" as a user message.
    const chat = world.chats().at(-1)!;
    expect(shown(chat.messages)).toContain('Please write "one"');
    expect(chat.messages.at(-2)).toMatchObject({
      role: 'assistant',
      tool_calls: [{ id: 'call_conv-approve', function: { name: 'append' } }],
    });
    expect(chat.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_conv-approve' });
    expect(chat.messages.some((m: any) => m.role === 'user' && m.content === 'approve')).toBe(false);

    // The conversation's timeline shows the request and its answer, between the two runs.
    const timeline = await world.host.api('GET', '/v1/admin/conversations/conv-approve/timeline');
    const types = timeline.body.entries.map((e: { type: string }) => e.type);
    expect(types.indexOf('interaction.requested')).toBeGreaterThan(types.indexOf('run.created'));
    expect(timeline.body.entries.find((e: { type: string }) => e.type === 'interaction.requested')).toMatchObject({
      run_id: runId,
      detail: { id: p.id, kind: 'confirmation', title: 'Approve tool call: append' },
    });
    expect(timeline.body.entries.find((e: { type: string }) => e.type === 'interaction.submitted')).toMatchObject({
      event_id: ok.body.event_id,
      detail: { id: p.id, action_id: 'approve' },
    });

    // A second submission is refused; nothing executes again.
    const again = await submit(p, 'approve');
    expect(again.status).toBe(409);
    expect(lines(file)).toEqual(['one']);
  });

  it('rejected: nothing executes and the model is told', async () => {
    const file = path.join(dir, 'rejected.txt');
    const { request } = await askToAppend('careful', 'conv-reject', file);
    world.server.chat(scripts.reply('Understood, I did not write it.'));
    const r = await submit(request!.payload, 'reject');
    expect(r.status).toBe(202);
    expect((await finished(r.body.run_id)).status).toBe('completed');
    expect(lines(file)).toEqual([]);
    const chat = world.chats().at(-1)!;
    expect(chat.messages.at(-1)).toMatchObject({ role: 'tool', content: expect.stringContaining('rejected') });
  });

  it('by source, expired: the token is refused, and the next message shows the model the refusal', async () => {
    const file = path.join(dir, 'expired.txt');
    const { request } = await askToAppend('careful-source', 'conv-expire', file);
    const p = request!.payload;
    await waitFor('expiry passed', () => Promise.resolve(Date.now() > p.expires_at * 1000 + 200), 10_000);
    const late = await submit(p, 'approve');
    expect(late.status).toBe(409);
    expect(late.body.error.details.status).toBe('expired');

    world.server.reset();
    world.server.chat(scripts.reply('Then let us move on.'));
    const runId = await world.say('careful-source', 'conv-expire', 'What now?');
    expect((await finished(runId)).status).toBe('completed');
    expect(lines(file)).toEqual([]);
    const [chat] = world.chats();
    expect(shown(chat.messages)).toContain('expired unanswered');
    expect(chat.messages.at(-1)).toMatchObject({ role: 'user', content: expect.stringContaining('What now?') });
  });

  it('an agent whose delivery policy does not enable interactions refuses the call to the model', async () => {
    const file = path.join(dir, 'off.txt');
    world.server.chat(
      scripts.toolCalls([{ id: 'call_off', name: 'append', arguments: JSON.stringify({ file, line: 'x' }) }]),
      scripts.reply('I may not write files here.'),
    );
    const runId = await world.say('careful-off', 'conv-off', 'Write x.');
    expect((await finished(runId)).status).toBe('completed');
    expect(lines(file)).toEqual([]);
    expect((await deliveries(runId)).some((o) => o.op === 'interaction.request')).toBe(false);
    const [, second] = world.chats();
    expect(second.messages.at(-1)).toMatchObject({ role: 'tool', content: expect.stringContaining('approval') });
  });

  it('the host killed (SIGKILL) while the approval is pending: still answerable after the restart, executed once', async () => {
    const file = path.join(dir, 'killed.txt');
    const { request } = await askToAppend('careful', 'conv-kill', file);
    const p = request!.payload;
    await world.restart('SIGKILL');
    world.server.chat(scripts.reply('Written after the restart.'));
    const ok = await submit(p, 'approve');
    expect(ok.status).toBe(202);
    expect((await finished(ok.body.run_id)).status).toBe('completed');
    expect(lines(file)).toEqual(['one']);
    const submitted = await world.host.api('GET', '/v1/admin/interactions?status=submitted');
    expect(submitted.body.items.map((i: { id: string }) => i.id)).toContain(p.id);
  });
});
