import { z } from 'zod';
import { ENV_NAME_PATTERN, ENV_NAME_RULE } from '@libs/config';
import { INT32_MAX, STATE_SCOPES } from '@libs/protocol';

const ids = z.array(z.string().min(1).max(255)).max(1000);

/**
 * Agent policies (docs/api.md#agents). Strict: unknown keys are errors. The snapshot builder, stores,
 * delivery and steering read them; resource ids are checked against the registries. The
 * descriptions are the documentation of each grant: the OpenAPI document is generated from
 * these schemas (see `policyOpenApiSchema`), so they must say what the host does with them.
 */
export const resourcePolicySchema = z.strictObject({
  allowed_model_ids: ids
    .optional()
    .describe(
      'Registered models (model_id) the runner may call: chat models for invoke/stream/count_tokens, rerank models for rerank — as far as the runner manifest asks for those permissions.',
    ),
  allowed_tool_names: ids
    .optional()
    .describe(
      'Registered tools (tool_name) the runner may see and call, if its manifest declares tool_calling. Ignored when allow_all_tools is true.',
    ),
  allow_all_tools: z
    .boolean()
    .default(false)
    .describe('Grant every registered tool (as of the run start) instead of the allowed_tool_names list.'),
  allowed_kb_ids: ids
    .optional()
    .describe(
      'Registered knowledge bases (kb_id) the runner may list and retrieve from (manifest: knowledge_retrieval).',
    ),
  allow_plugin_storage: z
    .boolean()
    .default(true)
    .describe("Storage area `plugin`: the plugin's own key/value area, shared by all its agents."),
  allow_workspace_storage: z
    .boolean()
    .default(false)
    .describe(
      'Storage area `workspace`: shared by every plugin in the conversation workspace (default workspace when none).',
    ),
  allow_binding_storage: z
    .boolean()
    .default(false)
    .describe('Storage area `binding`: private to this agent (this runner binding).'),
  history: z
    .array(z.enum(['page', 'search']))
    .optional()
    .describe(
      'Conversation history APIs the runner may call (default both: page and search); only in runs with a conversation.',
    ),
  events: z
    .array(z.enum(['get', 'page']))
    .optional()
    .describe(
      'Event log APIs the runner may call (default both: get and page; page only in runs with a conversation).',
    ),
  prompt: z
    .array(
      z.strictObject({
        role: z.enum(['system', 'user', 'assistant']),
        content: z.string().max(100_000),
      }),
    )
    .max(100)
    .optional()
    .describe('Prompt messages the runner reads with the prompt API (prompt_get is available when non-empty).'),
});

export const statePolicySchema = z.strictObject({
  enable_state: z.boolean().default(true).describe('false: no state API at all.'),
  state_scopes: z
    .array(z.enum(STATE_SCOPES))
    .default(['conversation', 'actor'])
    .describe('State scopes the runner may read and write; a scope is available only when the run has its dimension.'),
});

const noticeText = z.string().trim().min(1).max(1000);

/** The agent's webhook: every delivery op of its runs is POSTed here, signed (docs/delivery.md#webhooks). */
export const webhookPolicySchema = z.strictObject({
  url: z
    .string()
    .max(2000)
    .refine((u) => URL.canParse(u) && ['http:', 'https:'].includes(new URL(u).protocol), 'must be an http(s) URL')
    .refine((u) => !URL.canParse(u) || (new URL(u).username === '' && new URL(u).password === ''), {
      message: 'must not carry credentials (use secret_env)',
    })
    .describe('Where delivery ops are POSTed (JSON). Private and loopback addresses need WEBHOOK_ALLOW_PRIVATE.'),
  secret_env: z
    .string()
    .regex(ENV_NAME_PATTERN, ENV_NAME_RULE)
    .describe(
      'Host environment variable holding the HMAC-SHA256 signing secret; must match SECRET_ENV_ALLOWLIST (read at send time).',
    ),
});

export const deliveryPolicySchema = z.strictObject({
  enable_streaming: z.boolean().default(true).describe('Deliver partial results as they stream.'),
  enable_interactions: z
    .boolean()
    .default(false)
    .describe(
      'Let runs of this agent ask the user through structured interactions (docs/interactions.md); the runner must also declare capabilities.interactions and permissions.interactions ["request"].',
    ),
  edit_interval_ms: z
    .number()
    .int()
    .min(0)
    .max(60_000)
    .default(1000)
    .describe(
      "Least interval between two edits of a streamed message; the surface preset's interval is a floor (platform rate limits).",
    ),
  min_edit_chars: z
    .number()
    .int()
    .min(0)
    .max(100_000)
    .default(16)
    .describe('Least new characters before a streamed message is edited again (the last edit is always sent).'),
  streaming_mode: z
    .enum(['parts', 'final'])
    .default('parts')
    .describe(
      'Surfaces that stream but cannot edit: send the answer in parts at paragraph boundaries as it completes, or only the final message.',
    ),
  max_message_size: z
    .number()
    .int()
    .min(16)
    .max(INT32_MAX)
    .nullable()
    .default(null)
    .describe("Characters per delivered message; null: the surface's limit (the smaller of both applies)."),
  failure_notice: z.boolean().default(true).describe('Tell the user when a run fails.'),
  cancel_notice: z.boolean().default(true).describe('Tell the user when a run is cancelled.'),
  timeout_notice: z.boolean().default(true).describe('Tell the user when a run times out.'),
  notice_texts: z
    .strictObject({
      failed: noticeText.optional().describe('Instead of the default failure notice.'),
      cancelled: noticeText.optional().describe('Instead of the default cancel notice.'),
      timeout: noticeText.optional().describe('Instead of the default timeout notice.'),
    })
    .default({})
    .describe(
      "Custom notice texts by kind; otherwise the host's short defaults (no internals; a retry hint when retrying can help).",
    ),
  webhook: webhookPolicySchema
    .nullable()
    .default(null)
    .describe('Push every delivery op to this webhook (signed, retried, ordered per run); null: SSE only.'),
});

export const concurrencyPolicySchema = z.strictObject({
  mode: z
    .enum(['steer', 'queue', 'interrupt', 'reject'])
    .optional()
    .describe(
      'What a follow-up event does while its conversation is busy (a run running or messages waiting): steer it into the running run (the runner pulls it), queue it as the next run, interrupt the running run (cancelled; the event runs next), or reject it (409). Default: steer when the runner declares capabilities.steering, else queue. An event may override it (`concurrency`).',
    ),
});

export type ResourcePolicy = z.infer<typeof resourcePolicySchema>;
export type StatePolicy = z.infer<typeof statePolicySchema>;
export type DeliveryPolicy = z.infer<typeof deliveryPolicySchema>;
export type WebhookPolicy = z.infer<typeof webhookPolicySchema>;
export type ConcurrencyPolicy = z.infer<typeof concurrencyPolicySchema>;

/** An OpenAPI 3.0 schema object of a policy, as a request accepts it (defaults shown). */
export function policyOpenApiSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input' }) as Record<
    string,
    unknown
  >;
  return rest;
}
