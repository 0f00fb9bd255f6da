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
import type { ErrorCode } from '@libs/protocol';

/** A JSON object. */
export type JsonObject = Record<string, unknown>;

// ---------------------------------------------------------------------------------------------
// Messages (Protocol v1 Message, OpenAI chat shape)
// ---------------------------------------------------------------------------------------------

/** A content element of a message: text, image_url, image_base64, file_url, file_base64. */
export interface ContentElement {
  type: string;
  text?: string | null;
  image_url?: { url: string } | null;
  image_base64?: string | null;
  file_url?: string | null;
  file_base64?: string | null;
  file_name?: string | null;
  [extra: string]: unknown;
}

export interface ToolCall {
  id: string;
  type: string; // "function"
  function: { name: string; arguments: string };
  /** Opaque provider fields of the call (e.g. thought signatures), replayed as received. */
  provider_specific_fields?: JsonObject | null;
}

export type MessageRole = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

export interface ChatMessage {
  /** A MessageRole; other roles (from history) are dropped by the sanitizer before model calls. */
  role: string;
  content?: string | ContentElement[] | null;
  name?: string | null;
  tool_calls?: ToolCall[] | null;
  tool_call_id?: string | null;
  /** Opaque provider fields of the message (e.g. reasoning_content), replayed as received. */
  provider_specific_fields?: JsonObject | null;
  [extra: string]: unknown;
}

/** An LLM tool definition as sent to the model: `{type:"function", function:{name, description, parameters}}`. */
export interface ToolDefinition {
  type: 'function';
  function: { name: string; description: string; parameters: JsonObject };
}

/** Usage `{prompt_tokens, completion_tokens, total_tokens, ...extra}`; absent means unknown, never zero. */
export type Usage = JsonObject & {
  prompt_tokens?: number | null;
  completion_tokens?: number | null;
  total_tokens?: number | null;
};

// ---------------------------------------------------------------------------------------------
// Run context (the RunContext the host sends; only what the agent reads is typed)
// ---------------------------------------------------------------------------------------------

export interface InputAttachment {
  type: string;
  mime_type?: string | null;
  size?: number | null;
  name?: string | null;
  source?: string | null;
  url?: string | null;
  path?: string | null;
  content?: string | null;
  id?: string | null;
  [extra: string]: unknown;
}

export interface AgentInput {
  text?: string | null;
  contents?: ContentElement[] | null;
  attachments?: InputAttachment[] | null;
}

export interface ModelGrant {
  model_id: string;
  model_type?: string;
  provider?: string;
  /** invoke, stream, count_tokens, rerank */
  operations?: string[];
}

export interface ToolGrant {
  tool_name: string;
  tool_type?: string;
  description?: string | null;
  operations?: string[];
  /** The tool's JSON schema when the host inlined it (then no detail call is needed). */
  parameters?: JsonObject | null;
  source?: string;
  source_id?: string | null;
}

export interface KnowledgeBaseGrant {
  kb_id: string;
  kb_name?: string;
  kb_type?: string;
  operations?: string[];
}

/** A skill the host advertises to this run (docs/local-agent.md#skills): name and description only. */
export interface SkillGrant {
  skill_name: string;
  description?: string | null;
}

export interface AvailableApis {
  prompt_get?: boolean;
  history_page?: boolean;
  history_search?: boolean;
  event_get?: boolean;
  event_page?: boolean;
  state?: boolean;
  storage?: boolean;
  steering_pull?: boolean;
  run_get?: boolean;
}

/** The Runner Protocol v1 run context, as far as the local agent reads it. */
export interface AgentRunContext {
  run_id: string;
  event?: { event_id: string; event_type?: string; source?: string; [extra: string]: unknown } | null;
  conversation?: { conversation_id?: string | null; thread_id?: string | null; [extra: string]: unknown } | null;
  input?: AgentInput | null;
  delivery?: { supports_streaming?: boolean | null; [extra: string]: unknown } | null;
  resources?: {
    models?: ModelGrant[] | null;
    tools?: ToolGrant[] | null;
    knowledge_bases?: KnowledgeBaseGrant[] | null;
    skills?: SkillGrant[] | null;
    [extra: string]: unknown;
  } | null;
  context?: {
    conversation_id?: string | null;
    thread_id?: string | null;
    available_apis?: AvailableApis | null;
    [extra: string]: unknown;
  } | null;
  runtime?: {
    /** Epoch seconds (fractional); absent: no host deadline. */
    deadline_at?: number | null;
    /** model_context_window_tokens, model_max_output_tokens, streaming_supported, ... */
    metadata?: JsonObject | null;
    [extra: string]: unknown;
  } | null;
  /** The agent's runner_config (validated against the config_schema at binding time). */
  config?: JsonObject | null;
  [extra: string]: unknown;
}

// ---------------------------------------------------------------------------------------------
// Host API operations
// ---------------------------------------------------------------------------------------------

export interface ModelCallRequest {
  model_id: string;
  messages: ChatMessage[];
  tools: ToolDefinition[];
  remove_think?: boolean;
  extra_args?: JsonObject;
}

export interface ModelInvokeResult {
  message: ChatMessage;
  usage?: Usage | null;
}

/**
 * A tool-call fragment of a stream: a complete call, or a piece keyed by `index` (id and name on
 * the first piece, arguments concatenated), as providers send them. The loop merges them.
 */
export interface ToolCallDelta {
  index?: number | null;
  id?: string | null;
  type?: string | null;
  function?: { name?: string | null; arguments?: string | null } | null;
  provider_specific_fields?: JsonObject | null;
}

/**
 * One item of a model stream. Text is a delta (new text only, never a snapshot). The last
 * chunk has `is_final: true` (with the finish reason); usage usually arrives as a trailing
 * usage-only item after it.
 */
export interface ModelStreamItem {
  /** New visible text. */
  delta?: string | null;
  /** New reasoning text (providers that send it separately). */
  reasoning_delta?: string | null;
  tool_calls?: ToolCallDelta[] | null;
  is_final?: boolean;
  /** "stop", "tool_calls", "length", ... on the final chunk. */
  finish_reason?: string | null;
  /** Opaque message-level provider fields, merged across the stream. */
  provider_specific_fields?: JsonObject | null;
  usage?: Usage | null;
}

export interface RerankRequest {
  model_id: string;
  query: string;
  documents: string[];
  top_k?: number;
}

/** Rerank answer, best first: indices into `documents`. */
export interface RerankItem {
  index: number;
  relevance_score?: number | null;
}

export interface ToolDetail {
  name: string;
  description?: string | null;
  parameters?: JsonObject | null;
}

/** A RetrievalResultEntry: `{id, content, metadata, distance, score}` (content text or content elements). */
export interface KnowledgeEntry {
  id?: string | null;
  chunk_id?: string | null;
  document_id?: string | null;
  content?: unknown;
  metadata?: JsonObject | null;
  score?: number | null;
  similarity?: number | null;
  distance?: number | null;
}

export interface HistoryPageRequest {
  /** Defaults to the run's conversation. */
  conversation_id?: string;
  before_cursor?: string;
  after_cursor?: string;
  limit?: number;
  /** "backward" (newest first, default) or "forward" (oldest first). */
  direction?: 'backward' | 'forward';
}

/** A TranscriptItem: `content_json` is the full Message when the host has it. */
export interface HistoryItem {
  event_id?: string | null;
  role?: string | null;
  content?: string | null;
  content_json?: JsonObject | null;
  seq?: number | string | null;
  cursor?: string | null;
  [extra: string]: unknown;
}

export interface HistoryPage {
  items: HistoryItem[];
  next_cursor?: string | null;
  prev_cursor?: string | null;
  has_more?: boolean;
}

export type StateScope = 'conversation' | 'actor' | 'subject' | 'runner';

export interface SteeringPullRequest {
  /** "all" (default) or "one". */
  mode: 'all' | 'one';
  /** At most this many items (host caps at 100). */
  limit?: number;
  /** Wait up to this long for an item when the queue is empty; 0 or absent: return at once. */
  wait_ms?: number;
}

/** A SteeringInputItem: a follow-up message claimed by this active run. */
export interface SteeringItem {
  event?: { event_id?: string; [extra: string]: unknown } | null;
  input?: AgentInput | null;
  [extra: string]: unknown;
}

export interface RunStatusView {
  status: string;
  cancel_requested: boolean;
}

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
