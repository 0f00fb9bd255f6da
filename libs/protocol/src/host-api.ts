import { z } from 'zod';
import { DomainError } from './errors';
import { chatMessageSchema, jsonObjectSchema, toolDefinitionSchema } from './agent-shapes';
import { STATE_SCOPES, usageSchema } from './results';

/*
 * The host API's requests and answers in domain terms (docs/protocol.md#host-api): what each
 * action takes once an adapter converted it from its wire (no run_id: the adapter names the run),
 * and what the local agent reads of the answers. Each action's request schema is parsed once,
 * for both adapters, by the host's action table; a request it refuses is `invalid_argument`
 * naming the field (hostApiRequest below).
 *
 * The schemas hold the rules of the request's shape and the ones the host API itself owns; the
 * rules of a domain value (a model message, a state value, a cursor) stay with the service that
 * owns that value and answer with the same field-named error.
 */

const json = jsonObjectSchema;
const optionalText = z.string().optional();
const count = z.number().optional();

/** Storage areas of the host API (docs/protocol.md#host-api). */
export const STORAGE_AREAS = ['plugin', 'workspace', 'binding'] as const;
export type StorageAreaName = (typeof STORAGE_AREAS)[number];
export const STORAGE_AREA_RULE = 'must be "plugin", "workspace" or "binding"';

// eslint-disable-next-line no-control-regex -- control characters are exactly what keys must not hold
const STORAGE_KEY = /^[^\u0000-\u001f]{1,255}$/;
const storageKey = z.string().regex(STORAGE_KEY, 'must be 1-255 characters without control characters');
// A string on the way in (adapters pass the wire's), an area on the way out.
const storageArea = z.string().pipe(z.enum(STORAGE_AREAS, { error: STORAGE_AREA_RULE }));

/** A pull waits at most this long for a follow-up (docs/protocol.md#steering-pull). */
export const MAX_STEERING_PULL_WAIT_MS = 30_000;
/**
 * `EventPage` filters by at most this many event types: each is one bound parameter of the page's
 * query, and SQLite refuses a statement of more than 32,766 (100,000 types answered `INTERNAL`).
 * Event types are a small vocabulary (docs/protocol.md#limits).
 */
export const MAX_EVENT_PAGE_TYPES = 100;
const STEERING_MODES: Record<string, 'all' | 'one'> = {
  all: 'all',
  one: 'one',
  'one-at-a-time': 'one',
  one_at_a_time: 'one',
};

/** model.invoke and model.stream; messages and tools are checked by the model service (docs/models-tools-knowledge.md#models). */
export const modelCallRequestSchema = z.object({
  model_id: z.string(),
  messages: z.array(json),
  tools: z.array(json).default([]),
  extra_args: json.optional(),
  remove_think: z.boolean().optional(),
  timeout_ms: count,
});

/** steering.pull: the mode's aliases read as "all" or "one". */
export const steeringPullRequestSchema = z.object({
  mode: z
    .string()
    .optional()
    .refine((m) => m === undefined || m.toLowerCase() in STEERING_MODES, {
      message: 'must be "all" or "one" ("one-at-a-time", "one_at_a_time")',
    })
    .transform((m) => (m === undefined ? undefined : STEERING_MODES[m.toLowerCase()])),
  limit: z.number().int('must be an integer').min(1, 'must be > 0').optional(),
  wait_ms: z
    .number()
    .int('must be an integer')
    .min(0, 'must be >= 0')
    .max(MAX_STEERING_PULL_WAIT_MS, `must be at most ${MAX_STEERING_PULL_WAIT_MS}`)
    .optional(),
});
export type SteeringPullRequest = z.input<typeof steeringPullRequestSchema>;

const stateKey = { scope: z.string(), key: z.string() };
const storageKeyRequest = z.object({ area: storageArea, key: storageKey });
const empty = z.object({});

/** The request schema of every host-API action, by action name. */
export const HOST_API_REQUESTS = {
  'model.invoke': modelCallRequestSchema,
  'model.stream': modelCallRequestSchema,
  'model.count_tokens': z.object({ model_id: z.string(), messages: z.array(json), tools: z.array(json).default([]) }),
  'model.rerank': z.object({
    model_id: z.string(),
    query: z.string(),
    documents: z.array(z.string()),
    top_k: count,
    extra_args: json.optional(),
  }),
  'tool.detail': z.object({ tool_name: z.string() }),
  'tool.call': z.object({
    tool_name: z.string(),
    parameters: z.looseObject({}, { error: 'must be an object' }),
  }),
  'knowledge.retrieve': z.object({ kb_id: z.string(), query_text: z.string(), top_k: count, filters: json.optional() }),
  'history.page': z.object({
    conversation_id: optionalText,
    before_cursor: optionalText,
    after_cursor: optionalText,
    limit: count,
    /** "backward" (newest first, default) or "forward" (oldest first); checked by the transcript. */
    direction: optionalText,
    include_attachments: z.boolean().optional(),
  }),
  'history.search': z.object({ query: z.string(), filters: json.optional(), top_k: count }),
  'event.get': z.object({ event_id: z.string().min(1, 'is required') }),
  'event.page': z.object({
    conversation_id: optionalText,
    event_types: z
      .array(z.string())
      .max(MAX_EVENT_PAGE_TYPES, `at most ${MAX_EVENT_PAGE_TYPES} event types`)
      .default([]),
    before_cursor: optionalText,
    limit: count,
  }),
  'state.get': z.object(stateKey),
  'state.set': z.object({ ...stateKey, value: z.unknown() }),
  'state.delete': z.object(stateKey),
  'state.list': z.object({ scope: z.string(), prefix: optionalText, limit: count }),
  'storage.get': storageKeyRequest,
  'storage.set': storageKeyRequest.extend({ value: z.instanceof(Buffer, { error: 'must be bytes' }) }),
  'storage.delete': storageKeyRequest,
  'storage.list': z.object({ area: storageArea, prefix: optionalText, limit: count }),
  'prompt.get': empty,
  'steering.pull': steeringPullRequestSchema,
  'run.get': empty,
} as const;

export type HostApiAction = keyof typeof HOST_API_REQUESTS;
/** What an adapter hands the action table for `A`. */
export type HostApiRequest<A extends HostApiAction> = z.input<(typeof HOST_API_REQUESTS)[A]>;
/** What the action's service gets once the request schema passed it. */
export type HostApiParsed<A extends HostApiAction> = z.output<(typeof HOST_API_REQUESTS)[A]>;

/**
 * The one parse of a host-API request: the parsed request, or `invalid_argument` whose message
 * and `details.field` name the first field the schema refused ("event_id: is required").
 */
export function hostApiRequest<A extends HostApiAction>(action: A, req: unknown): HostApiParsed<A> {
  const parsed = HOST_API_REQUESTS[action].safeParse(req);
  if (parsed.success) {
    return parsed.data as HostApiParsed<A>;
  }
  const issue = parsed.error.issues[0];
  const field = issue.path.map(String).join('.') || 'request';
  throw new DomainError('invalid_argument', `${field}: ${issue.message}`, { field });
}

// ---------------------------------------------------------------------------------------------
// Answers, as the local agent reads them
// ---------------------------------------------------------------------------------------------

/** model.invoke: the assistant message and its usage (absent: unknown). */
export const modelInvokeAnswerSchema = z.object({
  message: chatMessageSchema,
  usage: usageSchema.nullable().optional(),
});
export type ModelInvokeResult = z.infer<typeof modelInvokeAnswerSchema>;

/** A model call as the local agent makes it (model.invoke / model.stream / model.count_tokens). */
export const agentModelCallSchema = z.object({
  model_id: z.string(),
  messages: z.array(chatMessageSchema),
  tools: z.array(toolDefinitionSchema),
  remove_think: z.boolean().optional(),
  extra_args: json.optional(),
});
export type ModelCallRequest = z.infer<typeof agentModelCallSchema>;

/**
 * A tool-call fragment of a stream: a complete call, or a piece keyed by `index` (id and name on
 * the first piece, arguments concatenated), as providers send them.
 */
export const toolCallDeltaSchema = z.looseObject({
  index: z.number().nullable().optional(),
  id: z.string().nullable().optional(),
  type: z.string().nullable().optional(),
  function: z
    .looseObject({ name: z.string().nullable().optional(), arguments: z.string().nullable().optional() })
    .nullable()
    .optional(),
  provider_specific_fields: json.nullable().optional(),
});
export type ToolCallDelta = z.infer<typeof toolCallDeltaSchema>;

/**
 * One item of a model stream as the agent reads it. Text is a delta (new text only). The last
 * chunk has `is_final: true` (with the finish reason); usage usually arrives as a trailing
 * usage-only item after it.
 */
export const modelStreamItemSchema = z.object({
  /** New visible text. */
  delta: z.string().nullable().optional(),
  /** New reasoning text (providers that send it separately). */
  reasoning_delta: z.string().nullable().optional(),
  tool_calls: z.array(toolCallDeltaSchema).nullable().optional(),
  is_final: z.boolean().optional(),
  /** "stop", "tool_calls", "length", ... on the final chunk. */
  finish_reason: z.string().nullable().optional(),
  /** Opaque message-level provider fields, merged across the stream. */
  provider_specific_fields: json.nullable().optional(),
  usage: usageSchema.nullable().optional(),
});
export type ModelStreamItem = z.infer<typeof modelStreamItemSchema>;

export const rerankRequestSchema = z.object({
  model_id: z.string(),
  query: z.string(),
  documents: z.array(z.string()),
  top_k: count,
});
export type RerankRequest = z.infer<typeof rerankRequestSchema>;

/** Rerank answer, best first: indices into `documents`. */
export const rerankItemSchema = z.looseObject({ index: z.number(), relevance_score: z.number().nullable().optional() });
export type RerankItem = z.infer<typeof rerankItemSchema>;

/** tool.detail */
export const toolDetailSchema = z.looseObject({
  name: z.string(),
  description: z.string().nullable().optional(),
  parameters: json.nullable().optional(),
});
export type ToolDetail = z.infer<typeof toolDetailSchema>;

/** A RetrievalResultEntry: `{id, content, metadata, distance, score}` (content text or content elements). */
export const knowledgeEntrySchema = z.looseObject({
  id: z.string().nullable().optional(),
  chunk_id: z.string().nullable().optional(),
  document_id: z.string().nullable().optional(),
  content: z.unknown(),
  metadata: json.nullable().optional(),
  score: z.number().nullable().optional(),
  similarity: z.number().nullable().optional(),
  distance: z.number().nullable().optional(),
});
export type KnowledgeEntry = z.infer<typeof knowledgeEntrySchema>;

/** history.page as the agent asks it (the run's conversation unless named). */
export const historyPageRequestSchema = z.object({
  conversation_id: optionalText,
  before_cursor: optionalText,
  after_cursor: optionalText,
  limit: count,
  direction: z.enum(['backward', 'forward']).optional(),
});
export type HistoryPageRequest = z.infer<typeof historyPageRequestSchema>;

/** A TranscriptItem: `content_json` is the full Message when the host has it. */
export const historyItemSchema = z.looseObject({
  event_id: z.string().nullable().optional(),
  role: z.string().nullable().optional(),
  content: z.string().nullable().optional(),
  content_json: json.nullable().optional(),
  seq: z.union([z.number(), z.string()]).nullable().optional(),
  cursor: z.string().nullable().optional(),
});
export type HistoryItem = z.infer<typeof historyItemSchema>;

export const historyPageSchema = z.object({
  items: z.array(historyItemSchema),
  next_cursor: z.string().nullable().optional(),
  prev_cursor: z.string().nullable().optional(),
  has_more: z.boolean().optional(),
});
export type HistoryPage = z.infer<typeof historyPageSchema>;

export type StateScope = (typeof STATE_SCOPES)[number];

/** run.get as the agent reads it: a cooperative cancel check. */
export const runStatusViewSchema = z.object({ status: z.string(), cancel_requested: z.boolean() });
export type RunStatusView = z.infer<typeof runStatusViewSchema>;

/** A prompt: the agent's effective messages (prompt.get). */
export const promptSchema = z.array(chatMessageSchema);
