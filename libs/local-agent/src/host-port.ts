/*
 * The port the local agent needs from the host: everything it may reach while one run is active.
 *
 * Plain TypeScript over JSON values (no proto, no Nest). The host implements it per run on its
 * in-process adapter, so every call passes the same gate, audit, limits and rate as a gRPC
 * plugin's. Field names follow the Runner Protocol v1 JSON (snake_case), so the host's RunContext
 * and result objects fit these types as they are.
 *
 * Errors: a port method that fails throws an Error carrying the protocol error code
 * (`DomainError` from @libs/protocol, or any Error with `code: ErrorCode` and `retryable`).
 * The loop reads `code` only: `unauthorized` (grant missing: skipped or shown to the model),
 * `deadline_exceeded` (the run's host deadline: ends the run `runner.timeout`, no fallback),
 * anything else (a failure of that call: fallback, tool error, ...).
 * One refinement (docs/local-agent.md#deadline-and-cancel): a `deadline_exceeded` whose `details.reason` is
 * `"timeout"` is that call's own timeout (a slow tool or model), not the run's deadline — it is
 * an ordinary failure of the call (fallback, or an error shown to the model) unless the run's
 * deadline has passed too.
 */
import type {
  ChatMessage,
  ErrorCode,
  HistoryPage,
  HistoryPageRequest,
  JsonObject,
  KnowledgeEntry,
  ModelCallRequest,
  ModelInvokeResult,
  ModelStreamItem,
  RerankItem,
  RerankRequest,
  RunStatusView,
  StateScope,
  AgentSteeringItem as SteeringItem,
  SteeringPullRequest,
  ToolDefinition,
  ToolDetail,
  Usage,
} from '@libs/protocol';

/*
 * The shapes the port speaks — messages, the run context, the host-API requests and answers,
 * steering items — are the schemas' types of @libs/protocol (agent-shapes.ts, host-api.ts),
 * the same ones the host's adapters convert to; re-exported here as the agent's vocabulary.
 */
export type {
  AgentInput,
  AgentRunContext,
  AvailableApis,
  ChatMessage,
  ContentElement,
  HistoryItem,
  HistoryPage,
  HistoryPageRequest,
  InputAttachment,
  JsonObject,
  KnowledgeBaseGrant,
  KnowledgeEntry,
  MessageRole,
  ModelCallRequest,
  ModelGrant,
  ModelInvokeResult,
  ModelStreamItem,
  RerankItem,
  RerankRequest,
  RunStatusView,
  SkillGrant,
  StateScope,
  AgentSteeringItem as SteeringItem,
  SteeringPullRequest,
  ToolCall,
  ToolCallDelta,
  ToolDefinition,
  ToolDetail,
  ToolGrant,
  Usage,
} from '@libs/protocol';

// ---------------------------------------------------------------------------------------------
// Results the agent emits (libs/protocol/src/results.ts payloads; the host stamps sequence)
// ---------------------------------------------------------------------------------------------

export interface MessageChunk extends ChatMessage {
  /** The new visible text since the previous delta (the host appends deltas). */
  content: string;
  /** On a model turn's closing chunk: the run's visible text so far (docs/local-agent.md#streamed-output). */
  all_content?: string;
  /** Always false: message.completed (or the terminal result) ends the message, not a turn. */
  is_final?: boolean;
  msg_sequence?: number;
}

export type AgentResult =
  | { type: 'message.delta'; data: { chunk: MessageChunk } }
  | { type: 'message.completed'; data: { message: ChatMessage } }
  | { type: 'tool.call.started'; data: { tool_call_id: string; tool_name: string; parameters: JsonObject } }
  | {
      type: 'tool.call.completed';
      data: { tool_call_id: string; tool_name: string; result: JsonObject | null; error: string | null };
    }
  | { type: 'state.updated'; data: { scope: StateScope; key: string; value: unknown } }
  | { type: 'action.requested'; data: JsonObject }
  | { type: 'run.completed'; data: { finish_reason: string }; usage?: Usage }
  | { type: 'run.failed'; data: { error: string; code: string; retryable: boolean }; usage?: Usage };

export type AgentResultType = AgentResult['type'];

/** The shape of errors the port throws (DomainError satisfies it). */
export interface HostPortError extends Error {
  code: ErrorCode;
  retryable?: boolean;
  /** `reason: "timeout"` on a `deadline_exceeded` marks the call's own timeout (see above). */
  details?: JsonObject;
}

// ---------------------------------------------------------------------------------------------
// The port
// ---------------------------------------------------------------------------------------------

/**
 * What one run of the local agent may do, bound to that run (the run id is implicit). Every
 * method is one host-API action with its own grant; a missing grant fails `unauthorized`.
 */
export interface PortLimits {
  max_request_bytes: number;
  max_result_bytes: number;
}

export interface LocalAgentHostPort {
  /**
   * Aborted when the run must stop: cancel requested, host deadline passed, or the run ended.
   * In-flight port calls observe it themselves; the loop stops at once and, if it has not yet
   * ended the run, emits `cancelled` (or `runner.timeout` when the host deadline has passed).
   */
  readonly signal: AbortSignal;

  /** Absolute paths of the skill packages (folders with SKILL.md) this run may read; absent: none. */
  readonly skill_roots?: readonly string[];

  /**
   * The host's size limits: a port call's request (as JSON) and one emitted result's data. A tool
   * call whose arguments cannot meet them is not made (the run fails `runner.tool_arguments_too_large`).
   * Absent: unknown, no check of the agent's own.
   */
  readonly limits?: PortLimits;

  /**
   * True when this run may ask a person through structured interactions (the run's frozen
   * grant: docs/interactions.md#who-may-ask); absent or false: tools needing approval are refused.
   */
  readonly interactions?: boolean;

  /** model.invoke */
  invokeModel(req: ModelCallRequest): Promise<ModelInvokeResult>;
  /** model.stream: the provider stream as it arrives; the consumer's `return()` closes it. */
  streamModel(req: ModelCallRequest): AsyncIterable<ModelStreamItem>;
  /** model.count_tokens: input tokens of `messages` (+ `tools`) for that model. */
  countTokens(req: { model_id: string; messages: ChatMessage[]; tools?: ToolDefinition[] }): Promise<number>;
  /** model.rerank */
  rerank(req: RerankRequest): Promise<RerankItem[]>;

  /** tool.detail */
  getToolDetail(toolName: string): Promise<ToolDetail>;
  /** tool.call: the tool's JSON result (an object; MCP results as `{content:[...]}` or flattened). */
  callTool(toolName: string, parameters: JsonObject): Promise<unknown>;

  /** knowledge.retrieve */
  retrieveKnowledge(req: { kb_id: string; query_text: string; top_k?: number }): Promise<KnowledgeEntry[]>;

  /** history.page (needs available_apis.history_page) */
  historyPage(req: HistoryPageRequest): Promise<HistoryPage>;
  /** prompt.get: the effective prompt of the agent (needs available_apis.prompt_get). */
  promptGet(): Promise<ChatMessage[]>;

  /** state.get: the value, or undefined when the key is absent (needs available_apis.state). */
  stateGet(scope: StateScope, key: string): Promise<unknown>;
  /** state.set */
  stateSet(scope: StateScope, key: string, value: unknown): Promise<void>;

  /** steering.pull (needs available_apis.steering_pull) */
  steeringPull(req: SteeringPullRequest): Promise<SteeringItem[]>;

  /** run.get: cooperative cancel check (needs available_apis.run_get); the signal is the fast path. */
  runGet?(): Promise<RunStatusView>;

  /**
   * The sink for this run's results, in order. The first run.completed / run.failed ends the
   * run; the agent emits nothing after it. Awaited: back-pressure and ordering are the host's.
   */
  emit(result: AgentResult): Promise<void> | void;
}
