import type { ConfigSchemaItem, JsonObject, RunContext, RunIO } from '@runner-host/runner-sdk';

/*
 * What the reference runners share (docs/reference-runners.md): reading a run's config against
 * the runner's config_schema (defaults applied, a field-named error for a bad value), and the
 * conversation's earlier messages from the host's history API.
 */

/** A config value the runner cannot use; its message names the field (`runner_config.<name>: <rule>`). */
export class ConfigError extends Error {
  constructor(
    readonly field: string,
    rule: string,
  ) {
    super(`runner_config.${field}: ${rule}`);
  }
}

export const configError = (field: string, rule: string) => new ConfigError(field, rule);

const TYPE_OF: Record<string, string> = {
  string: 'string',
  text: 'string',
  secret: 'string',
  integer: 'number',
  number: 'number',
  boolean: 'boolean',
  object: 'object',
};

/**
 * The run's config with the schema's defaults applied. The host checks a binding's config against
 * the manifest's config_schema when it is saved; this is the runner's own check of what it reads
 * (a config written before the schema changed, the test kit).
 */
export function readConfig<T>(config: JsonObject, schema: ConfigSchemaItem[]): T {
  const out: Record<string, unknown> = { ...config };
  for (const item of schema) {
    const value = config[item.name] ?? item.default ?? null;
    if (value === null) {
      if (item.required) {
        throw configError(item.name, 'is required');
      }
      out[item.name] = value;
      continue;
    }
    const want = TYPE_OF[item.type];
    const isObject = want === 'object' && typeof value === 'object' && !Array.isArray(value);
    if (want && !isObject && typeof value !== want) {
      throw configError(item.name, `must be of type ${item.type}`);
    }
    if (item.type === 'integer' && !Number.isInteger(value)) {
      throw configError(item.name, 'must be an integer');
    }
    if (item.type === 'select' && Array.isArray(item.options)) {
      const allowed = item.options.map((o) => o.name);
      if (!allowed.includes(value)) {
        throw configError(item.name, `must be one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}`);
      }
    }
    out[item.name] = value;
  }
  return out as T;
}

export interface HistoryMessage {
  role: 'user' | 'assistant';
  content: string;
}

/**
 * The conversation's messages before this run's input, oldest first, at most `limit`, read with
 * the host's history API (`history_page`); [] when the run has no history or the API is not
 * granted. Only transcript items up to the context's `transcript_seq` (the conversation as it was
 * when the event arrived) are kept, so the run's own input is not repeated.
 */
export async function historyMessages(ctx: RunContext, io: RunIO, limit: number): Promise<HistoryMessage[]> {
  const access = ctx.context;
  if (limit <= 0 || !access?.has_history_before || access.available_apis?.history_page !== true) {
    return [];
  }
  const page = await io.host.history.page({ limit: Math.min(100, limit + 1), direction: 'backward' });
  const upTo = access.transcript_seq;
  const eventId = ctx.event?.event_id;
  return page.items
    .filter((item) => (upTo === undefined ? item.event_id !== eventId : Number(item.seq) <= upTo))
    .filter(
      (item) => (item.item_type ?? 'message') === 'message' && (item.role === 'user' || item.role === 'assistant'),
    )
    .slice(0, limit)
    .reverse()
    .map((item) => ({ role: item.role as HistoryMessage['role'], content: itemText(item) }));
}

function itemText(item: JsonObject): string {
  const full = item.content_json as JsonObject | null | undefined;
  if (full && typeof full.content === 'string') {
    return full.content;
  }
  if (full && Array.isArray(full.content)) {
    return full.content
      .map((part) =>
        part && typeof part === 'object' && !Array.isArray(part) && typeof part.text === 'string' ? part.text : '',
      )
      .join('');
  }
  return typeof item.content === 'string' ? item.content : '';
}
