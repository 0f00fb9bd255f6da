import type { Json, JsonObject } from './json';

/*
 * Runner Protocol v1 as a runner sees it, in plain JSON with the protocol's snake_case names.
 * The run context mirrors proto/runnerhost/v1/context.proto (the SDK's unit tests check that
 * every field of the generated types is here): unset message fields are `null`, unset optional
 * scalars are absent, and every google.protobuf.Struct is a plain JSON object.
 */

export type I18n = Record<string, string>;

export interface RunnerCapabilities {
  streaming?: boolean;
  tool_calling?: boolean;
  knowledge_retrieval?: boolean;
  multimodal_input?: boolean;
  skill_authoring?: boolean;
  interrupt?: boolean;
  steering?: boolean;
  interactions?: boolean;
}

export interface RunnerPermissions {
  models?: ('invoke' | 'stream' | 'rerank' | 'count_tokens')[];
  tools?: ('detail' | 'call')[];
  knowledge_bases?: ('list' | 'retrieve')[];
  history?: ('page' | 'search')[];
  events?: ('get' | 'page')[];
  storage?: ('plugin' | 'workspace' | 'binding')[];
  interactions?: 'request'[];
}

/** One item of a manifest's `config_schema` (the binding's config form). */
export interface ConfigSchemaItem {
  type: string;
  name: string;
  label?: I18n;
  description?: I18n | null;
  required?: boolean;
  default?: Json;
  options?: JsonObject[] | null;
  [extra: string]: Json | undefined;
}

/** The manifest the SDK sends in hello (`id` is derived from the plugin identity). */
export interface RunnerManifest {
  id: string;
  name: string;
  label: I18n;
  description?: I18n | null;
  protocol_version: '1';
  capabilities: RunnerCapabilities;
  permissions: RunnerPermissions;
  config_schema: ConfigSchemaItem[];
  metadata: JsonObject;
}

// ---- messages ----------------------------------------------------------------------------------

export type Role = 'user' | 'system' | 'assistant' | 'tool' | 'command' | 'plugin';

export interface ContentElement {
  type: string;
  text?: string;
  image_url?: { url: string } | null;
  image_base64?: string;
  file_url?: string;
  file_base64?: string;
  file_name?: string;
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** A protocol Message (open object: unknown keys travel as they are). */
export interface Message {
  role: Role;
  content?: string | ContentElement[] | null;
  name?: string | null;
  tool_calls?: ToolCall[] | null;
  tool_call_id?: string | null;
  [extra: string]: unknown;
}

export interface MessageChunk extends Message {
  all_content?: string | null;
  is_final?: boolean;
  msg_sequence?: number;
}

/** Token usage; a missing usage means unknown, never 0. Extra provider counters are kept. */
export interface Usage {
  prompt_tokens?: number | null;
  completion_tokens?: number | null;
  total_tokens?: number | null;
  [extra: string]: Json | undefined;
}

// ---- the run context (context.proto) ------------------------------------------------------------

export interface Trigger {
  type: string;
  source: string;
  timestamp?: number;
}

export interface EventContext {
  event_id: string;
  event_type: string;
  event_time?: number;
  source: string;
  source_event_type?: string;
  raw_ref: { ref_id: string; storage_key?: string } | null;
  data: JsonObject | null;
}

export interface ConversationContext {
  conversation_id?: string;
  thread_id?: string;
  launcher_type?: string;
  launcher_id?: string;
  sender_id?: string;
  bot_id?: string;
  workspace_id?: string;
  session_id?: string;
}

export interface ActorContext {
  actor_type: string;
  actor_id?: string;
  actor_name?: string;
  metadata: JsonObject | null;
}

export interface SubjectContext {
  subject_type: string;
  subject_id?: string;
  data: JsonObject | null;
}

export interface InputAttachment {
  type: string;
  mime_type?: string;
  size?: number;
  name?: string;
  source?: string;
  url?: string;
  path?: string;
  content?: string;
  id?: string;
}

export interface Input {
  text?: string;
  contents: ContentElement[];
  attachments: InputAttachment[];
  interaction: JsonObject | null;
}

export interface DeliveryContext {
  surface: string;
  reply_target: JsonObject | null;
  supports_streaming: boolean;
  supports_edit: boolean;
  supports_reaction: boolean;
  max_message_size?: number;
  platform_capabilities: JsonObject | null;
}

export interface ModelResource {
  model_id: string;
  model_type: string;
  provider: string;
  operations: string[];
}

export interface ToolResource {
  tool_name: string;
  tool_type: string;
  description: string;
  operations: string[];
  parameters: JsonObject | null;
  source: string;
  source_id?: string;
  title?: string;
  annotations: JsonObject | null;
  output_schema: JsonObject | null;
}

export interface KnowledgeBaseResource {
  kb_id: string;
  kb_name: string;
  kb_type: string;
  operations: string[];
}

export interface StorageResource {
  plugin_storage: boolean;
  workspace_storage: boolean;
  binding_storage: boolean;
}

export interface Resources {
  models: ModelResource[];
  tools: ToolResource[];
  knowledge_bases: KnowledgeBaseResource[];
  storage: StorageResource | null;
  platform_capabilities: JsonObject | null;
}

export interface AvailableApis {
  prompt_get: boolean;
  history_page: boolean;
  history_search: boolean;
  event_get: boolean;
  event_page: boolean;
  state: boolean;
  storage: boolean;
  steering_pull: boolean;
  run_get: boolean;
}

export interface InlineContextPolicy {
  mode: string;
  delivered_count: number;
  source_total_count?: number;
  messages_complete: boolean;
  reason?: string;
}

export interface ContextAccess {
  conversation_id?: string;
  thread_id?: string;
  latest_cursor?: string;
  event_seq?: number;
  transcript_seq?: number;
  has_history_before: boolean;
  inline_policy: InlineContextPolicy | null;
  available_apis: AvailableApis | null;
}

export type StateScope = 'conversation' | 'actor' | 'subject' | 'runner';

export interface RunState {
  conversation: JsonObject | null;
  actor: JsonObject | null;
  subject: JsonObject | null;
  runner: JsonObject | null;
}

export interface RuntimeContext {
  host: string;
  protocol_version: string;
  trace_id: string;
  /** Epoch seconds (fractional); absent: no deadline. */
  deadline_at?: number;
  locale?: string;
  timezone?: string;
  metadata: JsonObject | null;
}

/** AgentRunContext: everything the host tells a run about itself. */
export interface RunContext {
  run_id: string;
  trigger: Trigger | null;
  event: EventContext | null;
  conversation: ConversationContext | null;
  actor: ActorContext | null;
  subject: SubjectContext | null;
  input: Input | null;
  delivery: DeliveryContext | null;
  resources: Resources | null;
  context: ContextAccess | null;
  state: RunState | null;
  runtime: RuntimeContext | null;
  config: JsonObject;
  metadata: JsonObject;
}

/** What the host sends to start a run. */
export interface RunRequest {
  runner_id: string;
  runner_name: string;
  context: RunContext;
  /** The run's W3C trace context; the SDK sends it back on the run's host API calls. */
  traceparent?: string;
}

/** One result as sent (plain JSON; the connection encodes `data` and `usage`). */
export interface RunResult {
  run_id: string;
  type: string;
  data: JsonObject;
  usage?: Usage;
  sequence: number;
  /** Epoch seconds. */
  timestamp: number;
}

export const TERMINAL_RESULT_TYPES: ReadonlySet<string> = new Set(['run.completed', 'run.failed']);

/** The text of a message or chunk: its string content, or the text parts of its content list. */
export function messageText(message: Pick<Message, 'content'> | JsonObject | null | undefined): string {
  const content = message?.content;
  if (typeof content === 'string') {
    return content;
  }
  if (Array.isArray(content)) {
    return content.map(partText).join('');
  }
  return '';
}

/** The text of a content part (`{type: 'text', text}`), or '' for any other part. */
function partText(part: ContentElement | Json): string {
  return part !== null &&
    typeof part === 'object' &&
    !Array.isArray(part) &&
    part.type === 'text' &&
    typeof part.text === 'string'
    ? part.text
    : '';
}
