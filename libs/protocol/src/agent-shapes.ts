import { z } from 'zod';
import { usageSchema } from './results';

/*
 * The protocol shapes the host and the local agent share (docs/local-agent.md#a-runner-like-any-other):
 * chat messages in the OpenAI chat shape the host API's model calls speak, the run context as the
 * local agent reads it, and the steering items a run pulls. One schema each; the TypeScript types
 * are inferred from them, so the host's adapters and the agent read the same definition.
 *
 * Objects are loose (unknown keys kept): these are Protocol v1 JSON values that grow fields, and
 * a reader passes on what it does not read. The `agent…` schemas are the agent's lenient reading
 * (nulls and absent fields accepted) of shapes the host writes strictly: run-context.ts and
 * steering.ts hold the host's own definitions, which every value the agent reads satisfies.
 */

/**
 * A JSON object: any non-array object, its string keys kept. (Not a record of string keys: an
 * in-process caller's objects may carry symbol-keyed bookkeeping, which is not part of the value.)
 */
export const jsonObjectSchema = z.looseObject({});
export type JsonObject = z.infer<typeof jsonObjectSchema>;

const text = z.string().nullable().optional();

// ---------------------------------------------------------------------------------------------
// Messages (Protocol v1 Message, OpenAI chat shape)
// ---------------------------------------------------------------------------------------------

/** A content element of a message: text, image_url, image_base64, file_url, file_base64. */
export const agentContentElementSchema = z.looseObject({
  type: z.string(),
  text,
  image_url: z.looseObject({ url: z.string() }).nullable().optional(),
  image_base64: text,
  file_url: text,
  file_base64: text,
  file_name: text,
});
export type ContentElement = z.infer<typeof agentContentElementSchema>;

export const chatToolCallSchema = z.looseObject({
  id: z.string(),
  /** "function" */
  type: z.string(),
  function: z.looseObject({ name: z.string(), arguments: z.string() }),
  /** Opaque provider fields of the call (e.g. thought signatures), replayed as received. */
  provider_specific_fields: jsonObjectSchema.nullable().optional(),
});
export type ToolCall = z.infer<typeof chatToolCallSchema>;

export const MESSAGE_ROLES = ['system', 'developer', 'user', 'assistant', 'tool'] as const;
export type MessageRole = (typeof MESSAGE_ROLES)[number];

/**
 * A chat message. `role` is any string here (a MessageRole for model calls; other roles from
 * history are dropped by the agent's sanitizer before a model sees them).
 */
export const chatMessageSchema = z.looseObject({
  role: z.string(),
  content: z
    .union([z.string(), z.array(agentContentElementSchema)])
    .nullable()
    .optional(),
  name: text,
  tool_calls: z.array(chatToolCallSchema).nullable().optional(),
  tool_call_id: text,
  /** Opaque provider fields of the message (e.g. reasoning_content), replayed as received. */
  provider_specific_fields: jsonObjectSchema.nullable().optional(),
});
export type ChatMessage = z.infer<typeof chatMessageSchema>;

/** An LLM tool definition as sent to the model: `{type:"function", function:{name, description, parameters}}`. */
export const toolDefinitionSchema = z.object({
  type: z.literal('function'),
  function: z.object({ name: z.string(), description: z.string(), parameters: jsonObjectSchema }),
});
export type ToolDefinition = z.infer<typeof toolDefinitionSchema>;

/** Usage (results.ts' usageSchema): absent means unknown, never zero. */
export type Usage = z.infer<typeof usageSchema>;

// ---------------------------------------------------------------------------------------------
// Run context (the RunContext the host sends, as far as the local agent reads it)
// ---------------------------------------------------------------------------------------------

export const agentInputAttachmentSchema = z.looseObject({
  type: z.string(),
  mime_type: text,
  size: z.number().nullable().optional(),
  name: text,
  source: text,
  url: text,
  path: text,
  content: text,
  id: text,
});
export type InputAttachment = z.infer<typeof agentInputAttachmentSchema>;

export const agentInputSchema = z.looseObject({
  text,
  contents: z.array(agentContentElementSchema).nullable().optional(),
  attachments: z.array(agentInputAttachmentSchema).nullable().optional(),
});
export type AgentInput = z.infer<typeof agentInputSchema>;

const operations = z.array(z.string()).optional();

export const modelGrantSchema = z.looseObject({
  model_id: z.string(),
  model_type: z.string().optional(),
  provider: z.string().optional(),
  /** invoke, stream, count_tokens, rerank */
  operations,
});
export type ModelGrant = z.infer<typeof modelGrantSchema>;

export const toolGrantSchema = z.looseObject({
  tool_name: z.string(),
  tool_type: z.string().optional(),
  description: text,
  operations,
  /** The tool's JSON schema when the host inlined it (then no detail call is needed). */
  parameters: jsonObjectSchema.nullable().optional(),
  source: z.string().optional(),
  source_id: text,
});
export type ToolGrant = z.infer<typeof toolGrantSchema>;

export const knowledgeBaseGrantSchema = z.looseObject({
  kb_id: z.string(),
  kb_name: z.string().optional(),
  kb_type: z.string().optional(),
  operations,
});
export type KnowledgeBaseGrant = z.infer<typeof knowledgeBaseGrantSchema>;

/** A skill the host advertises to a run (docs/local-agent.md#skills): name and description only. */
export const skillGrantSchema = z.looseObject({ skill_name: z.string(), description: text });
export type SkillGrant = z.infer<typeof skillGrantSchema>;

const flag = z.boolean().optional();
export const agentAvailableApisSchema = z.looseObject({
  prompt_get: flag,
  history_page: flag,
  history_search: flag,
  event_get: flag,
  event_page: flag,
  state: flag,
  storage: flag,
  steering_pull: flag,
  run_get: flag,
});
export type AvailableApis = z.infer<typeof agentAvailableApisSchema>;

/** The Runner Protocol v1 run context, as far as the local agent reads it. */
export const agentRunContextSchema = z.looseObject({
  run_id: z.string(),
  event: z
    .looseObject({ event_id: z.string(), event_type: z.string().optional(), source: z.string().optional() })
    .nullable()
    .optional(),
  conversation: z.looseObject({ conversation_id: text, thread_id: text }).nullable().optional(),
  input: agentInputSchema.nullable().optional(),
  delivery: z.looseObject({ supports_streaming: z.boolean().nullable().optional() }).nullable().optional(),
  resources: z
    .looseObject({
      models: z.array(modelGrantSchema).nullable().optional(),
      tools: z.array(toolGrantSchema).nullable().optional(),
      knowledge_bases: z.array(knowledgeBaseGrantSchema).nullable().optional(),
      skills: z.array(skillGrantSchema).nullable().optional(),
    })
    .nullable()
    .optional(),
  context: z
    .looseObject({
      conversation_id: text,
      thread_id: text,
      available_apis: agentAvailableApisSchema.nullable().optional(),
    })
    .nullable()
    .optional(),
  runtime: z
    .looseObject({
      /** Epoch seconds (fractional); absent: no host deadline. */
      deadline_at: z.number().nullable().optional(),
      /** model_context_window_tokens, model_max_output_tokens, streaming_supported, ... */
      metadata: jsonObjectSchema.nullable().optional(),
    })
    .nullable()
    .optional(),
  /** The agent's runner_config (validated against the config_schema at binding time). */
  config: jsonObjectSchema.nullable().optional(),
});
export type AgentRunContext = z.infer<typeof agentRunContextSchema>;

// ---------------------------------------------------------------------------------------------
// Steering items (docs/protocol.md#steering-pull)
// ---------------------------------------------------------------------------------------------

/** A SteeringInputItem: a follow-up message claimed by an active run. */
export const agentSteeringItemSchema = z.looseObject({
  event: z.looseObject({ event_id: z.string().optional() }).nullable().optional(),
  input: agentInputSchema.nullable().optional(),
});
export type AgentSteeringItem = z.infer<typeof agentSteeringItemSchema>;
