import { randomUUID } from 'node:crypto';
import { watchAbort } from '../abort';
import { hostApiError, RunAbortedError } from '../errors';
import type {
  CallOptions,
  HostApiTransport,
  InvokeModelRequest,
  RequestOf,
  ResponseOf,
  SteeringItem,
  StreamModelItem,
  UnaryMethod,
} from '../host-api';
import type { Json, JsonObject } from '../json';
import { Outbox } from '../results';
import { RunDispatcher, type Logger, type RunnerDefinition } from '../runner';
import {
  messageText,
  type AvailableApis,
  type Message,
  type RunContext,
  type RunResult,
  type StateScope,
  type Usage,
} from '../types';

/*
 * An in-memory host for runner authors' unit tests: the same dispatcher, emitters and host API
 * surface as a real connection, no network. Models, tools and knowledge bases are functions of
 * the test; state and storage are maps; follow-ups are steered with steer(); cancel() and
 * deadlines fire the run's signal exactly as the real host's cancel and deadline do. Calls to
 * what the run was not granted fail with UnauthorizedError, as on the host.
 */

export type FakeModel = (
  messages: Message[],
  request: InvokeModelRequest,
) =>
  | string
  | Message
  | { message: Message; usage?: Usage }
  | Promise<string | Message | { message: Message; usage?: Usage }>;
export type FakeTool = (parameters: JsonObject) => JsonObject | Promise<JsonObject>;
export type FakeKnowledgeBase = (query: string, topK: number | undefined) => JsonObject[] | Promise<JsonObject[]>;
export type FakeHandler<M extends UnaryMethod> = (request: RequestOf<M>) => ResponseOf<M> | Promise<ResponseOf<M>>;

export interface FakeHostOptions {
  runners: RunnerDefinition[];
  models?: Record<string, FakeModel>;
  tools?: Record<string, FakeTool>;
  knowledgeBases?: Record<string, FakeKnowledgeBase>;
  prompt?: Message[];
  /** Transcript items HistoryPage answers (oldest first). */
  history?: JsonObject[];
  /** Replaces the fake's answer of any RPC. */
  handlers?: { [M in UnaryMethod]?: FakeHandler<M> };
  log?: Logger;
  maxBatch?: number;
  /** Bytes per frame at most, as RunnerPlugin's option (see results.ts). */
  maxFrameBytes?: number;
}

export interface StartOptions {
  /** Runner name (default: the first runner). */
  runner?: string;
  text?: string;
  config?: JsonObject;
  /** Run deadline, ms from now. */
  deadlineMs?: number;
  /** The conversation id (default: one per run); steering needs one. */
  conversationId?: string | null;
  /** Overrides of the granted APIs (default: what the runner's manifest asks for). */
  availableApis?: Partial<AvailableApis>;
  /** Changes to the context the fake builds. */
  context?: (ctx: RunContext) => RunContext;
  /** The run's W3C trace context (RunRequest.traceparent); its host calls carry it. */
  traceparent?: string;
}

export interface FakeRunOutcome {
  status: 'completed' | 'failed';
  /** Every result of the run, in order. */
  results: RunResult[];
  /** run.failed's code and error. */
  code?: string;
  error?: string;
  /** The contents of the run's message.completed results, in order. */
  messages: string[];
  /** Every text streamed with message.delta, joined. */
  streamed: string;
}

export class FakeRun {
  readonly results: RunResult[] = [];
  readonly done: Promise<FakeRunOutcome>;
  private resolve!: (outcome: FakeRunOutcome) => void;
  readonly steering: SteeringItem[] = [];
  private steeringWaiters: (() => void)[] = [];

  constructor(readonly ctx: RunContext) {
    this.done = new Promise((resolve) => (this.resolve = resolve));
  }

  get runId(): string {
    return this.ctx.run_id;
  }

  /** True once a terminal result arrived. */
  get ended(): boolean {
    return this.results.some((r) => r.type === 'run.completed' || r.type === 'run.failed');
  }

  /** Resolves when a result of this type has arrived. */
  async waitFor(type: string): Promise<RunResult> {
    for (;;) {
      const found = this.results.find((r) => r.type === type);
      if (found) {
        return found;
      }
      if (this.ended) {
        throw new Error(`run ${this.runId} ended without a ${type} result`);
      }
      await new Promise((r) => setImmediate(r));
    }
  }

  /** @internal */
  add(result: RunResult): void {
    this.results.push(result);
    if (result.type === 'run.completed' || result.type === 'run.failed') {
      const data = result.data as { code?: string; error?: string };
      this.resolve({
        status: result.type === 'run.completed' ? 'completed' : 'failed',
        results: this.results,
        code: data.code,
        error: data.error,
        messages: this.results
          .filter((r) => r.type === 'message.completed')
          .map((r) => messageText(asJsonObject(r.data.message))),
        streamed: this.results
          .filter((r) => r.type === 'message.delta')
          .map((r) => messageText(asJsonObject(r.data.chunk)))
          .join(''),
      });
    }
  }

  /** @internal */
  queue(item: SteeringItem): void {
    this.steering.push(item);
    this.steeringWaiters.splice(0).forEach((wake) => wake());
  }

  /** @internal */
  async pull(mode: string | undefined, waitMs: number, signal: AbortSignal | undefined): Promise<SteeringItem[]> {
    if (this.steering.length === 0 && waitMs > 0) {
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          unwatch();
          resolve();
        };
        const timer = setTimeout(wake, waitMs);
        this.steeringWaiters.push(wake);
        // Watched only while the pull waits (a listener left on the run's signal per pull leaked).
        const unwatch = watchAbort(signal, wake);
      });
    }
    return this.steering.splice(0, mode === 'one' ? 1 : this.steering.length);
  }
}

/** A JSON value when it is an object (a message or chunk of a result's data), else null. */
function asJsonObject(value: Json | undefined): JsonObject | null {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? value : null;
}

/** One host-API call as the fake received it: its method names its request's type. */
export type FakeHostCall =
  | { [M in UnaryMethod]: { method: M; request: RequestOf<M>; traceparent?: string } }[UnaryMethod]
  | { method: 'StreamModel'; request: InvokeModelRequest; traceparent?: string };
type UnaryCall = Extract<FakeHostCall, { method: UnaryMethod }>;

/**
 * A call of method `M` as the union member of `M`: TypeScript does not relate a generic `M` to
 * the matching member of a mapped union (the request's type follows from `M` all the same).
 */
function unaryCall<M extends UnaryMethod>(method: M, request: RequestOf<M>, traceparent?: string): UnaryCall {
  const call: { method: UnaryMethod; request: RequestOf<UnaryMethod>; traceparent?: string } = {
    method,
    request,
    traceparent,
  };
  return call as UnaryCall;
}

const ALL_APIS: AvailableApis = {
  prompt_get: true,
  history_page: true,
  history_search: true,
  event_get: true,
  event_page: true,
  state: true,
  storage: true,
  steering_pull: true,
  run_get: true,
};

function words(text: string): string[] {
  return text.match(/\s*\S+\s*/g) ?? (text === '' ? [] : [text]);
}

function asAnswer(answer: Awaited<ReturnType<FakeModel>>): { message: Message; usage: Usage | null } {
  if (typeof answer === 'string') {
    return { message: { role: 'assistant', content: answer }, usage: null };
  }
  if ('message' in answer && typeof answer.message === 'object' && answer.message !== null) {
    const { message, usage } = answer as { message: Message; usage?: Usage };
    return { message, usage: usage ?? null };
  }
  return { message: answer as Message, usage: null };
}

export class FakeHost implements HostApiTransport {
  /** Every host API call, in order. */
  /** Every host call: its method, request and the `traceparent` it carried. */
  readonly calls: FakeHostCall[] = [];
  /** Every frame of results, as the real connection would send them (see results.ts). */
  readonly frames: RunResult[][] = [];
  /** The state store: scope -> key -> value. */
  readonly state: Record<StateScope, Map<string, Json>> = {
    conversation: new Map(),
    actor: new Map(),
    subject: new Map(),
    runner: new Map(),
  };
  readonly storage = new Map<string, Buffer>();
  private readonly runs = new Map<string, FakeRun>();
  private readonly dispatcher: RunDispatcher;

  constructor(private readonly options: FakeHostOptions) {
    const outbox = new Outbox(
      async (frame) => {
        this.frames.push(frame);
        for (const result of frame) {
          this.runs.get(result.run_id)?.add(result);
        }
        await Promise.resolve();
      },
      options.maxBatch,
      options.maxFrameBytes,
    );
    this.dispatcher = new RunDispatcher(options.runners, outbox, this, options.log ?? (() => undefined));
  }

  /** Starts a run; await `run.done` for its outcome. */
  start(opts: StartOptions = {}): FakeRun {
    const runner = opts.runner ? this.options.runners.find((r) => r.name === opts.runner) : this.options.runners[0];
    if (!runner) {
      throw new Error(`no runner named "${opts.runner}"`);
    }
    const conversationId = opts.conversationId === undefined ? `conv-${randomUUID()}` : opts.conversationId;
    const perms = runner.permissions ?? {};
    const apis: AvailableApis = {
      ...ALL_APIS,
      history_page: (perms.history ?? []).includes('page') && !!conversationId,
      history_search: (perms.history ?? []).includes('search') && !!conversationId,
      event_get: (perms.events ?? []).includes('get'),
      event_page: (perms.events ?? []).includes('page') && !!conversationId,
      storage: (perms.storage ?? []).length > 0,
      steering_pull: runner.capabilities?.steering === true && !!conversationId,
      ...opts.availableApis,
    };
    let ctx: RunContext = {
      run_id: randomUUID(),
      trigger: { type: 'message.received', source: 'api' },
      event: { event_id: randomUUID(), event_type: 'message.received', source: 'api', raw_ref: null, data: null },
      conversation: conversationId ? { conversation_id: conversationId } : null,
      actor: { actor_type: 'user', actor_id: 'u1', metadata: null },
      subject: null,
      input: { text: opts.text ?? '', contents: [], attachments: [], interaction: null },
      delivery: null,
      resources: {
        models: Object.keys(this.options.models ?? {}).map((model_id) => ({
          model_id,
          model_type: 'llm',
          provider: 'fake',
          operations: ['invoke', 'stream', 'count_tokens'],
        })),
        tools: Object.keys(this.options.tools ?? {}).map((tool_name) => ({
          tool_name,
          tool_type: 'fake',
          description: '',
          operations: ['detail', 'call'],
          parameters: null,
          source: 'fake',
          annotations: null,
          output_schema: null,
        })),
        knowledge_bases: Object.keys(this.options.knowledgeBases ?? {}).map((kb_id) => ({
          kb_id,
          kb_name: kb_id,
          kb_type: 'fake',
          operations: ['list', 'retrieve'],
        })),
        storage: { plugin_storage: apis.storage, workspace_storage: false, binding_storage: false },
        platform_capabilities: null,
      },
      context: {
        conversation_id: conversationId ?? undefined,
        has_history_before: (this.options.history ?? []).length > 0,
        inline_policy: null,
        available_apis: apis,
      },
      state: { conversation: {}, actor: {}, subject: {}, runner: {} },
      runtime: {
        host: 'fake-host',
        protocol_version: '1',
        trace_id: '',
        deadline_at: opts.deadlineMs === undefined ? undefined : (Date.now() + opts.deadlineMs) / 1000,
        metadata: null,
      },
      config: opts.config ?? {},
      metadata: {},
    };
    ctx = opts.context ? opts.context(ctx) : ctx;
    const run = new FakeRun(ctx);
    this.runs.set(ctx.run_id, run);
    void this.dispatcher.start({
      runner_id: `plugin:test/test/${runner.name}`,
      runner_name: runner.name,
      context: ctx,
      traceparent: opts.traceparent,
    });
    return run;
  }

  /** Starts a run and waits for its outcome. */
  run(opts: StartOptions = {}): Promise<FakeRunOutcome> {
    return this.start(opts).done;
  }

  /** Steers a follow-up message into a run (what the host does for a busy conversation). */
  steer(runId: string, text: string): void {
    const run = this.mustRun(runId);
    run.queue({
      claimed_run_id: runId,
      input: { text, contents: [], attachments: [] },
      event: { event_id: randomUUID(), event_type: 'message.received', source: 'api' },
      item_id: randomUUID(),
      position: run.steering.length + 1,
    });
  }

  /** The host's cancel. */
  cancel(runId: string, reason = 'cancelled by the test'): void {
    this.dispatcher.cancel(runId, reason);
  }

  /** The connection is lost: every active run's signal fires (kind `disconnected`) and nothing more is sent for it. */
  disconnect(): void {
    this.dispatcher.abortAll('disconnected');
  }

  // ---- HostApiTransport ---------------------------------------------------------------------

  async unary<M extends UnaryMethod>(method: M, request: RequestOf<M>, options: CallOptions): Promise<ResponseOf<M>> {
    if (options.signal?.aborted) {
      throw options.signal.reason ?? new RunAbortedError('stopped', 'aborted');
    }
    const call = unaryCall(method, request, options.traceparent);
    this.calls.push(call);
    const override = this.options.handlers?.[method];
    if (override) {
      return override(request);
    }
    const run = this.activeRun(method, request.run_id);
    const answer = (await this.answer(call, run, options.signal)) as ResponseOf<M>;
    if (options.signal?.aborted) {
      // As over gRPC: a call the run's signal abandoned rejects with the signal's reason.
      throw options.signal.reason;
    }
    return answer;
  }

  async *streamModel(request: InvokeModelRequest, options: CallOptions): AsyncIterable<StreamModelItem> {
    this.calls.push({
      method: 'StreamModel',
      request,
      traceparent: options.traceparent,
    });
    const run = this.activeRun('StreamModel', request.run_id);
    const { message, usage } = await this.invoke(run, 'stream', request);
    const text = typeof message.content === 'string' ? message.content : '';
    for (const [i, piece] of words(text).entries()) {
      if (options.signal?.aborted) {
        throw options.signal.reason;
      }
      yield { chunk: { role: 'assistant', content: piece, msg_sequence: i + 1 }, usage: null };
    }
    yield { chunk: null, usage };
  }

  // ---- the fake's answers -------------------------------------------------------------------

  private mustRun(runId: string): FakeRun {
    const run = this.runs.get(runId);
    if (!run) {
      throw new Error(`no run ${runId}`);
    }
    return run;
  }

  private activeRun(method: string, runId: string): FakeRun {
    const run = this.runs.get(runId);
    if (!run || run.ended) {
      throw hostApiError('not_found', `run session ${runId} not found or expired`, { method });
    }
    return run;
  }

  private requireApi(run: FakeRun, method: string, api: keyof AvailableApis): void {
    if (run.ctx.context?.available_apis?.[api] !== true) {
      throw hostApiError('unauthorized', `${api} access not authorized`, { method });
    }
  }

  private async invoke(run: FakeRun, op: string, request: { model_id: string; messages: Message[] }) {
    const granted = run.ctx.resources?.models.find((m) => m.model_id === request.model_id);
    const model = this.options.models?.[request.model_id];
    if (!granted || !granted.operations.includes(op) || !model) {
      throw hostApiError(
        'unauthorized',
        `model ${request.model_id} is not authorized for operation ${op} for this run`,
        {
          method: op === 'stream' ? 'StreamModel' : 'InvokeModel',
        },
      );
    }
    return asAnswer(await model(request.messages, request as InvokeModelRequest));
  }

  private async answer(call: UnaryCall, run: FakeRun, signal?: AbortSignal): Promise<unknown> {
    const { method } = call;
    switch (call.method) {
      case 'InvokeModel':
        return this.invoke(run, 'invoke', call.request);
      case 'CountTokens': {
        const text = JSON.stringify(call.request.messages);
        return { tokens: Math.ceil(text.length / 4) };
      }
      case 'Rerank':
        throw hostApiError('unauthorized', 'the fake host has no rerank models', { method });
      case 'GetToolDetail':
      case 'CallTool': {
        const name = call.request.tool_name;
        const tool = this.options.tools?.[name];
        if (!tool || !run.ctx.resources?.tools.some((t) => t.tool_name === name)) {
          throw hostApiError('unauthorized', `tool ${name} is not authorized for this run`, { method });
        }
        return method === 'CallTool'
          ? { result: await tool(call.request.parameters ?? {}) }
          : { tool: { name, description: '', parameters: {} } };
      }
      case 'RetrieveKnowledge': {
        const kb = this.options.knowledgeBases?.[call.request.kb_id];
        if (!kb) {
          throw hostApiError(
            'unauthorized',
            `knowledge base ${String(call.request.kb_id)} is not authorized for this run`,
            {
              method,
            },
          );
        }
        return { results: await kb(call.request.query_text, call.request.top_k) };
      }
      case 'HistoryPage':
        this.requireApi(run, method, 'history_page');
        return {
          items: [...(this.options.history ?? [])].reverse().slice(0, call.request.limit ?? 50),
          has_more: false,
        };
      case 'HistorySearch':
        this.requireApi(run, method, 'history_search');
        return { items: [], total_count: 0, query: call.request.query };
      case 'EventGet':
        this.requireApi(run, method, 'event_get');
        throw hostApiError('not_found', `event ${String(call.request.event_id)} not found`, { method });
      case 'EventPage':
        this.requireApi(run, method, 'event_page');
        return { items: [], has_more: false };
      case 'StateGet':
        this.requireApi(run, method, 'state');
        return { value: this.state[call.request.scope].get(call.request.key) ?? null };
      case 'StateSet':
        this.requireApi(run, method, 'state');
        this.state[call.request.scope].set(call.request.key, call.request.value);
        return { success: true };
      case 'StateDelete':
        this.requireApi(run, method, 'state');
        return { success: this.state[call.request.scope].delete(call.request.key) };
      case 'StateList':
        this.requireApi(run, method, 'state');
        return {
          keys: [...this.state[call.request.scope].keys()].filter((k) => k.startsWith(call.request.prefix ?? '')),
          has_more: false,
        };
      case 'StorageGet': {
        this.requireApi(run, method, 'storage');
        const value = this.storage.get(`${call.request.area}:${call.request.key}`);
        if (!value) {
          throw hostApiError('not_found', `storage key ${String(call.request.key)} not found`, { method });
        }
        return { value };
      }
      case 'StorageSet':
        this.requireApi(run, method, 'storage');
        this.storage.set(`${call.request.area}:${call.request.key}`, call.request.value);
        return {};
      case 'StorageDelete':
        this.requireApi(run, method, 'storage');
        return { success: this.storage.delete(`${call.request.area}:${call.request.key}`) };
      case 'StorageList':
        this.requireApi(run, method, 'storage');
        return {
          keys: [...this.storage.keys()]
            .filter((k) => k.startsWith(`${call.request.area}:${call.request.prefix ?? ''}`))
            .map((k) => k.slice(String(call.request.area).length + 1)),
          has_more: false,
        };
      case 'PromptGet':
        this.requireApi(run, method, 'prompt_get');
        return { prompt: this.options.prompt ?? [] };
      case 'SteeringPull':
        this.requireApi(run, method, 'steering_pull');
        return { items: await run.pull(call.request.mode, Math.min(30_000, call.request.wait_ms ?? 0), signal) };
      case 'RunGet':
        return { run_id: run.runId, status: run.ended ? 'completed' : 'running', cancel_requested: false };
    }
  }
}
