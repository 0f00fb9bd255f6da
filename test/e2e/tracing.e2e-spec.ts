import { ScriptedOpenAIServer, scripts } from '@libs/testing';
import { Host, TestDatabase, event, startDemoRunner, waitFor, type Proc } from './harness';
import { OtlpReceiver, type ReceivedSpan } from './otlp-receiver';
import { conversationRuns, message } from './steering-support';

jest.setTimeout(180_000);

/*
 * Traces (OTEL_TRACES_EXPORTER=otlp) to a real OTLP/HTTP receiver in the test: each event's spans
 * arrive under the caller's trace id (W3C traceparent on POST /v1/events) — admission, the writer
 * commit, the run, its dispatch, the runner's host-API call (the demo runner sends the run's
 * traceparent back as gRPC metadata), the model call with GenAI attributes — and the run's log
 * lines carry the trace id. Without the variable nothing is exported.
 */

const DEMO = 'plugin:demo/echo/default';
const LOCAL = 'builtin:local-agent/default';

function traceparent(): { header: string; traceId: string; spanId: string } {
  const hex = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('');
  const traceId = hex(32);
  const spanId = hex(16);
  return { header: `00-${traceId}-${spanId}-01`, traceId, spanId };
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
      resource_policy: { allowed_model_ids: ['primary'], allowed_tool_names: [], allowed_kb_ids: [] },
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

    // The run's log lines carry its trace id.
    const lines = host.proc
      .logs()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.run_id === runId);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.every((l) => l.trace_id === tp.traceId)).toBe(true);
  });

  it('traces the local agent: its host-API model call and the model call with GenAI attributes', async () => {
    server.chat(scripts.reply('Hello from the model.'));
    const tp = traceparent();
    const r = await host.api('POST', '/v1/events', event('helper', 'Say hello'), undefined, { traceparent: tp.header });
    expect(r.status).toBe(202);
    expect((await host.sse(r.body.run_id)).at(-1)!.data.type).toBe('run.completed');
    const spans = await waitFor('the model span exported', () =>
      exported(tp.traceId, (s) => s.some((x) => x.name === 'run') && s.some((x) => x.name === 'chat primary')),
    );
    const run = byName(spans, 'run');
    const call = byName(spans, 'host_api model.stream');
    expect(call.parentSpanId).toBe(run.spanId);
    const chat = byName(spans, 'chat primary');
    // The in-process adapter hands the stream back and the agent reads it after the call's span
    // ended: the model span is then the run's child (over gRPC, inside the call's span).
    expect([call.spanId, run.spanId]).toContain(chat.parentSpanId);
    expect(chat.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'primary',
      'gen_ai.provider.name': 'openai',
    });
    expect(chat.attributes['gen_ai.usage.input_tokens']).toEqual(expect.any(Number));
    expect(chat.attributes['gen_ai.usage.output_tokens']).toEqual(expect.any(Number));
    expect(byName(spans, 'admission').parentSpanId).toBe(tp.spanId);
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
