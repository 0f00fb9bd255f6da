import type { InteractionSubmission } from './submission';

/*
 * MCP elicitation as a structured interaction (docs/interactions.md#mcp-elicitation): the server's
 * `elicitation/create` (form mode) becomes a form — one field per property of its flat
 * `requestedSchema`, actions `accept` and `decline` — and the submission becomes its answer.
 */

export const ELICITATION_ORIGIN = 'mcp.elicitation';
export const ACCEPT_ACTION = 'accept';
export const DECLINE_ACTION = 'decline';

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** Options of a string enum (`enum` + `enumNames`, or `oneOf`/`anyOf` of `{const, title}`). */
function optionsOf(p: Json): { value: string; label: string }[] | null {
  if (Array.isArray(p.enum)) {
    const names = Array.isArray(p.enumNames) ? p.enumNames : [];
    return p.enum.map((v, i) => ({ value: String(v), label: String(names[i] ?? v) }));
  }
  const alts = Array.isArray(p.oneOf) ? p.oneOf : Array.isArray(p.anyOf) ? p.anyOf : null;
  if (alts) {
    return alts.filter(isObject).map((a) => ({ value: String(a.const), label: String(a.title ?? a.const) }));
  }
  return null;
}

function fieldOf(id: string, p: Json, required: boolean): Json {
  const base: Json = {
    id,
    label: cut(typeof p.title === 'string' && p.title ? p.title : id, 512),
    required,
    ...(typeof p.description === 'string' && p.description ? { placeholder: cut(p.description, 2000) } : {}),
    ...(p.default !== undefined ? { default: p.default } : {}),
  };
  if (p.type === 'boolean') {
    return { ...base, type: 'boolean' };
  }
  if (p.type === 'number' || p.type === 'integer') {
    return { ...base, type: 'number' };
  }
  if (p.type === 'array' && isObject(p.items)) {
    const options = optionsOf(p.items);
    if (options) {
      return { ...base, type: 'multiselect', options };
    }
  }
  const options = optionsOf(p);
  return options ? { ...base, type: 'select', options } : { ...base, type: 'text' };
}

/** The interaction request of an elicitation (to be checked by parseInteractionRequest). */
export function elicitationRequest(params: Json, interactionId: string): Json {
  const message = typeof params.message === 'string' && params.message.trim() ? params.message : 'The tool asks';
  const schema = isObject(params.requestedSchema) ? params.requestedSchema : {};
  const properties = isObject(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required.map(String) : []);
  const fields = Object.entries(properties)
    .filter(([, p]) => isObject(p))
    .map(([id, p]) => fieldOf(id, p as Json, required.has(id)));
  const lines = fields.map((f) => `- ${String(f.label)}${f.required ? ' (required)' : ''}`).join('\n');
  return {
    interaction_id: interactionId,
    kind: 'form',
    title: cut(message, 1000),
    description: cut(message, 10_000),
    fields,
    actions: [
      { id: ACCEPT_ACTION, label: 'Submit', style: 'primary' },
      { id: DECLINE_ACTION, label: 'Decline', style: 'default' },
    ],
    expires_at: null,
    fallback_text: cut(lines ? `${message}\n${lines}` : message, 20_000),
  };
}

/** The MCP answer: `decline` for that action, `cancel` when it ended unanswered, else `accept` with the values. */
export function elicitationResult(s: InteractionSubmission | null): {
  action: 'accept' | 'decline' | 'cancel';
  content?: Record<string, string | number | boolean | string[]>;
} {
  if (s === null) {
    return { action: 'cancel' };
  }
  if (s.action_id === DECLINE_ACTION) {
    return { action: 'decline' };
  }
  return { action: 'accept', content: s.values as Record<string, string | number | boolean | string[]> };
}
