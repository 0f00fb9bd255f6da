import { TokenBucket, buildSnapshot, type AuditRecord, type AuditService } from '@libs/authz';
import { DomainError } from '@libs/protocol';
import type { KnowledgeService, ModelsService, ToolsService } from '@libs/resources';
import type { RunGrant, RunGrants, SteeringService, WorkspaceQuotaGate } from '@libs/runs';
import type { ContextApiService } from '../context-api.service';
import { HostActions } from '../host-actions';
import { HostApiGate } from '../host-api.gate';
import type { StorageApiService } from '../storage-api.service';
import { InProcessHostPort } from './in-process-host-port';
import { fromStreamItem } from './stream-items';

const RUN = 'run-1';
const RUNNER = 'builtin:local-agent/default';

/** The real action table and gate over fake services: what the in-process adapter adds is under test. */
function setup() {
  const snapshot = buildSnapshot({
    run_id: RUN,
    scope: {
      agent_id: 'a',
      runner_id: RUNNER,
      plugin_id: 'builtin',
      conversation_id: 'c1',
      thread_id: null,
      bot_id: null,
      workspace_id: null,
      actor_type: 'user',
      actor_id: 'u1',
      subject_type: null,
      subject_id: null,
    },
    manifest: { capabilities: { tool_calling: true }, permissions: { tools: ['detail', 'call'], models: ['stream'] } },
    policy: { resource: { allowed_tool_names: ['add'], allowed_model_ids: ['m'] }, state: {} },
    catalog: {
      models: [{ model_id: 'm', model_type: 'llm', provider: 'openai', context_window: 1000 }],
      tools: [
        { tool_name: 'add', description: 'adds', parameters: { type: 'object' }, source: 'mcp', source_id: 's' },
        { tool_name: 'echo', description: 'echoes', parameters: { type: 'object' }, source: 'mcp', source_id: 's' },
      ],
      knowledge_bases: [],
    },
    limits: {
      max_payload_bytes: 1000,
      max_state_value_bytes: 100,
      max_storage_value_bytes: 100,
      calls_per_second: 100,
      burst: 100,
    },
    deadline_at_ms: null,
  });
  const run: RunGrant = {
    run_id: RUN,
    plugin_id: 'builtin',
    runner_id: snapshot.scope.runner_id,
    workspace_id: null,
    snapshot,
    signal: new AbortController().signal,
    budget: new TokenBucket(snapshot.limits.calls_per_second, snapshot.limits.burst),
    started_at: Date.now(),
    active: true,
    cancel_requested: false,
  };
  const grants: RunGrants = {
    grant: (id) => (id === RUN ? run : undefined),
    find: (id) => Promise.resolve(id === RUN ? run : undefined),
  };
  const audit: AuditRecord[] = [];
  const gate = new HostApiGate(grants, {
    record: (r: AuditRecord) => Promise.resolve(void audit.push(r)),
  } as unknown as AuditService);
  const tools = {
    detail: jest.fn((_call: unknown, tool: { tool_name: string }): Promise<Record<string, unknown>> =>
      Promise.resolve({ name: tool.tool_name, description: 'adds', parameters: { type: 'object' } }),
    ),
    call: jest.fn((_call: unknown, tool: { tool_name: string }, p: { a: number; b: number }) =>
      Promise.resolve({ tool: tool.tool_name, sum: p.a + p.b }),
    ),
  };
  const models = {
    stream: jest.fn(async function* () {
      yield await Promise.resolve({ chunk: { role: 'assistant', content: 'Hel', is_final: false } });
      yield { chunk: { role: 'assistant', content: 'lo', is_final: false } };
      yield {
        chunk: {
          role: 'assistant',
          content: '',
          all_content: 'Hello',
          is_final: true,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'add', arguments: '{}' } }],
          provider_specific_fields: { finish_reason: 'tool_calls' },
        },
      };
      yield { usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } };
    }),
  };
  const actions = new HostActions(
    gate,
    {} as ContextApiService,
    {} as StorageApiService,
    models as unknown as ModelsService,
    tools as unknown as ToolsService,
    {} as KnowledgeService,
    {} as SteeringService,
    // A workspace without quotas: every call may go.
    { modelCall: () => Promise.resolve() } as unknown as WorkspaceQuotaGate,
  );
  const emitted: unknown[] = [];
  const port = (pluginId = 'builtin') =>
    new InProcessHostPort(actions, RUN, pluginId, new AbortController().signal, (r) => emitted.push(r));
  return { port, audit, tools, emitted };
}

describe('InProcessHostPort: the local agent calls the host API through the same gate as a plugin', () => {
  it('serves a granted tool call and audits it with the run, runner and built-in identity', async () => {
    const { port, audit } = setup();
    await expect(port().callTool('add', { a: 2, b: 3 })).resolves.toEqual({ tool: 'add', sum: 5 });
    expect(audit).toEqual([
      expect.objectContaining({
        run_id: RUN,
        runner_id: RUNNER,
        plugin_id: 'builtin',
        action: 'tool.call',
        resource: 'tool:add',
        outcome: 'allowed',
        error_code: null,
      }),
    ]);
  });

  it('refuses an ungranted tool at the gate with a protocol error, audited denied, the service untouched', async () => {
    const { port, audit, tools } = setup();
    const e = await port()
      .callTool('echo', {})
      .catch((err: unknown) => err);
    expect(e).toBeInstanceOf(DomainError);
    expect(e).toMatchObject({ code: 'unauthorized' });
    expect(tools.call).not.toHaveBeenCalled();
    expect(audit).toEqual([
      expect.objectContaining({ resource: 'tool:echo', outcome: 'denied', error_code: 'unauthorized' }),
    ]);
  });

  it("is refused on another runner's run: the identity is checked like a plugin's", async () => {
    const { port, audit } = setup();
    await expect(port('acme/bot').callTool('add', { a: 1, b: 1 })).rejects.toMatchObject({ code: 'unauthorized' });
    expect(audit[0]).toMatchObject({ plugin_id: 'acme/bot', outcome: 'denied' });
  });

  it('applies the payload limit to the request as JSON', async () => {
    const { port, audit } = setup();
    await expect(port().callTool('add', { a: 1, b: 1, pad: 'x'.repeat(2000) })).rejects.toMatchObject({
      code: 'payload_too_large',
    });
    expect(audit[0]).toMatchObject({ outcome: 'denied', error_code: 'payload_too_large' });
  });

  it('parses the request once after the gate: a bad one is invalid_argument naming the field, audited failed', async () => {
    const { port, audit, tools } = setup();
    // A caller past the type system (the port is typed): parameters that are not an object.
    const e = await port()
      .callTool('add', [1, 2] as never)
      .catch((err: unknown) => err);
    expect(e).toBeInstanceOf(DomainError);
    expect(e).toMatchObject({
      code: 'invalid_argument',
      message: 'parameters: must be an object',
      details: { field: 'parameters' },
    });
    expect(tools.call).not.toHaveBeenCalled();
    expect(audit).toEqual([
      expect.objectContaining({ action: 'tool.call', outcome: 'failed', error_code: 'invalid_argument' }),
    ]);
  });

  it("reads the host's answer through the agent's schema; one that does not fit is a runtime_error", async () => {
    const { port, tools } = setup();
    await expect(port().getToolDetail('add')).resolves.toEqual({
      name: 'add',
      description: 'adds',
      parameters: { type: 'object' },
    });
    tools.detail.mockResolvedValueOnce({ name: 7 });
    await expect(port().getToolDetail('add')).rejects.toMatchObject({
      code: 'runtime_error',
      message: expect.stringMatching(/^host answer tool\.name: /),
    });
  });

  it('steering.pull without the run granting it is refused like any ungranted API', async () => {
    const { port } = setup();
    await expect(port().steeringPull({ mode: 'all' })).rejects.toMatchObject({ code: 'unauthorized' });
  });

  it('streams model chunks as text deltas, the final chunk with tool calls and finish reason, then usage', async () => {
    const { port } = setup();
    const items = [];
    for await (const item of port().streamModel({
      model_id: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [],
    })) {
      items.push(item);
    }
    expect(items).toEqual([
      { delta: 'Hel', reasoning_delta: null },
      { delta: 'lo', reasoning_delta: null },
      {
        delta: null,
        reasoning_delta: null,
        is_final: true,
        finish_reason: 'tool_calls',
        tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'add', arguments: '{}' } }],
      },
      { usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } },
    ]);
  });

  it('hands emitted results to the sink in order', () => {
    const { port, emitted } = setup();
    const p = port();
    p.emit({ type: 'message.completed', data: { message: { role: 'assistant', content: 'hi' } } });
    p.emit({ type: 'run.completed', data: { finish_reason: 'stop' } });
    expect(emitted.map((r) => (r as { type: string }).type)).toEqual(['message.completed', 'run.completed']);
  });
});

describe('fromStreamItem', () => {
  it('reads an empty usage object as unknown usage, never zero', () => {
    expect(fromStreamItem({ usage: {} })).toEqual({ usage: null });
  });

  it('keeps reasoning text and provider fields other than the finish reason', () => {
    expect(
      fromStreamItem({
        chunk: {
          content: '',
          reasoning_content: 'thinking',
          is_final: true,
          provider_specific_fields: { finish_reason: 'stop', refusal: 'no' },
        },
      }),
    ).toEqual({
      delta: null,
      reasoning_delta: 'thinking',
      is_final: true,
      finish_reason: 'stop',
      provider_specific_fields: { refusal: 'no' },
    });
  });
});
