import { z } from 'zod';
import { STATE_SCOPES } from '@libs/protocol';

const ids = z.array(z.string().min(1).max(255)).max(1000);

/**
 * Agent policies (SPEC §5). Strict: unknown keys are errors. The snapshot builder, stores,
 * delivery and steering read them; resource ids are checked against the registries once those
 * exist.
 */
export const resourcePolicySchema = z.strictObject({
  allowed_model_ids: ids.optional(),
  allowed_tool_names: ids.optional(),
  allow_all_tools: z.boolean().default(false),
  allowed_kb_ids: ids.optional(),
  allow_plugin_storage: z.boolean().default(true),
  allow_workspace_storage: z.boolean().default(false),
  allow_binding_storage: z.boolean().default(false),
  history: z.array(z.enum(['page', 'search'])).optional(),
  events: z.array(z.enum(['get', 'page'])).optional(),
  prompt: z
    .array(z.strictObject({ role: z.enum(['system', 'user', 'assistant']), content: z.string() }))
    .max(100)
    .optional(),
});

export const statePolicySchema = z.strictObject({
  enable_state: z.boolean().default(true),
  state_scopes: z.array(z.enum(STATE_SCOPES)).default(['conversation', 'actor']),
});

export const deliveryPolicySchema = z.strictObject({
  enable_streaming: z.boolean().default(true),
  edit_interval_ms: z.number().int().min(0).max(60_000).default(1000),
  max_message_size: z.number().int().positive().nullable().default(null),
  failure_notice: z.boolean().default(true),
  cancel_notice: z.boolean().default(true),
});

export const concurrencyPolicySchema = z.strictObject({
  mode: z.enum(['steer', 'queue', 'interrupt', 'reject']).optional(),
});

export type ResourcePolicy = z.infer<typeof resourcePolicySchema>;
export type StatePolicy = z.infer<typeof statePolicySchema>;
export type DeliveryPolicy = z.infer<typeof deliveryPolicySchema>;
export type ConcurrencyPolicy = z.infer<typeof concurrencyPolicySchema>;
