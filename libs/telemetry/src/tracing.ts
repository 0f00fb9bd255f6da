import { performance } from 'node:perf_hooks';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context,
  createContextKey,
  propagation,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

/*
 * OpenTelemetry traces (docs: docs/observability.md, "Traces"). Off unless OTEL_TRACES_EXPORTER names an
 * exporter (`otlp`, or `console` for a look); everything else is the SDK's standard environment:
 * OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT / _HEADERS, OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_*,
 * OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES. When off, every method here returns at once.
 *
 * One trace per event: the caller's W3C `traceparent` on POST /v1/events is continued; the run
 * gets a `run` span (admission to end) that the host-API calls of the run (whichever adapter
 * they came through), and the model and tool calls inside them, are children of.
 */

/** GenAI semantic conventions (incubating in @opentelemetry/semantic-conventions; names copied as advised). */
const GEN_AI = {
  operation: 'gen_ai.operation.name',
  provider: 'gen_ai.provider.name',
  system: 'gen_ai.system',
  requestModel: 'gen_ai.request.model',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
} as const;

export interface TracingOptions {
  instance: string;
  env?: NodeJS.ProcessEnv;
  /** Unit tests: export each span at once to this exporter instead of the environment's. */
  exporter?: SpanExporter;
}

/** True when the environment turns traces on (OTEL_TRACES_EXPORTER=otlp|console and the SDK not disabled). */
export function tracingRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  const exporter = (env.OTEL_TRACES_EXPORTER ?? '').trim().toLowerCase();
  return env.OTEL_SDK_DISABLED !== 'true' && (exporter === 'otlp' || exporter === 'console');
}

/** A runner's `traceparent` (gRPC metadata) for the host-API call being handled. */
const REMOTE_PARENT = createContextKey('runnerhost.remote_parent');
/** The run whose host-API call span is the active one. */
const HOST_API_RUN = createContextKey('runnerhost.host_api_run');
/** The run whose local-agent turn span is the active one. */
const TURN_RUN = createContextKey('runnerhost.turn_run');

/** How many ended runs keep their trace id for log lines. */
const ENDED_KEPT = 4096;

/** The results of one run accepted since its last commit: they become one `result batch` span. */
interface ResultBatch {
  startedMs: number;
  results: number;
  deltas: number;
  first: number;
  last: number;
}

/** What a local-agent turn tells its span when it ends (docs/observability.md#traces). */
export interface TurnNote {
  model?: string | null;
  inputTokens?: number | null;
  outputTokens?: number | null;
  toolCalls?: number;
}

/** Epoch milliseconds of a `performance.now()` reading (span start times taken before the span). */
function epochOf(monotonicMs: number): number {
  return performance.timeOrigin + monotonicMs;
}

export class Tracing {
  private tracer: Tracer | null = null;
  private provider: NodeTracerProvider | null = null;
  /** The `run` span of each run in flight here, by run id. */
  private readonly runs = new Map<string, Span>();
  /** Trace ids of recently ended runs: their last log lines still carry it. */
  private readonly ended = new Map<string, string>();
  /** The open result batch of each run (results accepted, not yet committed). */
  private readonly batches = new Map<string, ResultBatch>();

  get enabled(): boolean {
    return this.tracer !== null;
  }

  start(opts: TracingOptions): void {
    if (this.provider) {
      return;
    }
    const env = opts.env ?? process.env;
    const exporter: SpanExporter =
      opts.exporter ??
      ((env.OTEL_TRACES_EXPORTER ?? '').trim().toLowerCase() === 'console'
        ? new ConsoleSpanExporter()
        : new OTLPTraceExporter());
    const resource = defaultResource().merge(
      resourceFromAttributes({
        'service.name': env.OTEL_SERVICE_NAME ?? 'runner-host',
        'service.instance.id': opts.instance,
      }),
    );
    const processor = opts.exporter ? new SimpleSpanProcessor(opts.exporter) : new BatchSpanProcessor(exporter);
    this.provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
    // Global provider, AsyncLocalStorage context manager, W3C trace context + baggage propagators.
    this.provider.register();
    this.tracer = trace.getTracer('runner-host');
  }

  /** Sends what is buffered (shutdown). */
  async shutdown(): Promise<void> {
    await this.provider?.shutdown().catch(() => undefined);
  }

  /** The context a request's W3C headers (`traceparent`, `tracestate`) name; the root context without them. */
  extract(headers: Record<string, string | string[] | undefined>): Context {
    return this.tracer ? propagation.extract(ROOT_CONTEXT, headers) : ROOT_CONTEXT;
  }

  /** Runs `fn` in `ctx` (a no-op wrapper when tracing is off). */
  within<T>(ctx: Context, fn: () => T): T {
    return this.tracer ? context.with(ctx, fn) : fn();
  }

  /** Runs `fn` inside a span (ended when `fn` settles; an error marks it). */
  async inSpan<T>(name: string, attributes: Attributes, fn: () => Promise<T>, kind = SpanKind.INTERNAL): Promise<T> {
    const tracer = this.tracer;
    if (!tracer) {
      return fn();
    }
    return tracer.startActiveSpan(name, { kind, attributes }, async (span) => {
      try {
        return await fn();
      } catch (e) {
        failed(span, e);
        throw e;
      } finally {
        span.end();
      }
    });
  }

  /** The run's span, started under the current context (the admission's) when the run is recorded. */
  runStarted(runId: string, attributes: Attributes): void {
    if (this.tracer && !this.runs.has(runId)) {
      this.runs.set(runId, this.tracer.startSpan('run', { attributes: { 'runnerhost.run_id': runId, ...attributes } }));
    }
  }

  /** A step of a run (the dispatch) as a child span of the run's span. */
  runStep<T>(runId: string, name: string, fn: () => T): T {
    const run = this.runs.get(runId);
    if (!this.tracer || !run) {
      return fn();
    }
    const span = this.tracer.startSpan(
      name,
      { attributes: { 'runnerhost.run_id': runId } },
      trace.setSpan(ROOT_CONTEXT, run),
    );
    try {
      return context.with(trace.setSpan(ROOT_CONTEXT, span), fn);
    } catch (e) {
      failed(span, e);
      throw e;
    } finally {
      span.end();
    }
  }

  /** An event on the run's span (dispatched, first result, …). */
  runEvent(runId: string, name: string, attributes?: Attributes): void {
    this.runs.get(runId)?.addEvent(name, attributes);
  }

  runEnded(runId: string, status: string, errorCode: string | null): void {
    const span = this.runs.get(runId);
    if (span) {
      const batch = this.batches.get(runId);
      if (batch) {
        this.batches.delete(runId);
        this.endBatch(span, runId, batch, status);
      }
      this.runs.delete(runId);
      this.ended.set(runId, span.spanContext().traceId);
      if (this.ended.size > ENDED_KEPT) {
        this.ended.delete(this.ended.keys().next().value!);
      }
      span.setAttribute('runnerhost.run.status', status);
      if (status !== 'completed') {
        span.setStatus({ code: SpanStatusCode.ERROR, message: errorCode ?? status });
      }
      span.end();
    }
  }

  /** The W3C `traceparent` of the run's span, for the runner (run message), or null. */
  runTraceparent(runId: string): string | null {
    const span = this.runs.get(runId);
    if (!span) {
      return null;
    }
    const carrier: Record<string, string> = {};
    propagation.inject(trace.setSpan(ROOT_CONTEXT, span), carrier);
    return carrier.traceparent ?? null;
  }

  /** The run whose host-API call or local-agent turn is being handled (a log line without run_id), or null. */
  activeRunId(): string | null {
    if (!this.tracer) {
      return null;
    }
    const active = context.active();
    const runId = active.getValue(HOST_API_RUN) ?? active.getValue(TURN_RUN);
    return typeof runId === 'string' ? runId : null;
  }

  /** The trace id of a run's span (log lines), or null. */
  traceIdOf(runId: string): string | null {
    return this.runs.get(runId)?.spanContext().traceId ?? this.ended.get(runId) ?? null;
  }

  /** Runs `fn` (a host-API call an adapter received) with the caller's `traceparent`, if any. */
  withRemoteParent<T>(traceparent: string | undefined, fn: () => T): T {
    return this.tracer && traceparent ? context.with(context.active().setValue(REMOTE_PARENT, traceparent), fn) : fn();
  }

  /**
   * Runs a host-API call of a run inside a span: a child of the caller's `traceparent` when the
   * runner sent one (`withRemoteParent`), else of the run's span.
   */
  hostApiCall<T>(runId: string, action: string, fn: () => Promise<T>): Promise<T> {
    if (!this.tracer) {
      return fn();
    }
    const active = context.active();
    const traceparent = active.getValue(REMOTE_PARENT) as string | undefined;
    const run = this.runs.get(runId);
    const parent = traceparent
      ? propagation.extract(ROOT_CONTEXT, { traceparent })
      : active.getValue(TURN_RUN) === runId
        ? active // a call of the local agent's turn: a child of the turn
        : run
          ? trace.setSpan(ROOT_CONTEXT, run)
          : active;
    return context.with(parent.setValue(HOST_API_RUN, runId), () =>
      this.inSpan(
        `host_api ${action}`,
        { 'runnerhost.run_id': runId, 'runnerhost.host_api.action': action },
        fn,
        SpanKind.SERVER,
      ),
    );
  }

  /**
   * The parent of a model or tool call span: the host-API call of the run that is active (a call
   * answered inside its handler), else the local agent's turn that is active (a stream the
   * in-process adapter hands back and the agent reads after the call's span ended), else the
   * run's span.
   */
  private resourceParent(runId: string): Context {
    const active = context.active();
    if (active.getValue(HOST_API_RUN) === runId || active.getValue(TURN_RUN) === runId) {
      return active;
    }
    const run = this.runs.get(runId);
    return run ? trace.setSpan(ROOT_CONTEXT, run) : active;
  }

  /** A finished model call (GenAI conventions); see resourceParent. `startedMs`: performance.now(). */
  modelCall(
    runId: string,
    modelId: string,
    operation: string,
    startedMs: number,
    error: boolean,
    inputTokens: number | null,
    outputTokens: number | null,
  ): void {
    if (!this.tracer) {
      return;
    }
    const op = operation === 'rerank' ? 'rerank' : 'chat';
    const span = this.tracer.startSpan(
      `${op} ${modelId}`,
      {
        kind: SpanKind.CLIENT,
        startTime: epochOf(startedMs),
        attributes: {
          [GEN_AI.operation]: op,
          [GEN_AI.provider]: 'openai',
          [GEN_AI.system]: 'openai',
          [GEN_AI.requestModel]: modelId,
          'runnerhost.model.operation': operation,
          ...(inputTokens !== null ? { [GEN_AI.inputTokens]: inputTokens } : {}),
          ...(outputTokens !== null ? { [GEN_AI.outputTokens]: outputTokens } : {}),
        },
      },
      this.resourceParent(runId),
    );
    if (error) {
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }

  /** A finished tool call (GenAI `execute_tool`); see resourceParent. */
  toolCall(runId: string, toolName: string, source: string, startedMs: number, error: boolean): void {
    if (!this.tracer) {
      return;
    }
    const span = this.tracer.startSpan(
      `execute_tool ${toolName}`,
      {
        kind: SpanKind.CLIENT,
        startTime: epochOf(startedMs),
        attributes: {
          [GEN_AI.operation]: 'execute_tool',
          [GEN_AI.toolName]: toolName,
          'runnerhost.tool.source': source,
        },
      },
      this.resourceParent(runId),
    );
    if (error) {
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }

  /**
   * A result of the run was accepted (ingest): it joins the run's open batch, or opens one. A
   * batch is every result accepted before the writer committed the first of them (one gRPC
   * `ResultBatch` frame, or the deltas that arrived while a commit was under way); it becomes one
   * `result batch` span when the commit that holds its last result is done, never one per delta.
   */
  resultAccepted(runId: string, sequence: number, delta: boolean): void {
    if (!this.tracer || !this.runs.has(runId)) {
      return;
    }
    let batch = this.batches.get(runId);
    if (!batch) {
      batch = { startedMs: Date.now(), results: 0, deltas: 0, first: sequence, last: sequence };
      this.batches.set(runId, batch);
    }
    batch.results += 1;
    batch.deltas += delta ? 1 : 0;
    batch.last = sequence;
  }

  /** The writer committed the run's results up to `sequence`: the batch whose last result it is ends. */
  resultsCommitted(runId: string, sequence: number): void {
    const batch = this.batches.get(runId);
    const run = this.runs.get(runId);
    if (batch && run && sequence >= batch.last) {
      this.batches.delete(runId);
      this.endBatch(run, runId, batch, null);
    }
  }

  private endBatch(run: Span, runId: string, b: ResultBatch, status: string | null): void {
    this.tracer!.startSpan(
      'result batch',
      {
        startTime: b.startedMs,
        attributes: {
          'runnerhost.run_id': runId,
          'runnerhost.results.count': b.results,
          'runnerhost.results.deltas': b.deltas,
          'runnerhost.results.first_sequence': b.first,
          'runnerhost.results.last_sequence': b.last,
          ...(status !== null ? { 'runnerhost.run.status': status } : {}),
        },
      },
      trace.setSpan(ROOT_CONTEXT, run),
    ).end();
  }

  /**
   * One turn of the built-in local agent (a model round trip and the tool calls it asked for) as a
   * child of the run's span; the host-API, model and tool calls made inside `fn` are its
   * children. `fn` reports the turn's model, tokens and tool-call count through `note`.
   */
  agentTurn<T>(runId: string, turn: number, fn: (note: (n: TurnNote) => void) => Promise<T>): Promise<T> {
    const run = this.runs.get(runId);
    if (!this.tracer || !run) {
      return fn(() => undefined);
    }
    const span = this.tracer.startSpan(
      'agent turn',
      { attributes: { 'runnerhost.run_id': runId, 'runnerhost.local_agent.turn': turn } },
      trace.setSpan(ROOT_CONTEXT, run),
    );
    const note = (n: TurnNote) => {
      span.setAttributes({
        ...(n.model ? { [GEN_AI.requestModel]: n.model } : {}),
        ...(typeof n.inputTokens === 'number' ? { [GEN_AI.inputTokens]: n.inputTokens } : {}),
        ...(typeof n.outputTokens === 'number' ? { [GEN_AI.outputTokens]: n.outputTokens } : {}),
        ...(n.toolCalls !== undefined ? { 'runnerhost.local_agent.tool_calls': n.toolCalls } : {}),
      });
    };
    const ctx = trace.setSpan(ROOT_CONTEXT, span).setValue(TURN_RUN, runId);
    return context.with(ctx, async () => {
      try {
        return await fn(note);
      } catch (e) {
        failed(span, e);
        throw e;
      } finally {
        span.end();
      }
    });
  }

  /** The W3C `traceparent` of the active span (what a steering item carries), or null. */
  activeTraceparent(): string | null {
    if (!this.tracer || !trace.getSpan(context.active())) {
      return null;
    }
    const carrier: Record<string, string> = {};
    propagation.inject(context.active(), carrier);
    return carrier.traceparent ?? null;
  }

  /**
   * A follow-up was steered into a run: the active span (the follow-up's admission, in the
   * caller's trace) gets a link to the run's span, and the run's span an event naming the
   * follow-up's trace.
   */
  steeredInto(runId: string): void {
    const run = this.runs.get(runId);
    const active = this.tracer ? trace.getSpan(context.active()) : undefined;
    if (!run || !active) {
      return;
    }
    active.addLink({ context: run.spanContext(), attributes: { 'runnerhost.link': 'steered_into_run' } });
    active.setAttribute('runnerhost.run_id', runId);
    run.addEvent('steered follow-up', { 'runnerhost.follow_up.trace_id': active.spanContext().traceId });
  }

  /** Steering items handed out by the active call (SteeringPull): links to the follow-ups' traces. */
  linkSteeringItems(items: { traceparent?: unknown }[]): void {
    const active = this.tracer ? trace.getSpan(context.active()) : undefined;
    if (!active) {
      return;
    }
    const links: Link[] = [];
    for (const item of items) {
      if (typeof item.traceparent === 'string') {
        const ctx = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, { traceparent: item.traceparent }));
        if (ctx) {
          links.push({ context: ctx, attributes: { 'runnerhost.link': 'steering_item' } });
        }
      }
    }
    if (links.length > 0) {
      active.addLinks(links);
    }
  }

  /** A webhook attempt (its own trace: the worker runs apart from any request). */
  webhookAttempt(
    runId: string,
    op: string,
    attempt: number,
    startedMs: number,
    outcome: string,
    status: number | null,
  ): void {
    if (!this.tracer) {
      return;
    }
    const span = this.tracer.startSpan(
      'webhook attempt',
      {
        kind: SpanKind.CLIENT,
        startTime: epochOf(startedMs),
        attributes: {
          'runnerhost.run_id': runId,
          'runnerhost.delivery.op': op,
          'runnerhost.webhook.attempt': attempt,
          'runnerhost.webhook.outcome': outcome,
          ...(status !== null ? { 'http.response.status_code': status } : {}),
        },
      },
      ROOT_CONTEXT,
    );
    if (outcome !== 'delivered') {
      span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
    }
    span.end();
  }
}

function failed(span: Span, e: unknown): void {
  span.recordException(e instanceof Error ? e : String(e));
  span.setStatus({ code: SpanStatusCode.ERROR, message: e instanceof Error ? e.message : String(e) });
}
