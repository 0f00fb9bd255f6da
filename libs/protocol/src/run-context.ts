import { z } from 'zod';

/*
 * The Runner Protocol v1 run context as the host's domain sees it (docs/protocol.md#the-run-context):
 * schemas with their types inferred. Field names and optionality follow
 * proto/runnerhost/v1/context.proto (snake_case; `google.protobuf.Struct` is a JSON object); the
 * runner gateway converts these to and from the generated wire types, so no lib below the edge
 * imports generated proto code (docs/architecture.md#conventions).
 */

/** A `google.protobuf.Struct`: an open JSON object. */
const struct = z.record(z.string(), z.unknown());

export const triggerSchema = z.object({
  type: z.string(),
  source: z.string(),
  timestamp: z.number().int().optional(),
});

export const rawEventRefSchema = z.object({
  ref_id: z.string(),
  storage_key: z.string().optional(),
});

export const eventContextSchema = z.object({
  event_id: z.string(),
  event_type: z.string(),
  event_time: z.number().int().optional(),
  source: z.string(),
  source_event_type: z.string().optional(),
  raw_ref: rawEventRefSchema.optional(),
  data: struct.optional(),
});

export const conversationContextSchema = z.object({
  conversation_id: z.string().optional(),
  thread_id: z.string().optional(),
  launcher_type: z.string().optional(),
  launcher_id: z.string().optional(),
  sender_id: z.string().optional(),
  bot_id: z.string().optional(),
  workspace_id: z.string().optional(),
  session_id: z.string().optional(),
});

export const actorContextSchema = z.object({
  actor_type: z.string(),
  actor_id: z.string().optional(),
  actor_name: z.string().optional(),
  metadata: struct.optional(),
});

export const subjectContextSchema = z.object({
  subject_type: z.string(),
  subject_id: z.string().optional(),
  data: struct.optional(),
});

/** One element of a multimodal input (text, an image by URL or base64, a file). */
export const contentElementSchema = z.object({
  type: z.string(),
  text: z.string().optional(),
  image_url: z.object({ url: z.string() }).optional(),
  image_base64: z.string().optional(),
  file_url: z.string().optional(),
  file_base64: z.string().optional(),
  file_name: z.string().optional(),
});
export type RunContentElement = z.infer<typeof contentElementSchema>;

export const inputAttachmentSchema = z.object({
  type: z.string(),
  mime_type: z.string().optional(),
  size: z.number().int().optional(),
  name: z.string().optional(),
  source: z.string().optional(),
  url: z.string().optional(),
  path: z.string().optional(),
  content: z.string().optional(),
  id: z.string().optional(),
});
export type RunInputAttachment = z.infer<typeof inputAttachmentSchema>;

export const runInputSchema = z.object({
  text: z.string().optional(),
  contents: z.array(contentElementSchema),
  attachments: z.array(inputAttachmentSchema),
  interaction: struct.optional(),
});

/** The surface the run's answer goes to, after its preset was applied (docs/delivery.md#the-runs-surface). */
export const deliveryContextSchema = z.object({
  surface: z.string(),
  reply_target: struct.optional(),
  supports_streaming: z.boolean(),
  supports_edit: z.boolean(),
  supports_reaction: z.boolean(),
  max_message_size: z.number().int().optional(),
  platform_capabilities: struct.optional(),
});
export type RunDeliveryContext = z.infer<typeof deliveryContextSchema>;

export const modelResourceSchema = z.object({
  model_id: z.string(),
  model_type: z.string(),
  provider: z.string(),
  operations: z.array(z.string()),
});

export const toolResourceSchema = z.object({
  tool_name: z.string(),
  tool_type: z.string(),
  description: z.string(),
  operations: z.array(z.string()),
  parameters: struct.optional(),
  source: z.string(),
  source_id: z.string().optional(),
  title: z.string().optional(),
  annotations: struct.optional(),
  output_schema: struct.optional(),
});

export const knowledgeBaseResourceSchema = z.object({
  kb_id: z.string(),
  kb_name: z.string(),
  kb_type: z.string(),
  operations: z.array(z.string()),
});

export const storageResourceSchema = z.object({
  plugin_storage: z.boolean(),
  workspace_storage: z.boolean(),
  binding_storage: z.boolean(),
});

export const resourcesSchema = z.object({
  models: z.array(modelResourceSchema),
  tools: z.array(toolResourceSchema),
  knowledge_bases: z.array(knowledgeBaseResourceSchema),
  storage: storageResourceSchema.optional(),
  platform_capabilities: struct.optional(),
});

export const inlineContextPolicySchema = z.object({
  mode: z.string(),
  delivered_count: z.number().int(),
  source_total_count: z.number().int().optional(),
  messages_complete: z.boolean(),
  reason: z.string().optional(),
});

/** One flag per host API the run may call (docs/protocol.md#host-api). */
export const availableApisSchema = z.object({
  prompt_get: z.boolean(),
  history_page: z.boolean(),
  history_search: z.boolean(),
  event_get: z.boolean(),
  event_page: z.boolean(),
  state: z.boolean(),
  storage: z.boolean(),
  steering_pull: z.boolean(),
  run_get: z.boolean(),
});

export const contextAccessSchema = z.object({
  conversation_id: z.string().optional(),
  thread_id: z.string().optional(),
  latest_cursor: z.string().optional(),
  event_seq: z.number().int().optional(),
  transcript_seq: z.number().int().optional(),
  has_history_before: z.boolean(),
  inline_policy: inlineContextPolicySchema.optional(),
  available_apis: availableApisSchema.optional(),
});

export const runStateSchema = z.object({
  conversation: struct.optional(),
  actor: struct.optional(),
  subject: struct.optional(),
  runner: struct.optional(),
});

export const runtimeContextSchema = z.object({
  host: z.string(),
  protocol_version: z.string(),
  trace_id: z.string(),
  /** Unix seconds; absent without a deadline. */
  deadline_at: z.number().optional(),
  locale: z.string().optional(),
  timezone: z.string().optional(),
  metadata: struct.optional(),
});

/** The run context (docs/protocol.md#the-run-context). */
export const runContextSchema = z.object({
  run_id: z.string(),
  trigger: triggerSchema.optional(),
  event: eventContextSchema.optional(),
  conversation: conversationContextSchema.optional(),
  actor: actorContextSchema.optional(),
  subject: subjectContextSchema.optional(),
  input: runInputSchema.optional(),
  delivery: deliveryContextSchema.optional(),
  resources: resourcesSchema.optional(),
  context: contextAccessSchema.optional(),
  state: runStateSchema.optional(),
  runtime: runtimeContextSchema.optional(),
  config: struct.optional(),
  metadata: struct.optional(),
});
export type RunContext = z.infer<typeof runContextSchema>;
