import { z } from 'zod';
import { ACTION_STYLES, FIELD_TYPES, type InteractionDeliveryCapabilities } from '@libs/delivery';
import { describeIssues } from '@libs/protocol';

/**
 * Structured interaction entities and their limits (docs/interactions.md#the-request). Strict:
 * unknown keys are errors, as every limit is, with the field named. The field types and action
 * styles live with the surfaces' capabilities that name them (libs/delivery, below this lib).
 */
export { ACTION_STYLES, FIELD_TYPES };
export const INTERACTION_KINDS = ['form', 'confirmation', 'choice'] as const;

/** Default expiry of a request without `expires_at`, and the longest one allowed. */
export const DEFAULT_EXPIRY_MS = 30 * 60 * 1000;
export const MAX_EXPIRY_MS = 24 * 60 * 60 * 1000;
/** The serialised request, at most. */
export const MAX_REQUEST_BYTES = 256 * 1024;

const str = (min: number, max: number) => z.string().min(min).max(max);

export const interactionOptionSchema = z.strictObject({
  value: str(1, 512),
  label: str(1, 512),
  description: z.string().max(2000).nullable().optional(),
});

export const interactionFieldSchema = z.strictObject({
  id: str(1, 128),
  label: str(1, 512),
  type: z.enum(FIELD_TYPES),
  required: z.boolean().default(false),
  options: z.array(interactionOptionSchema).max(100).default([]),
  placeholder: z.string().max(2000).nullable().optional(),
  default: z.unknown().optional(),
});

export const interactionActionSchema = z.strictObject({
  id: str(1, 128),
  label: str(1, 512),
  style: z.enum(ACTION_STYLES).default('default'),
});

export const interactionRequestSchema = z.strictObject({
  interaction_id: str(1, 255),
  kind: z.enum(INTERACTION_KINDS).default('form'),
  title: str(1, 1000),
  description: z.string().max(10_000).nullable().optional(),
  fields: z.array(interactionFieldSchema).max(50).default([]),
  actions: z.array(interactionActionSchema).max(20).default([]),
  /** Epoch seconds. */
  expires_at: z.number().int().nullable().optional(),
  fallback_text: str(1, 20_000),
});

export type InteractionRequest = z.infer<typeof interactionRequestSchema>;
export type InteractionField = z.infer<typeof interactionFieldSchema>;

export type RequestCheck =
  { ok: true; request: InteractionRequest; expires_at_ms: number } | { ok: false; field: string; reason: string };

function duplicate(values: string[]): number {
  const seen = new Set<string>();
  return values.findIndex((v) => (seen.has(v) ? true : (seen.add(v), false)));
}

/**
 * A runner's `action.requested` payload as an interaction request: the entity limits, unique
 * field ids, action ids and option values, options for select fields, and the expiry (default
 * now + 30 min, in the future, at most now + 24 h). `field` names what broke a rule, under `payload`.
 */
export function parseInteractionRequest(payload: unknown, nowMs: number): RequestCheck {
  const parsed = interactionRequestSchema.safeParse(payload ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      ok: false,
      field: ['payload', ...issue.path.map(String)].join('.'),
      reason: describeIssues(parsed.error, 'payload'),
    };
  }
  const r = parsed.data;
  const bad = (field: string, rule: string): RequestCheck => ({
    ok: false,
    field: `payload.${field}`,
    reason: `payload.${field}: ${rule}`,
  });
  const dupField = duplicate(r.fields.map((f) => f.id));
  if (dupField >= 0) {
    return bad(`fields.${dupField}.id`, 'field ids must be unique');
  }
  const dupAction = duplicate(r.actions.map((a) => a.id));
  if (dupAction >= 0) {
    return bad(`actions.${dupAction}.id`, 'action ids must be unique');
  }
  for (const [i, f] of r.fields.entries()) {
    if ((f.type === 'select' || f.type === 'multiselect') && f.options.length === 0) {
      return bad(`fields.${i}.options`, `a ${f.type} field needs at least one option`);
    }
    const dupOption = duplicate(f.options.map((o) => o.value));
    if (dupOption >= 0) {
      return bad(`fields.${i}.options.${dupOption}.value`, 'option values must be unique within a field');
    }
  }
  let expiresAtMs = nowMs + DEFAULT_EXPIRY_MS;
  if (r.expires_at !== null && r.expires_at !== undefined) {
    expiresAtMs = r.expires_at * 1000;
    if (expiresAtMs <= nowMs) {
      return bad('expires_at', 'must be in the future (epoch seconds)');
    }
    if (expiresAtMs > nowMs + MAX_EXPIRY_MS) {
      return bad('expires_at', 'must be at most 24 hours ahead');
    }
  }
  const size = Buffer.byteLength(JSON.stringify(r));
  if (size > MAX_REQUEST_BYTES) {
    return { ok: false, field: 'payload', reason: `payload: the request is ${size} bytes, limit ${MAX_REQUEST_BYTES}` };
  }
  return { ok: true, request: { ...r, expires_at: Math.floor(expiresAtMs / 1000) }, expires_at_ms: expiresAtMs };
}

/**
 * `form` when the surface declared interaction capabilities that cover the request (field types,
 * action styles, field count), else `fallback`: the platform shows `fallback_text`.
 */
export function presentationFor(
  request: InteractionRequest,
  caps: InteractionDeliveryCapabilities | null | undefined,
): 'form' | 'fallback' {
  if (!caps) {
    return 'fallback';
  }
  const types = caps.field_types ?? [...FIELD_TYPES];
  const styles = caps.action_styles ?? [...ACTION_STYLES];
  const fits =
    request.fields.every((f) => types.includes(f.type)) &&
    request.actions.every((a) => styles.includes(a.style)) &&
    (caps.max_fields === undefined || request.fields.length <= caps.max_fields);
  return fits ? 'form' : 'fallback';
}
