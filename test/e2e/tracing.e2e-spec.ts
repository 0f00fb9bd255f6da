import * as path from 'node:path';
import { ScriptedOpenAIServer, scripts } from '@libs/testing';
import { Host, TestDatabase, completeLines, event, logged, startDemoRunner, waitFor, type Proc } from './harness';
import { OtlpReceiver, type ReceivedSpan } from './otlp-receiver';
import { conversationRuns, message } from './steering-support';

jest.setTimeout(180_000);

/*
 * Traces (OTEL_TRACES_EXPORTER=otlp) to a real OTLP/HTTP receiver in the test: each event's spans
 * arrive under the caller's trace id (W3C traceparent on POST /v1/events) — admission, the writer
 * commit, the run, its dispatch, the runner's host-API call (the demo runner sends the run's
 * traceparent back as gRPC metadata), the model call with GenAI attributes, the result batches
 * (one span per group of results committed together, never per delta), the local agent's turns
 * (model call and tool calls as children) — and the run's log lines carry the trace id. A steered
 * follow-up's admission links to the run it joined, and the run's SteeringPull links back to the
 * follow-up's trace. Without the variable nothing is exported. SQLite by default, PostgreSQL with
 * E2E_DATABASE=postgres.
 */

const DEMO = 'plugin:demo/echo/default';
const LOCAL = 'builtin:local-agent/default';
const MCP_STDIO_ARGS = [
  '-r',
  require.resolve('ts-node/register/transpile-only'),
  path.join(__dirname, 'fixtures', 'mcp-stdio-server.ts'),
];
const SECRET_TEXT = 'okapi-narwhal-clementine';

function traceparent(): { header: string; traceId: string; spanId: string } {
  const hex = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('');
  const traceId = hex(32);
  const spanId = hex(16);
  return { header: `00-${traceId}-${spanId}-01`, traceId, spanId };
}

/** No span attribute (nor link attribute) holds the run's text. */
function noText(spans: ReceivedSpan[], text: string): void {
  const values = spans.flatMap((s) => [
    ...Object.values(s.attributes),
    ...s.links.flatMap((l) => Object.values(l.attributes)),
  ]);
  expect(values.filter((v) => String(v).includes(text))).toEqual([]);
}

function byName(spans: ReceivedSpan[], name: string): ReceivedSpan {
  const s = spans.find((x) => x.name === name);
  if (!s) {
    throw new Error(`no span ${name} among ${spans.map((x) => x.name).join(', ')}`);
  }
  return s;
}

describe('OpenTelemetry traces', () => {
  const db = new TestDatabase();
  const receiver = new OtlpReceiver();
  let server: ScriptedOpenAIServer;
  let host: Host;
  let runner: Proc;

  beforeAll(async () => {
    await receiver.start();
    server = await ScriptedOpenAIServer.start();
    host = new Host(db, {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_SERVICE_NAME: 'runner-host-e2e',
      HOST_INSTANCE_ID: 'trace-host',
      SCRIPTED_KEY: 'sk-scripted-tracing-0123456789',
      SECRET_ENV_ALLOWLIST: 'SCRIPTED_KEY',
    });
    await host.start();
    ({ runner } = await startDemoRunner(host, { env: { DEMO_STEERING: '1' } }));
    const created = async (p: string, body: unknown) => {
      const r = await host.api('POST', p, body);
      expect({ p, status: r.status }).toEqual({ p, status: 201 });
    };
    await created('/v1/admin/agents', {
      agent_id: 'steer',
      runner_id: DEMO,
      runner_config: { mode: 'steer', steer_wait_ms: 100 },
    });
    await created('/v1/admin/agents', {
      agent_id: 'follow',
      runner_id: DEMO,
      runner_config: { mode: 'steer', chunk_delay_ms: 150, steer_wait_ms: 1500 },
    });
    await created('/v1/admin/agents', {
      agent_id: 'streamer',
      runner_id: DEMO,
      runner_config: { mode: 'echo', chunk_delay_ms: 0 },
    });
    const source = await host.api('POST', '/v1/admin/tools/sources', {
      source_id: 'local',
      kind: 'mcp_stdio',
      config: { command: process.execPath, args: MCP_STDIO_ARGS },
    });
    expect(source.body).toMatchObject({ status: 'connected' });
    await created('/v1/admin/models', {
      model_id: 'primary',
      kind: 'chat',
      provider: 'openai',
      base_url: server.baseUrl,
      api_key_env: 'SCRIPTED_KEY',
      model_name: 'scripted-primary',
      context_window: 128000,
      max_output_tokens: 4096,
      abilities: { tool_calling: true, vision: false, streaming: true },
      tokenizer: 'o200k_base',
    });
    await created('/v1/admin/agents', {
      agent_id: 'helper',
      runner_id: LOCAL,
      runner_config: { model: { primary: 'primary' } },
      resource_policy: { allowed_model_ids: ['primary'], allowed_tool_names: ['add'], allowed_kb_ids: [] },
    });
  });

  /** The spans of a trace received so far, once `ready` holds for them. */
  const exported = (traceId: string, ready: (s: ReceivedSpan[]) => boolean) => {
    const spans = receiver.ofTrace(traceId);
    return Promise.resolve(ready(spans) ? spans : null);
  };

  afterAll(async () => {
    await runner?.stop();
    await host?.stop();
    await server?.close();
    await receiver.close();
    await db.drop();
  });

  it("continues the caller's trace through admission, dispatch and the plugin's host-API call to the end", async () => {
    const tp = traceparent();
    const conv = `conv-trace-${Date.now()}`;
    const r = await host.api('POST', '/v1/events', message('steer', conv, 'hello traced world'), undefined, {
      traceparent: tp.header,
    });
    expect(r.status).toBe(202);
    const runId = r.body.run_id as string;
    expect((await conversationRuns(host, conv)).map((x) => x.status)).toEqual(['completed']);

    const spans = await waitFor('the run span exported', () =>
      exported(
        tp.traceId,
        (s) => s.some((x) => x.name === 'run') && s.some((x) => x.name === 'host_api steering.pull'),
      ),
    );
    const admission = byName(spans, 'admission');
    expect(admission.parentSpanId).toBe(tp.spanId); // the caller's span is the parent
    expect(admission.resource).toMatchObject({
      'service.name': 'runner-host-e2e',
      'service.instance.id': 'trace-host',
    });
    const commit = byName(spans, 'writer commit');
    expect(commit.parentSpanId).toBe(admission.spanId);
    const run = byName(spans, 'run');
    expect(run.parentSpanId).toBe(admission.spanId);
    expect(run.attributes).toMatchObject({ 'runnerhost.run_id': runId, 'runnerhost.runner_id': DEMO });
    expect(run.attributes['runnerhost.run.status']).toBe('completed');
    expect(run.events).toContain('first result');
    expect(byName(spans, 'dispatch').parentSpanId).toBe(run.spanId);
    // The demo runner sent RunRequest.traceparent back as metadata: its call joins the run's span.
    const pull = byName(spans, 'host_api steering.pull');
    expect(pull.parentSpanId).toBe(run.spanId);
    expect(pull.attributes).toMatchObject({
      'runnerhost.run_id': runId,
      'runnerhost.host_api.action': 'steering.pull',
    });
    expect(receiver.contentTypes).toEqual(new Set(['application/json']));

    // The run's log lines carry its trace id (its lines read: a log line and the answers the test saw
    // reach it separately; complete lines only, the last one may still be cut).
    await logged(() => host.proc.logs(), `"run_id":"${runId}"`);
    const lines = completeLines(host.proc.logs())
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.run_id === runId);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.every((l) => l.trace_id === tp.traceId)).toBe(true);
  });

  it('traces the local agent: one span per turn, its host-API, model (GenAI) and MCP tool calls as children', async () => {
    server.chat(scripts.toolCalls([{ id: 'call_add', name: 'add', arguments: '{"a":2,"b":3}' }]), scripts.reply('5'));
    const tp = traceparent();
    const r = await host.api('POST', '/v1/events', event('helper', `What is 2 + 3? ${SECRET_TEXT}`), undefined, {
      traceparent: tp.header,
    });
    expect(r.status).toBe(202);
    const runId = r.body.run_id as string;
    expect((await host.sse(runId)).at(-1)!.data.type).toBe('run.completed');
    const spans = await waitFor('the turns exported', () =>
      exported(
        tp.traceId,
        (s) =>
          s.some((x) => x.name === 'run') &&
          s.filter((x) => x.name === 'agent turn').length === 2 &&
          s.filter((x) => x.name === 'chat primary').length === 2 &&
          s.some((x) => x.name === 'execute_tool add'),
      ),
    );
    const run = byName(spans, 'run');
    expect(byName(spans, 'admission').parentSpanId).toBe(tp.spanId);
    expect(byName(spans, 'dispatch').parentSpanId).toBe(run.spanId);
    const turns = spans
      .filter((x) => x.name === 'agent turn')
      .sort(
        (a, b) =>
          Number(a.attributes['runnerhost.local_agent.turn']) - Number(b.attributes['runnerhost.local_agent.turn']),
      );
    expect(turns.map((t) => t.parentSpanId)).toEqual([run.spanId, run.spanId]);
    expect(turns.map((t) => t.attributes['runnerhost.local_agent.turn'])).toEqual([1, 2]);
    expect(turns.map((t) => t.attributes['runnerhost.local_agent.tool_calls'])).toEqual([1, 0]);
    for (const t of turns) {
      expect(t.attributes).toMatchObject({ 'runnerhost.run_id': runId, 'gen_ai.request.model': 'primary' });
      expect(t.attributes['gen_ai.usage.input_tokens']).toEqual(expect.any(Number));
      expect(t.attributes['gen_ai.usage.output_tokens']).toEqual(expect.any(Number));
    }
    // Each turn's model call: the host-API call is the turn's child; the GenAI span is the call's
    // child, or the turn's when the in-process adapter's stream is read after the call returned.
    const calls = spans.filter((x) => x.name === 'host_api model.stream');
    expect(calls.map((c) => c.parentSpanId).sort()).toEqual(turns.map((t) => t.spanId).sort());
    for (const chat of spans.filter((x) => x.name === 'chat primary')) {
      const call = calls.find((c) => c.spanId === chat.parentSpanId);
      const turn = turns.find((t) => t.spanId === (call ? call.parentSpanId : chat.parentSpanId));
      expect(turn).toBeDefined();
      expect(chat.attributes).toMatchObject({
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': 'primary',
        'gen_ai.provider.name': 'openai',
      });
      expect(chat.attributes['gen_ai.usage.input_tokens']).toEqual(expect.any(Number));
      expect(chat.attributes['gen_ai.usage.output_tokens']).toEqual(expect.any(Number));
    }
    // The MCP tool call belongs to the first turn (the one whose model asked for it).
    const toolCall = byName(spans, 'host_api tool.call');
    expect(toolCall.parentSpanId).toBe(turns[0].spanId);
    const tool = byName(spans, 'execute_tool add');
    expect([toolCall.spanId, turns[0].spanId]).toContain(tool.parentSpanId);
    expect(tool.attributes).toMatchObject({ 'gen_ai.tool.name': 'add', 'runnerhost.tool.source': 'mcp' });
    // The end: the run's status and its last result batch.
    expect(run.attributes['runnerhost.run.status']).toBe('completed');
    const last = spans.filter(
      (x) => x.name === 'result batch' && x.attributes['runnerhost.run.status'] === 'completed',
    );
    expect(last).toHaveLength(1);
    noText(spans, SECRET_TEXT);
  });

  it('spans each group of results committed together, never each delta', async () => {
    const tp = traceparent();
    const words = `${SECRET_TEXT} one two three four five six seven eight nine ten eleven twelve`;
    const r = await host.api('POST', '/v1/events', event('streamer', words), undefined, { traceparent: tp.header });
    expect(r.status).toBe(202);
    const runId = r.body.run_id as string;
    const events = await host.sse(runId);
    expect(events.at(-1)!.data.type).toBe('run.completed');
    const deltas = events.filter((e) => e.data.type === 'message.delta').length;
    expect(deltas).toBeGreaterThan(10);
    const spans = await waitFor('the result batches exported', () =>
      exported(
        tp.traceId,
        (s) =>
          s.some((x) => x.name === 'run') &&
          s.some((x) => x.name === 'result batch' && x.attributes['runnerhost.run.status'] === 'completed'),
      ),
    );
    const run = byName(spans, 'run');
    const batches = spans
      .filter((x) => x.name === 'result batch')
      .sort(
        (a, b) =>
          Number(a.attributes['runnerhost.results.first_sequence']) -
          Number(b.attributes['runnerhost.results.first_sequence']),
      );
    expect(batches.every((b) => b.parentSpanId === run.spanId && b.attributes['runnerhost.run_id'] === runId)).toBe(
      true,
    );
    // Every result the runner sent is in exactly one batch; the deltas of one frame share a span.
    const count = (k: string) => batches.reduce((n, b) => n + Number(b.attributes[k]), 0);
    expect(count('runnerhost.results.deltas')).toBe(deltas);
    expect(count('runnerhost.results.count')).toBe(events.length);
    expect(batches.length).toBeLessThan(deltas);
    expect(batches.some((b) => Number(b.attributes['runnerhost.results.deltas']) > 1)).toBe(true);
    // Only the last batch, the one holding the terminal result, names the run's status.
    expect(batches.map((b) => b.attributes['runnerhost.run.status'] ?? null)).toEqual([
      ...batches.slice(0, -1).map(() => null),
      'completed',
    ]);
    noText(spans, SECRET_TEXT);
  });

  it("links a steered follow-up to the run it joined, and the run's SteeringPull back to the follow-up", async () => {
    const conv = `conv-trace-steer-${Date.now()}`;
    const a = traceparent();
    const b = traceparent();
    const first = await host.api(
      'POST',
      '/v1/events',
      message('follow', conv, 'one two three four five six seven'),
      undefined,
      {
        traceparent: a.header,
      },
    );
    expect(first.body.disposition).toBe('started');
    const follow = await host.api(
      'POST',
      '/v1/events',
      message('follow', conv, `${SECRET_TEXT} follow-up`),
      undefined,
      {
        traceparent: b.header,
      },
    );
    expect(follow.body).toMatchObject({ disposition: 'steered', run_id: first.body.run_id });
    const runs = await conversationRuns(host, conv, 60_000);
    expect(runs.map((x) => x.status)).toEqual(['completed']);
    expect(runs[0].answers.some((t) => t.includes('follow-up'))).toBe(true);

    const runTrace = await waitFor('the run and its pulls exported', () =>
      exported(
        a.traceId,
        (s) =>
          s.some((x) => x.name === 'run') && s.some((x) => x.name === 'host_api steering.pull' && x.links.length > 0),
      ),
    );
    const run = byName(runTrace, 'run');
    expect(run.events).toContain('steered follow-up');
    const followTrace = await waitFor('the follow-up admission exported', () =>
      exported(b.traceId, (s) => s.some((x) => x.name === 'admission')),
    );
    // The follow-up's trace is the caller's; its admission links to the run's span.
    const admission = byName(followTrace, 'admission');
    expect(admission.parentSpanId).toBe(b.spanId);
    expect(admission.attributes['runnerhost.run_id']).toBe(first.body.run_id);
    expect(admission.links).toEqual([
      { traceId: a.traceId, spanId: run.spanId, attributes: { 'runnerhost.link': 'steered_into_run' } },
    ]);
    expect(followTrace.some((x) => x.name === 'run')).toBe(false); // no run of its own
    // The pull that handed the item out (in the run's trace) links to the follow-up's admission.
    const pulls = runTrace.filter((x) => x.name === 'host_api steering.pull' && x.links.length > 0);
    expect(pulls).toHaveLength(1);
    expect(pulls[0].links).toEqual([
      { traceId: b.traceId, spanId: admission.spanId, attributes: { 'runnerhost.link': 'steering_item' } },
    ]);
    noText([...runTrace, ...followTrace], SECRET_TEXT);
  });

  it('starts a new trace for an event without traceparent', async () => {
    const before = new Set(receiver.spans.map((s) => s.traceId));
    const conv = `conv-trace-new-${Date.now()}`;
    const r = await host.api('POST', '/v1/events', message('steer', conv, 'no parent'));
    expect(r.status).toBe(202);
    await conversationRuns(host, conv);
    const admission = await waitFor('a new admission span', () =>
      Promise.resolve(
        receiver.spans.find(
          (s) =>
            s.name === 'admission' &&
            !before.has(s.traceId) &&
            receiver.ofTrace(s.traceId).some((x) => x.name === 'run'),
        ),
      ),
    );
    expect(admission.parentSpanId).toBe('');
  });
});
