import { z } from 'zod';
import { describeIssues } from './zod-issues';

const json = z.record(z.string(), z.unknown());

const contentElement = z.looseObject({ type: z.string().min(1) });
const toolCall = z.looseObject({
  id: z.string().optional(),
  type: z.string().optional(),
  function: z.looseObject({ name: z.string(), arguments: z.string() }),
});

/** Protocol v1 Message. */
export const messageSchema = z.looseObject({
  role: z.enum(['user', 'system', 'assistant', 'tool', 'command', 'plugin']),
  name: z.string().nullable().optional(),
  content: z
    .union([z.string(), z.array(contentElement)])
    .nullable()
    .optional(),
  tool_calls: z.array(toolCall).nullable().optional(),
  tool_call_id: z.string().nullable().optional(),
});
export type ProtocolMessage = z.infer<typeof messageSchema>;

export const messageChunkSchema = messageSchema.extend({
  role: messageSchema.shape.role.optional().default('assistant'),
  all_content: z.string().nullable().optional(),
  is_final: z.boolean().optional(),
  msg_sequence: z.number().int().optional(),
});

export const STATE_SCOPES = ['conversation', 'actor', 'subject', 'runner'] as const;

/** Payload schemas of the known result types (strict: extra keys are invalid). */
export const RESULT_PAYLOADS = {
  'message.delta': z.strictObject({ chunk: messageChunkSchema }),
  'message.completed': z.strictObject({ message: messageSchema }),
  'tool.call.started': z.strictObject({
    tool_call_id: z.string().min(1),
    tool_name: z.string().min(1),
    parameters: json.default({}),
  }),
  'tool.call.completed': z.strictObject({
    tool_call_id: z.string().min(1),
    tool_name: z.string().min(1),
    result: json.nullable().optional(),
    error: z.string().nullable().optional(),
  }),
  'artifact.created': json,
  'state.updated': z.strictObject({ scope: z.enum(STATE_SCOPES), key: z.string().min(1).max(255), value: z.unknown() }),
  'action.requested': z.strictObject({
    action: z.string().min(1),
    target: json.nullable().optional(),
    payload: json.nullable().optional(),
  }),
  'run.completed': z.strictObject({ finish_reason: z.string().default('stop'), message: messageSchema.optional() }),
  'run.failed': z.strictObject({
    error: z.string(),
    code: z.string().default('runner.error'),
    retryable: z.boolean().default(false),
  }),
} as const;

export type KnownResultType = keyof typeof RESULT_PAYLOADS;
export const TERMINAL_RESULT_TYPES: readonly string[] = ['run.completed', 'run.failed'];

export function isKnownResultType(type: string): type is KnownResultType {
  return Object.prototype.hasOwnProperty.call(RESULT_PAYLOADS, type);
}

export type PayloadCheck = { ok: true; data: Record<string, unknown> } | { ok: false; reason: string };

/** Validates the `data` of a known result type; unknown types are accepted as they are. */
export function validateResultPayload(type: string, data: unknown): PayloadCheck {
  if (!isKnownResultType(type)) {
    return { ok: true, data: (data ?? {}) as Record<string, unknown> };
  }
  const parsed = RESULT_PAYLOADS[type].safeParse(data ?? {});
  if (!parsed.success) {
    return { ok: false, reason: describeIssues(parsed.error, 'data') };
  }
  return { ok: true, data: parsed.data };
}

/** Usage `{prompt_tokens, completion_tokens, total_tokens, ...extra}`; absent means unknown. */
export const usageSchema = z.looseObject({
  prompt_tokens: z.number().int().nonnegative().nullable().optional(),
  completion_tokens: z.number().int().nonnegative().nullable().optional(),
  total_tokens: z.number().int().nonnegative().nullable().optional(),
});

/**
 * One result as a runner sends it (docs/protocol.md#results), after the gateway converted it from
 * the wire: `data` and `usage` are JSON objects (absent when the runner sent none), `sequence` and
 * `timestamp` integers when set. The result rules (libs/runs) decide what is kept.
 */
export const runnerResultSchema = z.object({
  run_id: z.string(),
  type: z.string(),
  data: json.optional(),
  usage: json.optional(),
  sequence: z.number().int().optional(),
  timestamp: z.number().int().optional(),
});
export type RunnerResult = z.infer<typeof runnerResultSchema>;
