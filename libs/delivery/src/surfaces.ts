import {
  INT32_MAX,
  OPEN_MAP_MAX_BYTES,
  boolean,
  component,
  integer,
  list,
  object,
  oneOf,
  openMap,
  optional,
  text,
  type Infer,
} from '@libs/protocol';
import type { SizeUnit } from './split';

/** The field types of a structured interaction (docs/interactions.md#the-request). */
export const FIELD_TYPES = ['text', 'textarea', 'select', 'multiselect', 'number', 'boolean', 'file'] as const;
/** The action styles of a structured interaction (docs/interactions.md#the-request). */
export const ACTION_STYLES = ['default', 'primary', 'danger'] as const;

/** Runner Protocol v1 InteractionDeliveryCapabilities. */
export interface InteractionDeliveryCapabilities {
  field_types?: string[];
  action_styles?: string[];
  supports_updates?: boolean;
  max_fields?: number;
}

/** What a surface renders of an interaction (`delivery.interactions` of POST /v1/events: docs/interactions.md#delivery). */
export const interactionCapabilitiesSchema = component(
  'InteractionCapabilitiesDto',
  object({
    field_types: optional(
      list(oneOf(FIELD_TYPES), FIELD_TYPES.length, { description: 'Field types it renders (default all)' }),
    ),
    action_styles: optional(
      list(oneOf(ACTION_STYLES), ACTION_STYLES.length, { description: 'Action styles it renders (default all)' }),
    ),
    supports_updates: optional(
      boolean({ description: 'It can update a shown interaction (read-only after the outcome)' }),
    ),
    max_fields: optional(integer(0, 50, { description: 'Most fields it renders in one interaction' })),
  }),
);

/**
 * The `delivery` part of the body of POST /v1/events (docs/api.md#events): the event schema
 * (libs/runs event-submission.ts) takes it from here, and DeliveryRequest is its type.
 */
export const deliveryRequestSchema = component(
  'DeliveryDto',
  object({
    surface: optional(text(64, false, { default: 'api' })),
    reply_target: optional(openMap(OPEN_MAP_MAX_BYTES)),
    supports_streaming: optional(boolean({ default: true })),
    supports_edit: optional(boolean({ default: false })),
    supports_reaction: optional(boolean({ default: false })),
    max_message_size: optional(integer(1, INT32_MAX)),
    platform_capabilities: optional(openMap(OPEN_MAP_MAX_BYTES)),
    interactions: optional(
      interactionCapabilitiesSchema,
      'What the surface renders of an interaction; absent: fallback_text only',
    ),
  }),
);

/**
 * Surface presets (docs/delivery.md#the-runs-surface, issue 10): the platforms people bridge, each
 * with its message size limit, whether the host may edit a sent message, whether streaming in
 * several messages is welcome, and the least interval between edits the platform's rate limits
 * tolerate. An event names one in `delivery.surface`; any `delivery` field it sets overrides the
 * preset's. Limits are the platforms' documented ones for a plain text message
 * (docs/delivery.md#the-runs-surface).
 */
export interface SurfacePreset {
  supports_streaming: boolean;
  supports_edit: boolean;
  max_message_size: number | null;
  /** How the platform counts `max_message_size`. */
  size_unit: SizeUnit;
  /** Floor of the interval between two edits of one message (platform rate limit). */
  edit_interval_ms: number;
}

export const SURFACE_PRESETS = {
  /** sendMessage text: 4096 characters (UTF-16, after entity parsing); editMessageText ~1/s per chat. */
  telegram: {
    supports_streaming: true,
    supports_edit: true,
    max_message_size: 4096,
    size_unit: 'chars',
    edit_interval_ms: 1000,
  },
  /** chat.postMessage text is truncated past 40,000 characters; chat.update is Tier 3 (~50/min). */
  slack: {
    supports_streaming: true,
    supports_edit: true,
    max_message_size: 40_000,
    size_unit: 'chars',
    edit_interval_ms: 1200,
  },
  /** Message content: 2000 characters; edits share the 5 per 5 s per-channel bucket. */
  discord: {
    supports_streaming: true,
    supports_edit: true,
    max_message_size: 2000,
    size_unit: 'chars',
    edit_interval_ms: 1000,
  },
  /** Cloud API text body: 4096 characters; a business message cannot be edited. */
  whatsapp: {
    supports_streaming: false,
    supports_edit: false,
    max_message_size: 4096,
    size_unit: 'chars',
    edit_interval_ms: 0,
  },
  /** Feishu/Lark: messages are patchable (cards; 5 QPS per message); text kept under 30,000 characters. */
  feishu: {
    supports_streaming: true,
    supports_edit: true,
    max_message_size: 30_000,
    size_unit: 'chars',
    edit_interval_ms: 500,
  },
  /** WeCom application message: text content at most 2048 bytes (UTF-8); no edit. */
  wecom: {
    supports_streaming: false,
    supports_edit: false,
    max_message_size: 2048,
    size_unit: 'bytes',
    edit_interval_ms: 0,
  },
  /** QQ bot: a few passive replies per user message and no edit: one final message; 2000 characters kept. */
  qq: {
    supports_streaming: false,
    supports_edit: false,
    max_message_size: 2000,
    size_unit: 'chars',
    edit_interval_ms: 0,
  },
  /** A plain webhook bot: no streaming, no edit, no limit. */
  webhook: {
    supports_streaming: false,
    supports_edit: false,
    max_message_size: null,
    size_unit: 'chars',
    edit_interval_ms: 0,
  },
} as const satisfies Record<string, SurfacePreset>;

/** `lark` is Feishu's international name. */
const ALIASES: Record<string, keyof typeof SURFACE_PRESETS> = { lark: 'feishu' };

export type SurfaceName = keyof typeof SURFACE_PRESETS;

export function surfacePreset(name: string | undefined): SurfacePreset | null {
  if (name === undefined) {
    return null;
  }
  const key = name.toLowerCase();
  const found = (SURFACE_PRESETS as Record<string, SurfacePreset>)[ALIASES[key] ?? key];
  return found ?? null;
}

/** What an event says about its surface (the `delivery` of POST /v1/events): deliveryRequestSchema's type. */
export type DeliveryRequest = Infer<typeof deliveryRequestSchema>;

/** The run's `delivery` context (Runner Protocol v1 DeliveryContext), as the runner and the normaliser see it. */
export interface DeliveryContext {
  surface: string;
  reply_target?: Record<string, unknown>;
  supports_streaming: boolean;
  supports_edit: boolean;
  supports_reaction: boolean;
  max_message_size?: number;
  platform_capabilities: Record<string, unknown>;
  interactions?: InteractionDeliveryCapabilities;
}

/**
 * The run's delivery context: the named surface's preset, each field the event sets overriding
 * it; without a preset the protocol defaults (streaming, no edit, no limit).
 */
export function deliveryContextOf(req: DeliveryRequest | undefined): DeliveryContext {
  const preset = surfacePreset(req?.surface);
  const max = req?.max_message_size ?? preset?.max_message_size ?? undefined;
  return {
    surface: req?.surface ?? 'api',
    reply_target: req?.reply_target,
    supports_streaming: req?.supports_streaming ?? preset?.supports_streaming ?? true,
    supports_edit: req?.supports_edit ?? preset?.supports_edit ?? false,
    supports_reaction: req?.supports_reaction ?? false,
    max_message_size: max === null ? undefined : max,
    platform_capabilities: req?.platform_capabilities ?? {},
    ...(req?.interactions ? { interactions: req.interactions } : {}),
  };
}
