import type { AgentRunContext, JsonObject } from '../host-port';
import { call, FakeHost, fakeContext, withApis } from '../testing/fake-host';
import { runAgent, terminal } from '../testing/run-agent';
import { APPROVAL_STATE_KEY, REFUSED, approvalRequest, needsApproval, approvalPolicy } from './approval';
import { parseAgentConfig } from '../config';

/*
 * Tool approval (docs/interactions.md#tool-approval-local-agent) against the fake host: the run
 * that meets a call needing approval asks and ends; the run the answer starts executes it once
 * or tells the model it was refused.
 */

const KEY = `conversation/${APPROVAL_STATE_KEY}`;

function context(over: Partial<AgentRunContext> = {}, config: JsonObject = {}): AgentRunContext {
  const base = fakeContext(over, { 'approval-tools': ['delete'], ...config });
  return withApis(
    {
      ...base,
      resources: {
        ...base.resources,
        tools: [
          { tool_name: 'delete', source: 'mcp', source_id: 'files' },
          { tool_name: 'list', source: 'mcp', source_id: 'files' },
          { tool_name: 'add', source: 'mcp', source_id: 'math' },
        ],
      },
    },
    { state: true },
  );
}

const answer = (runId: string, interactionId: string, actionId: string): Partial<AgentRunContext> => ({
  run_id: runId,
  event: { event_id: `interaction:${runId}`, event_type: 'interaction.submitted' },
  input: { text: actionId, interaction: { interaction_id: interactionId, action_id: actionId, values: {} } },
});

function host(): { h: FakeHost; executed: JsonObject[] } {
  const executed: JsonObject[] = [];
  const h = new FakeHost()
    .tool('delete', (p) => {
      executed.push(p);
      return { content: [{ type: 'text', text: `deleted ${String(p.path)}` }] };
    })
    .tool('add', () => ({ content: [{ type: 'text', text: '5' }] }));
  h.interactions = true;
  return { h, executed };
}

async function ask(h: FakeHost): Promise<string> {
  h.script('m1', { tool_calls: [call('c1', 'delete', { path: '/tmp/x' }), call('c2', 'add', { a: 2, b: 3 })] });
  await runAgent(h, context());
  const [action] = h.resultsOf('action.requested');
  expect(terminal(h)).toEqual([{ type: 'run.completed', data: { finish_reason: 'interaction_requested' } }]);
  return (action.data.payload as JsonObject).interaction_id as string;
}

describe('tool approval', () => {
  it('asks with a confirmation showing the call and its arguments; runs the other calls; executes nothing needing approval', async () => {
    const { h, executed } = host();
    const id = await ask(h);
    const [action] = h.resultsOf('action.requested');
    expect(action.data).toMatchObject({
      action: 'interaction.requested',
      payload: {
        interaction_id: id,
        kind: 'confirmation',
        title: 'Approve tool call: delete',
        actions: [
          { id: 'approve', style: 'primary' },
          { id: 'reject', style: 'danger' },
        ],
      },
    });
    expect((action.data.payload as JsonObject).description).toContain('delete({"path":"/tmp/x"})');
    expect((action.data.payload as JsonObject).fallback_text).toContain('delete({"path":"/tmp/x"})');
    expect(executed).toEqual([]);
    // The unguarded call of the same batch ran; its result is in the saved turn.
    expect(h.resultsOf('tool.call.completed').map((r) => r.data.tool_name)).toEqual(['add']);
    const saved = h.state.get(KEY) as JsonObject;
    expect(saved).toMatchObject({ status: 'pending', calls: [{ id: 'c1' }] });
    expect((saved.turn as JsonObject[]).map((m) => m.role)).toEqual(['assistant', 'tool']);
    expect(h.resultsOf('message.completed')).toEqual([]);
  });

  it('approved: the answer run executes the call exactly once, shows the model the result, and continues', async () => {
    const { h, executed } = host();
    const id = await ask(h);
    h.results.length = 0;
    h.script('m1', { text: 'Deleted /tmp/x.' });
    await runAgent(h, context(answer('run-2', id, 'approve')));
    expect(executed).toEqual([{ path: '/tmp/x' }]);
    expect(terminal(h)).toEqual([{ type: 'run.completed', data: { finish_reason: 'stop' } }]);
    const last = h.modelRequests.at(-1)!.messages;
    // The assistant's calls, then every result: the one the first run had, then the approved one.
    expect(last.find((m) => m.role === 'assistant')?.tool_calls?.map((c) => c.id)).toEqual(['c1', 'c2']);
    const tools = last.filter((m) => m.role === 'tool');
    expect(tools.map((m) => m.tool_call_id)).toEqual(['c2', 'c1']);
    expect(tools[1].content).toContain('deleted /tmp/x');
    expect(h.resultsOf('tool.call.completed').map((r) => r.data.tool_name)).toEqual(['delete']);
    expect(last.some((m) => m.role === 'user' && m.content === 'approve')).toBe(false);
    expect(h.state.get(KEY)).toMatchObject({ status: 'taken', taken_by: 'run-2' });

    // The same answer again (a retry, a replay): nothing executes a second time; the model is told.
    h.script('m1', { text: 'Already done.' });
    await runAgent(h, context(answer('run-3', id, 'approve')));
    expect(executed).toHaveLength(1);
    const again = h.modelRequests.at(-1)!.messages.find((m) => m.tool_call_id === 'c1');
    expect(again?.content).toBe(`Error: ${REFUSED.alreadyHandled}`);
  });

  it('rejected: the model is told, nothing executes', async () => {
    const { h, executed } = host();
    const id = await ask(h);
    h.script('m1', { text: 'OK, I did not delete it.' });
    await runAgent(h, context(answer('run-2', id, 'reject')));
    expect(executed).toEqual([]);
    const msgs = h.modelRequests.at(-1)!.messages;
    expect(msgs.find((m) => m.role === 'assistant')?.tool_calls?.map((c) => c.id)).toEqual(['c1', 'c2']);
    expect(msgs.find((m) => m.tool_call_id === 'c1')?.content).toBe(`Error: ${REFUSED.rejected}`);
    expect(terminal(h).at(-1)).toMatchObject({ type: 'run.completed', data: { finish_reason: 'stop' } });
  });

  it('expired: the next message of the conversation shows the model the refusal before the new message', async () => {
    const { h, executed } = host();
    await ask(h);
    const saved = h.state.get(KEY) as JsonObject;
    h.state.set(KEY, { ...saved, expires_at: 1 }); // long past
    h.script('m1', { text: 'Anything else?' });
    await runAgent(h, context({ run_id: 'run-2', input: { text: 'never mind' } }));
    expect(executed).toEqual([]);
    const msgs = h.modelRequests.at(-1)!.messages;
    const i = msgs.findIndex((m) => m.tool_call_id === 'c1');
    expect(msgs[i].content).toBe(`Error: ${REFUSED.expired}`);
    expect(msgs.at(-1)).toMatchObject({ role: 'user' });
    expect(i).toBeLessThan(msgs.length - 1);
  });

  it('a run that cannot ask refuses the call to the model instead of executing it', async () => {
    const { h, executed } = host();
    h.interactions = false;
    h.script('m1', { tool_calls: [call('c1', 'delete', { path: '/tmp/x' })] }, { text: 'I may not.' });
    await runAgent(h, context());
    expect(executed).toEqual([]);
    expect(h.resultsOf('action.requested')).toEqual([]);
    expect(h.resultsOf('tool.call.completed')[0].data.error).toBe(REFUSED.cannotAsk);
    expect(terminal(h)).toEqual([{ type: 'run.completed', data: { finish_reason: 'stop' } }]);
  });

  it('marks tools by name or by source', () => {
    const grants = [
      { tool_name: 'a', source_id: 'files' },
      { tool_name: 'b', source_id: 'math' },
    ];
    const policy = approvalPolicy(parseAgentConfig({ 'approval-tools': ['b'], 'approval-sources': ['files'] }));
    expect(needsApproval(policy, 'a', grants)).toBe(true);
    expect(needsApproval(policy, 'b', grants)).toBe(true);
    expect(needsApproval(approvalPolicy(parseAgentConfig({})), 'a', grants)).toBe(false);
  });

  it('the request is a valid confirmation within the interaction limits', () => {
    const r = approvalRequest('tool-approval:r:c', [call('c', 'x', 'y'.repeat(5000))], null);
    expect((r.description as string).length).toBeLessThanOrEqual(10_000);
    expect(r.fallback_text).toContain('…');
  });
});
