import { RunAbortedError } from './errors';
import type { Json, JsonObject } from './json';
import { messageText, type Message, type MessageChunk, type StateScope, type Usage } from './types';

/*
 * The run-scoped host API (proto/runnerhost/v1/host_api.proto) in plain JSON. `HostApiMethods`
 * types every RPC; a HostApiTransport carries them (the gRPC client in grpc-transport.ts, or
 * the fake host in testing/). `RunHostApi` is what a run holds: its run_id, its AbortSignal and
 * its deadline are added to every call, and failures are typed HostApiErrors.
 */

export interface InvokeModelRequest {
  run_id: string;
  model_id: string;
  messages: Message[];
  tools?: JsonObject[];
  extra_args?: JsonObject;
  remove_think?: boolean;
  timeout_ms?: number;
}
export interface StreamModelItem {
  /** A MessageChunk; null on the final usage-only item. */
  chunk: MessageChunk | null;
  usage: Usage | null;
}
export interface HistoryPageRequest {
  run_id: string;
  conversation_id?: string;
  before_cursor?: string;
  after_cursor?: string;
  limit?: number;
  /** `backward` (default, newest first) or `forward`. */
  direction?: 'backward' | 'forward';
  include_attachments?: boolean;
}
export interface SteeringPullRequest {
  run_id: string;
  /** `all` (default) or `one`. */
  mode?: 'all' | 'one';
  limit?: number;
  /** Wait up to this long for an item when none is queued (0..30000, default 0). */
  wait_ms?: number;
}
export type StorageArea = 'plugin' | 'workspace' | 'binding';

/** A follow-up message steered into the running run (SteeringInputItem). */
export interface SteeringItem extends JsonObject {
  input: JsonObject;
}

/** Request and response of every unary host API RPC (responses: unset message fields are null). */
export interface HostApiMethods {
  InvokeModel: [InvokeModelRequest, { message: Message | null; usage: Usage | null }];
  CountTokens: [{ run_id: string; model_id: string; messages: Message[]; tools?: JsonObject[] }, { tokens: number }];
  Rerank: [
    { run_id: string; model_id: string; query: string; documents: string[]; top_k?: number; extra_args?: JsonObject },
    { results: { index: number; relevance_score: number }[] },
  ];
  GetToolDetail: [{ run_id: string; tool_name: string }, { tool: JsonObject | null }];
  CallTool: [{ run_id: string; tool_name: string; parameters: JsonObject }, { result: JsonObject | null }];
  RetrieveKnowledge: [
    { run_id: string; kb_id: string; query_text: string; top_k?: number; filters?: JsonObject },
    { results: JsonObject[] },
  ];
  HistoryPage: [
    HistoryPageRequest,
    { items: JsonObject[]; next_cursor?: string; prev_cursor?: string; has_more: boolean },
  ];
  HistorySearch: [
    { run_id: string; query: string; filters?: JsonObject; top_k?: number },
    { items: JsonObject[]; total_count: number; query: string },
  ];
  EventGet: [{ run_id: string; event_id: string }, { event: JsonObject | null }];
  EventPage: [
    {
      run_id: string;
      conversation_id?: string;
      event_types?: string[];
      before_cursor?: string;
      limit?: number;
    },
    { items: JsonObject[]; next_cursor?: string; has_more: boolean },
  ];
  StateGet: [{ run_id: string; scope: StateScope; key: string }, { value: Json }];
  StateSet: [{ run_id: string; scope: StateScope; key: string; value: Json }, { success: boolean }];
  StateDelete: [{ run_id: string; scope: StateScope; key: string }, { success: boolean }];
  StateList: [
    { run_id: string; scope: StateScope; prefix?: string; limit?: number },
    { keys: string[]; has_more: boolean },
  ];
  StorageGet: [{ run_id: string; area: StorageArea; key: string }, { value: Buffer }];
  StorageSet: [{ run_id: string; area: StorageArea; key: string; value: Buffer }, Record<string, never>];
  StorageDelete: [{ run_id: string; area: StorageArea; key: string }, { success: boolean }];
  StorageList: [
    { run_id: string; area: StorageArea; prefix?: string; limit?: number },
    { keys: string[]; has_more: boolean },
  ];
  PromptGet: [{ run_id: string }, { prompt: Message[] }];
  SteeringPull: [SteeringPullRequest, { items: SteeringItem[] }];
  RunGet: [
    { run_id: string },
    {
      run_id: string;
      status: string;
      status_reason?: string;
      cancel_requested: boolean;
      deadline_at?: number;
      started_at?: number;
    },
  ];
}
export type UnaryMethod = keyof HostApiMethods;
export type RequestOf<M extends UnaryMethod> = HostApiMethods[M][0];
export type ResponseOf<M extends UnaryMethod> = HostApiMethods[M][1];

export interface CallOptions {
  /** The call is abandoned (and rejects with the signal's reason) when it fires. */
  signal?: AbortSignal;
  deadline?: Date;
  /** W3C trace context sent as `traceparent` metadata (the run's, from its RunRequest). */
  traceparent?: string;
}

/** Carries host API calls; rejects with HostApiError (or the signal's reason when aborted). */
export interface HostApiTransport {
  unary<M extends UnaryMethod>(method: M, request: RequestOf<M>, options: CallOptions): Promise<ResponseOf<M>>;
  streamModel(request: InvokeModelRequest, options: CallOptions): AsyncIterable<StreamModelItem>;
}

export interface ModelOptions {
  tools?: JsonObject[];
  extraArgs?: JsonObject;
  removeThink?: boolean;
  timeoutMs?: number;
}

/** A streamed model answer: iterate the chunks; `usage` and `text` are known once it has ended. */
export class ModelStream implements AsyncIterable<MessageChunk> {
  usage: Usage | null = null;
  /** The text of every chunk so far. */
  text = '';

  constructor(private readonly items: AsyncIterable<StreamModelItem>) {}

  async *[Symbol.asyncIterator](): AsyncIterator<MessageChunk> {
    for await (const item of this.items) {
      if (item.usage) {
        this.usage = item.usage;
      }
      if (item.chunk) {
        this.text += messageText(item.chunk);
        yield item.chunk;
      }
    }
  }
}

function toMessages(messages: Message[] | string): Message[] {
  return typeof messages === 'string' ? [{ role: 'user', content: messages }] : messages;
}

/**
 * The host API of one run. Every call carries the run's id, ends at the run's deadline and is
 * abandoned when the run's signal fires. Refusals are typed: UnauthorizedError when the run was
 * not granted the model/tool/API, NotFoundError, RateLimitedError, ... (see errors.ts).
 */
export class RunHostApi {
  /** What every call of this run carries (one object for all of them). */
  private readonly options: CallOptions;

  constructor(
    private readonly transport: HostApiTransport,
    readonly runId: string,
    private readonly signal: AbortSignal,
    deadline?: Date,
    traceparent?: string,
  ) {
    this.options = { signal, deadline, traceparent };
  }

  /** Any unary RPC with this run's id (the typed helpers below cover them all). */
  call<M extends UnaryMethod>(method: M, request: Omit<RequestOf<M>, 'run_id'>): Promise<ResponseOf<M>> {
    if (this.signal.aborted) {
      return Promise.reject(this.abortReason());
    }
    const full = { ...request, run_id: this.runId } as RequestOf<M>;
    return this.transport.unary(method, full, this.options);
  }

  readonly models = {
    /** InvokeModel: one whole answer. `messages` may be a string (one user message). */
    invoke: async (modelId: string, messages: Message[] | string, opts: ModelOptions = {}) => {
      const r = await this.call('InvokeModel', {
        model_id: modelId,
        messages: toMessages(messages),
        ...modelArgs(opts),
      });
      return { message: r.message ?? { role: 'assistant' as const, content: '' }, usage: r.usage };
    },
    /** StreamModel: the answer chunk by chunk. */
    stream: (modelId: string, messages: Message[] | string, opts: ModelOptions = {}): ModelStream => {
      const request: InvokeModelRequest = {
        run_id: this.runId,
        model_id: modelId,
        messages: toMessages(messages),
        ...modelArgs(opts),
      };
      if (this.signal.aborted) {
        return new ModelStream(rejecting(this.abortReason()));
      }
      return new ModelStream(this.transport.streamModel(request, this.options));
    },
    countTokens: async (modelId: string, messages: Message[] | string, tools?: JsonObject[]) =>
      (await this.call('CountTokens', { model_id: modelId, messages: toMessages(messages), tools })).tokens,
    rerank: async (modelId: string, query: string, documents: string[], topK?: number) =>
      (await this.call('Rerank', { model_id: modelId, query, documents, top_k: topK })).results,
  };

  readonly tools = {
    detail: async (name: string) => (await this.call('GetToolDetail', { tool_name: name })).tool,
    call: async (name: string, parameters: JsonObject = {}) =>
      (await this.call('CallTool', { tool_name: name, parameters })).result ?? {},
  };

  readonly knowledge = {
    retrieve: async (kbId: string, query: string, opts: { topK?: number; filters?: JsonObject } = {}) =>
      (
        await this.call('RetrieveKnowledge', {
          kb_id: kbId,
          query_text: query,
          top_k: opts.topK,
          filters: opts.filters,
        })
      ).results,
  };

  readonly history = {
    page: (opts: Omit<HistoryPageRequest, 'run_id'> = {}) => this.call('HistoryPage', opts),
    search: (query: string, opts: { filters?: JsonObject; topK?: number } = {}) =>
      this.call('HistorySearch', { query, filters: opts.filters, top_k: opts.topK }),
  };

  readonly events = {
    get: async (eventId: string) => (await this.call('EventGet', { event_id: eventId })).event,
    page: (opts: Omit<RequestOf<'EventPage'>, 'run_id'> = {}) => this.call('EventPage', opts),
  };

  readonly state = {
    /** The value, or null when the key is absent. */
    get: async (scope: StateScope, key: string) => (await this.call('StateGet', { scope, key })).value ?? null,
    set: async (scope: StateScope, key: string, value: Json) => {
      await this.call('StateSet', { scope, key, value });
    },
    delete: async (scope: StateScope, key: string) => (await this.call('StateDelete', { scope, key })).success,
    list: (scope: StateScope, opts: { prefix?: string; limit?: number } = {}) =>
      this.call('StateList', { scope, ...opts }),
  };

  readonly storage = {
    /** The bytes, or null when the key is absent (the host answers not_found). */
    get: async (area: StorageArea, key: string): Promise<Buffer | null> => {
      try {
        return (await this.call('StorageGet', { area, key })).value;
      } catch (e) {
        if ((e as { code?: unknown }).code === 'not_found') {
          return null;
        }
        throw e;
      }
    },
    set: async (area: StorageArea, key: string, value: Buffer | string) => {
      await this.call('StorageSet', { area, key, value: typeof value === 'string' ? Buffer.from(value) : value });
    },
    delete: async (area: StorageArea, key: string) => (await this.call('StorageDelete', { area, key })).success,
    list: (area: StorageArea, opts: { prefix?: string; limit?: number } = {}) =>
      this.call('StorageList', { area, ...opts }),
  };

  readonly prompt = {
    get: async () => (await this.call('PromptGet', {})).prompt,
  };

  readonly steering = {
    /** The follow-ups steered into this run since the last pull (see RunIO.turns() for the loop). */
    pull: async (opts: Omit<SteeringPullRequest, 'run_id'> = {}) => (await this.call('SteeringPull', opts)).items,
  };

  readonly run = {
    get: () => this.call('RunGet', {}),
  };

  private abortReason(): Error {
    return abortReasonOf(this.signal);
  }
}

function modelArgs(opts: ModelOptions) {
  return {
    tools: opts.tools,
    extra_args: opts.extraArgs,
    remove_think: opts.removeThink,
    timeout_ms: opts.timeoutMs,
  };
}

/** What a call the signal abandoned rejects with: the signal's reason (a RunAbortedError for runs). */
export function abortReasonOf(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error
    ? reason
    : new RunAbortedError('stopped', typeof reason === 'string' ? reason : 'the run was aborted');
}

/** An iterable whose first next() rejects. */
function rejecting(reason: Error): AsyncIterable<StreamModelItem> {
  return { [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(reason) }) };
}
