import { DomainError, type ErrorCode } from '@libs/protocol';
import { estimateMessagesTokens } from '../context/tokens';
import type {
  AgentResult,
  AgentRunContext,
  ChatMessage,
  HistoryPage,
  HistoryPageRequest,
  JsonObject,
  KnowledgeEntry,
  LocalAgentHostPort,
  ModelCallRequest,
  ModelInvokeResult,
  ModelStreamItem,
  PortLimits,
  RerankItem,
  RerankRequest,
  RunStatusView,
  StateScope,
  SteeringItem,
  SteeringPullRequest,
  ToolCall,
  ToolDetail,
  Usage,
} from '../host-port';

/*
 * An in-memory fake of the host port for the local agent's unit tests: scripted model turns per
 * model id, tools as functions, a grant check like the host's gate (unauthorized), and a record
 * of every call and result. Not a host: the real adapter is tested end to end in test/e2e.
 */

export interface ScriptedTurn {
  text?: string;
  tool_calls?: ToolCall[];
  usage?: Usage;
  /** Stream items as sent (overrides text/tool_calls in streaming). */
  stream?: ModelStreamItem[];
  /** Thrown before anything is produced. */
  error?: Error;
  /** Thrown after `stream` items were produced. */
  errorAfter?: Error;
  /** Never answers (until the run stops). */
  hang?: boolean;
}

export const call = (id: string, name: string, args: JsonObject | string = {}): ToolCall => ({
  id,
  type: 'function',
  function: { name, arguments: typeof args === 'string' ? args : JSON.stringify(args) },
});

export const hostError = (code: ErrorCode, message: string = code, details: JsonObject = {}) =>
  new DomainError(code, message, details);

type ToolImpl = (params: JsonObject) => unknown;

export class FakeHost implements LocalAgentHostPort {
  readonly abort = new AbortController();
  readonly signal = this.abort.signal;
  skill_roots?: string[];
  limits?: PortLimits;
  interactions?: boolean;
  readonly results: AgentResult[] = [];
  readonly calls: { op: string; args: unknown }[] = [];
  readonly modelRequests: (ModelCallRequest & { op: 'invoke' | 'stream' })[] = [];
  readonly turns = new Map<string, ScriptedTurn[]>();
  readonly tools = new Map<string, ToolImpl>();
  readonly details = new Map<string, ToolDetail | Error>();
  grantedTools = new Set<string>();
  knowledge = new Map<string, KnowledgeEntry[] | Error>();
  rerankAnswer: RerankItem[] | Error = [];
  history: HistoryPage[] = [];
  prompt: ChatMessage[] | Error = [];
  state = new Map<string, unknown>();
  steering: SteeringItem[][] = [];
  steeringError: Error | null = null;
  run: RunStatusView = { status: 'running', cancel_requested: false };
  counter: ((messages: ChatMessage[]) => number | Promise<number>) | null = estimateMessagesTokens;
  summaryText = 'summary body';
  onEmit?: (r: AgentResult) => void;

  script(modelId: string, ...turns: ScriptedTurn[]): this {
    this.turns.set(modelId, [...(this.turns.get(modelId) ?? []), ...turns]);
    return this;
  }

  tool(name: string, impl: ToolImpl, granted = true): this {
    this.tools.set(name, impl);
    if (granted) {
      this.grantedTools.add(name);
    }
    return this;
  }

  /** Records the call; resolves a tick later, as a host call would. */
  private async record(op: string, args: unknown): Promise<void> {
    this.calls.push({ op, args });
    await Promise.resolve();
  }

  callsOf(op: string): unknown[] {
    return this.calls.filter((c) => c.op === op).map((c) => c.args);
  }

  typesOf(): string[] {
    return this.results.map((r) => r.type);
  }

  resultsOf<T extends AgentResult['type']>(type: T): Extract<AgentResult, { type: T }>[] {
    return this.results.filter((r): r is Extract<AgentResult, { type: T }> => r.type === type);
  }

  private next(modelId: string): ScriptedTurn {
    const queue = this.turns.get(modelId);
    if (!queue || queue.length === 0) {
      throw new Error(`fake host: no scripted turn left for model ${modelId}`);
    }
    return queue.shift()!;
  }

  private hang(): Promise<never> {
    return new Promise((_, reject) =>
      this.signal.addEventListener('abort', () => reject(hostError('deadline_exceeded', 'run ended')), { once: true }),
    );
  }

  async invokeModel(req: ModelCallRequest): Promise<ModelInvokeResult> {
    await this.record('model.invoke', req);
    const first = req.messages[0]?.content;
    if (req.tools.length === 0 && typeof first === 'string' && first.includes('context summarization')) {
      return { message: { role: 'assistant', content: this.summaryText } };
    }
    this.modelRequests.push({ ...structuredClone(req), op: 'invoke' });
    const turn = this.next(req.model_id);
    if (turn.hang) {
      return this.hang();
    }
    if (turn.error) {
      throw turn.error;
    }
    const message: ChatMessage = { role: 'assistant', content: turn.text ?? '' };
    if (turn.tool_calls) {
      message.tool_calls = turn.tool_calls;
    }
    return { message, usage: turn.usage ?? null };
  }

  streamModel(req: ModelCallRequest): AsyncIterable<ModelStreamItem> {
    void this.record('model.stream', req);
    this.modelRequests.push({ ...structuredClone(req), op: 'stream' });
    const turn = this.next(req.model_id);
    const items: ModelStreamItem[] = turn.stream ?? [
      ...(turn.text ? [{ delta: turn.text }] : []),
      { is_final: true, finish_reason: turn.tool_calls ? 'tool_calls' : 'stop', tool_calls: turn.tool_calls ?? null },
      ...(turn.usage ? [{ usage: turn.usage }] : []),
    ];
    const hang = () => this.hang();
    return (async function* () {
      await Promise.resolve();
      if (turn.error) {
        throw turn.error;
      }
      for (const item of items) {
        yield item;
      }
      if (turn.errorAfter) {
        throw turn.errorAfter;
      }
      if (turn.hang) {
        await hang();
      }
    })();
  }

  async countTokens(req: { model_id: string; messages: ChatMessage[]; tools?: unknown[] }): Promise<number> {
    await this.record('model.count_tokens', req);
    if (!this.counter) {
      throw hostError('unavailable', 'model has no tokenizer', { reason: 'no_tokenizer' });
    }
    return this.counter(req.messages);
  }

  async rerank(req: RerankRequest): Promise<RerankItem[]> {
    await this.record('model.rerank', req);
    if (this.rerankAnswer instanceof Error) {
      throw this.rerankAnswer;
    }
    return this.rerankAnswer;
  }

  async getToolDetail(name: string): Promise<ToolDetail> {
    await this.record('tool.detail', name);
    const d = this.details.get(name) ?? { name, description: `${name} tool`, parameters: { type: 'object' } };
    if (d instanceof Error) {
      throw d;
    }
    return d;
  }

  async callTool(name: string, parameters: JsonObject): Promise<unknown> {
    await this.record('tool.call', { name, parameters });
    if (!this.grantedTools.has(name)) {
      throw hostError('unauthorized', `tool ${name} is not granted to this run`);
    }
    const impl = this.tools.get(name);
    if (!impl) {
      throw hostError('not_found', `tool ${name} not found`);
    }
    return impl(parameters);
  }

  async retrieveKnowledge(req: { kb_id: string; query_text: string; top_k?: number }): Promise<KnowledgeEntry[]> {
    await this.record('knowledge.retrieve', req);
    const r = this.knowledge.get(req.kb_id) ?? [];
    if (r instanceof Error) {
      throw r;
    }
    return r;
  }

  async historyPage(req: HistoryPageRequest): Promise<HistoryPage> {
    await this.record('history.page', req);
    return this.history.shift() ?? { items: [], has_more: false };
  }

  async promptGet(): Promise<ChatMessage[]> {
    await this.record('prompt.get', null);
    if (this.prompt instanceof Error) {
      throw this.prompt;
    }
    return structuredClone(this.prompt);
  }

  async stateGet(scope: StateScope, key: string): Promise<unknown> {
    await this.record('state.get', { scope, key });
    return structuredClone(this.state.get(`${scope}/${key}`));
  }

  async stateSet(scope: StateScope, key: string, value: unknown): Promise<void> {
    await this.record('state.set', { scope, key, value });
    this.state.set(`${scope}/${key}`, structuredClone(value));
  }

  async steeringPull(req: SteeringPullRequest): Promise<SteeringItem[]> {
    await this.record('steering.pull', req);
    if (this.steeringError) {
      throw this.steeringError;
    }
    return this.steering.shift() ?? [];
  }

  async runGet(): Promise<RunStatusView> {
    await this.record('run.get', null);
    return this.run;
  }

  emit(result: AgentResult): void {
    this.results.push(structuredClone(result));
    this.onEmit?.(result);
  }
}

/** A run context with two chat models granted (m1 primary, m2 fallback), no tools, no streaming. */
export function fakeContext(over: Partial<AgentRunContext> = {}, config: JsonObject = {}): AgentRunContext {
  return {
    run_id: 'run-1',
    event: { event_id: 'ev-1', event_type: 'message.received' },
    conversation: { conversation_id: 'conv-1' },
    input: { text: 'hello' },
    delivery: { supports_streaming: false },
    resources: {
      models: [
        { model_id: 'm1', operations: ['invoke', 'stream', 'count_tokens'] },
        { model_id: 'm2', operations: ['invoke', 'stream', 'count_tokens'] },
      ],
      tools: [],
      knowledge_bases: [],
    },
    context: { conversation_id: 'conv-1', available_apis: {} },
    runtime: { metadata: {} },
    config: { model: { primary: 'm1', fallbacks: ['m2'] }, 'date-grounding': false, ...config },
    ...over,
  };
}

/** The same context with some available_apis switched on. */
export function withApis(ctx: AgentRunContext, apis: JsonObject): AgentRunContext {
  return { ...ctx, context: { ...ctx.context, available_apis: { ...(ctx.context?.available_apis ?? {}), ...apis } } };
}

export const streaming = (ctx: AgentRunContext): AgentRunContext => ({
  ...ctx,
  delivery: { supports_streaming: true },
});
