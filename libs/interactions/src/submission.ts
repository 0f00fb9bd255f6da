import type { InteractionField, InteractionRequest } from './request';

/** What a platform submits for an interaction (the token is checked before this). */
export interface SubmissionInput {
  action_id?: string | null;
  values?: Record<string, unknown>;
}

/** The submission as the runner receives it (`input.interaction`); `submitted_at` is the host's clock. */
export interface InteractionSubmission {
  interaction_id: string;
  action_id: string | null;
  values: Record<string, unknown>;
  /** Epoch seconds. */
  submitted_at: number;
}

export type SubmissionCheck =
  | { ok: true; action_id: string | null; values: Record<string, unknown> }
  | { ok: false; field: string; reason: string };

const MAX_TEXT = 20_000;
const MAX_FILE_REF = 2000;
export const MAX_SUBMISSION_BYTES = 256 * 1024;

function empty(v: unknown): boolean {
  return v === undefined || v === null || v === '' || (Array.isArray(v) && v.length === 0);
}

/** One value against its field: the rule it breaks, or null. */
function checkValue(f: InteractionField, v: unknown): string | null {
  const allowed = f.options.map((o) => o.value);
  switch (f.type) {
    case 'text':
    case 'textarea':
      return typeof v !== 'string'
        ? 'must be a string'
        : v.length > MAX_TEXT
          ? `must be at most ${MAX_TEXT} characters`
          : null;
    case 'select':
      return typeof v !== 'string' || !allowed.includes(v) ? `must be one of the options: ${allowed.join(', ')}` : null;
    case 'multiselect':
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) {
        return 'must be a list of option values';
      }
      if (new Set(v).size !== v.length) {
        return 'must not repeat a value';
      }
      return v.every((x) => allowed.includes(x)) ? null : `each value must be one of: ${allowed.join(', ')}`;
    case 'number':
      return typeof v !== 'number' || !Number.isFinite(v) ? 'must be a finite number' : null;
    case 'boolean':
      return typeof v !== 'boolean' ? 'must be true or false' : null;
    case 'file':
      return typeof v !== 'string' || v.length === 0 || v.length > MAX_FILE_REF
        ? `must be a file reference (a string of 1-${MAX_FILE_REF} characters)`
        : null;
  }
}

/**
 * A submission against the stored request (docs/interactions.md#submitting): the action must be
 * one of the request's, every value must belong to a field of it and fit its type and options,
 * required fields must have a value. The first broken rule is returned, naming the field
 * (`values.<field id>` or `action_id`).
 */
export function validateSubmission(request: InteractionRequest, input: SubmissionInput): SubmissionCheck {
  const actionId = input.action_id ?? null;
  if (actionId !== null) {
    if (typeof actionId !== 'string' || !request.actions.some((a) => a.id === actionId)) {
      const ids = request.actions.map((a) => a.id);
      return {
        ok: false,
        field: 'action_id',
        reason: ids.length
          ? `action_id: must be one of the request's actions: ${ids.join(', ')}`
          : 'action_id: the request has no actions',
      };
    }
  }
  const values = input.values ?? {};
  if (typeof values !== 'object' || values === null || Array.isArray(values)) {
    return { ok: false, field: 'values', reason: 'values: must be an object keyed by field id' };
  }
  for (const key of Object.keys(values)) {
    if (!request.fields.some((f) => f.id === key)) {
      return { ok: false, field: `values.${key}`, reason: `values.${key}: the request has no such field` };
    }
  }
  const out: Record<string, unknown> = {};
  for (const f of request.fields) {
    const v = values[f.id];
    if (empty(v)) {
      if (f.required) {
        return { ok: false, field: `values.${f.id}`, reason: `values.${f.id}: required` };
      }
      continue;
    }
    const rule = checkValue(f, v);
    if (rule) {
      return { ok: false, field: `values.${f.id}`, reason: `values.${f.id}: ${rule}` };
    }
    out[f.id] = v;
  }
  if (Buffer.byteLength(JSON.stringify(out)) > MAX_SUBMISSION_BYTES) {
    return { ok: false, field: 'values', reason: `values: at most ${MAX_SUBMISSION_BYTES} bytes` };
  }
  return { ok: true, action_id: actionId, values: out };
}

/** The text of the event a submission starts: the action's id, else the values in short. */
export function submissionText(request: InteractionRequest, s: { action_id: string | null; values: object }): string {
  if (s.action_id !== null) {
    return s.action_id;
  }
  const text = JSON.stringify(s.values);
  return text === '{}' ? request.interaction_id : text;
}
