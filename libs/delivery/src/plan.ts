import type { DeliveryPolicy } from '@libs/agents';
import { surfacePreset, type DeliveryContext, type InteractionDeliveryCapabilities } from './surfaces';
import { MIN_LIMIT, type SizeUnit } from './split';

/** How a run's results become messages: `edit` one streamed message, send `parts`, or only the `final` one. */
export type DeliveryMode = 'edit' | 'parts' | 'final';

export type NoticeKind = 'failed' | 'cancelled' | 'timeout';

/** Everything the normaliser needs to know about a run's surface, decided once at its start. */
export interface DeliveryPlan {
  surface: string;
  mode: DeliveryMode;
  edit_interval_ms: number;
  min_edit_chars: number;
  max_message_size: number | null;
  size_unit: SizeUnit;
  reply_target: Record<string, unknown> | null;
  /** Per kind: `true` the default text, a custom text, or `false` for none. */
  notices: Record<NoticeKind, boolean | string>;
  webhook: { url: string; secret_env: string } | null;
  /** What the surface renders of an interaction; null: only `fallback_text`. */
  interactions: InteractionDeliveryCapabilities | null;
}

/**
 * The plan of a run from its agent's delivery policy (defaults applied) and its delivery context:
 * the context decides what the surface can do, the policy what the agent wants of it.
 */
export function deliveryPlan(policy: DeliveryPolicy, ctx: DeliveryContext): DeliveryPlan {
  const preset = surfacePreset(ctx.surface);
  const unit: SizeUnit = preset?.size_unit ?? 'chars';
  const limits = [policy.max_message_size, ctx.max_message_size ?? null].filter((n): n is number => n !== null);
  const max = limits.length > 0 ? Math.max(MIN_LIMIT[unit] * 4, Math.min(...limits)) : null;
  const streaming = ctx.supports_streaming && policy.enable_streaming;
  const mode: DeliveryMode = !streaming ? 'final' : ctx.supports_edit ? 'edit' : policy.streaming_mode;
  return {
    surface: ctx.surface,
    mode,
    edit_interval_ms: Math.max(policy.edit_interval_ms, preset?.edit_interval_ms ?? 0),
    min_edit_chars: policy.min_edit_chars,
    max_message_size: max,
    size_unit: unit,
    reply_target: ctx.reply_target ?? null,
    notices: {
      failed: policy.failure_notice && (policy.notice_texts.failed ?? true),
      cancelled: policy.cancel_notice && (policy.notice_texts.cancelled ?? true),
      timeout: policy.timeout_notice && (policy.notice_texts.timeout ?? true),
    },
    webhook: policy.webhook,
    interactions: ctx.interactions ?? null,
  };
}
