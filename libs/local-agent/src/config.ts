import { z } from 'zod';
import type { ChatMessage, JsonObject } from './host-port';

/*
 * The runner config (docs/local-agent.md#configuration). Parsing is defensive: a value of the wrong type never fails
 * the run, it falls back to the field's default (every field is `.catch(default)`). The host
 * validates the stored config against CONFIG_SCHEMA at binding time; this is the runtime reading.
 */

export const NONE_SENTINEL = '__none__';
export const DEFAULT_PROMPT: ChatMessage[] = [{ role: 'system', content: 'You are a helpful assistant.' }];

export const DEFAULTS = {
  timeout: 300,
  'remove-think': false,
  'date-grounding': true,
  'retrieval-top-k': 5,
  'rerank-top-k': 5,
  'max-tool-iterations': 100,
  'tool-execution-mode': 'parallel',
  'max-tool-result-chars': 20000,
  'context-history-fetch-limit': 50,
  'context-window-tokens': 200000,
  'context-reserve-tokens': 16384,
  'context-keep-recent-tokens': 20000,
  'context-summary-tokens': 8000,
} as const;

/** A positive integer (not a boolean, not a numeric string). */
const positiveInt = (def: number) => z.number().int().min(1).catch(def);
const nonNegativeInt = (def: number) => z.number().int().min(0).catch(def);
/** Only literal booleans count; anything else is the default. */
const bool = (def: boolean) => z.boolean().catch(def);

const modelIds = z.array(z.unknown()).catch([]);
const modelSchema = z
  .union([
    z.string().transform((primary) => ({ primary, fallbacks: [] as unknown[] })),
    z.looseObject({ primary: z.unknown().optional(), fallbacks: modelIds.optional() }),
  ])
  .nullable()
  .catch(null);

/** `timeout`: missing, negative, boolean or non-integer → 300; 0 or null → no local deadline. */
const timeoutSchema = z
  .union([z.null(), z.number().int().min(0)])
  .transform((v) => (v === 0 ? null : v))
  .catch(DEFAULTS.timeout);

export const agentConfigSchema = z.object({
  model: modelSchema,
  timeout: timeoutSchema,
  prompt: z.unknown().optional(),
  'remove-think': bool(DEFAULTS['remove-think']),
  'knowledge-bases': z.array(z.unknown()).catch([]),
  'date-grounding': bool(DEFAULTS['date-grounding']),
  'retrieval-top-k': positiveInt(DEFAULTS['retrieval-top-k']),
  'rerank-model': z.unknown().optional(),
  'rerank-top-k': positiveInt(DEFAULTS['rerank-top-k']),
  'max-tool-iterations': positiveInt(DEFAULTS['max-tool-iterations']),
  'tool-execution-mode': z.enum(['parallel', 'serial']).catch(DEFAULTS['tool-execution-mode']),
  'max-tool-result-chars': positiveInt(DEFAULTS['max-tool-result-chars']),
  'context-history-fetch-limit': positiveInt(DEFAULTS['context-history-fetch-limit']),
  'context-window-tokens': nonNegativeInt(DEFAULTS['context-window-tokens']),
  'context-reserve-tokens': nonNegativeInt(DEFAULTS['context-reserve-tokens']),
  'context-keep-recent-tokens': nonNegativeInt(DEFAULTS['context-keep-recent-tokens']),
  'context-summary-tokens': nonNegativeInt(DEFAULTS['context-summary-tokens']),
  /** Tool approval (docs/interactions.md#tool-approval-local-agent): tool names, tool source ids, expiry seconds. */
  'approval-tools': z.array(z.unknown()).catch([]),
  'approval-sources': z.array(z.unknown()).catch([]),
  'approval-expires-in': z.number().int().min(1).max(86_400).nullable().catch(null),
});
export type AgentConfig = z.infer<typeof agentConfigSchema>;

/** The runtime reading of a runner config: never throws. */
export function parseAgentConfig(raw: unknown): AgentConfig {
  const obj = raw && typeof raw === 'object' && !Array.isArray(raw) ? (raw as JsonObject) : {};
  return agentConfigSchema.parse(obj);
}

const cleanId = (v: unknown): string | null => {
  if (typeof v !== 'string') {
    return null;
  }
  const id = v.trim();
  return id === '' || id === NONE_SENTINEL ? null : id;
};

/** Ordered, trimmed, deduplicated ids that are in `authorized` (config order kept). */
function authorizedIds(ids: unknown[], authorized: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const raw of ids) {
    const id = cleanId(raw);
    if (id !== null && authorized.has(id) && !out.includes(id)) {
      out.push(id);
    }
  }
  return out;
}

/** Model candidates: primary then fallbacks, only authorized ones (docs/local-agent.md#configuration). */
export function modelCandidates(config: AgentConfig, authorized: ReadonlySet<string>): string[] {
  const m = config.model;
  if (!m) {
    return [];
  }
  return authorizedIds([m.primary, ...(m.fallbacks ?? [])], authorized);
}

/** Configured knowledge bases that are authorized, in config order. The singular key is not read. */
export function knowledgeBaseIds(config: AgentConfig, authorized: ReadonlySet<string>): string[] {
  return authorizedIds(config['knowledge-bases'], authorized);
}

/** The rerank model (null: no rerank) and the top-k that goes with it. */
export function rerankConfig(config: AgentConfig): { model: string | null; topK: number } {
  return { model: cleanId(config['rerank-model']), topK: config['rerank-top-k'] };
}

/** The static prompt (LP): strings, lists and names kept; malformed content is an error. */
export function staticPrompt(config: AgentConfig): ChatMessage[] {
  const raw = config.prompt;
  if (raw === undefined || raw === null) {
    return DEFAULT_PROMPT.map((m) => ({ ...m }));
  }
  if (!Array.isArray(raw)) {
    throw new Error('prompt: must be a list of {role, content}');
  }
  return raw.map((item, i) => promptItem(item, i));
}

function promptItem(item: unknown, i: number): ChatMessage {
  if (!item || typeof item !== 'object' || Array.isArray(item)) {
    throw new Error(`prompt[${i}]: must be an object {role, content}`);
  }
  const { role, content, name } = item as JsonObject;
  if (content !== undefined && content !== null && typeof content !== 'string' && !Array.isArray(content)) {
    throw new Error(`prompt[${i}].content: must be a string or a list of content elements`);
  }
  const msg: ChatMessage = {
    role: typeof role === 'string' && role !== '' ? role : 'system',
    content: structuredClone((content ?? '') as ChatMessage['content']),
  };
  if (typeof name === 'string') {
    msg.name = name;
  }
  return msg;
}
