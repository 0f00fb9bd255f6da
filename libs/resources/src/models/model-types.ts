/** What a registered model is: an OpenAI-compatible chat endpoint or a `/rerank` endpoint. */
export const MODEL_KINDS = ['chat', 'rerank'] as const;
export type ModelKind = (typeof MODEL_KINDS)[number];

/** js-tiktoken encodings a chat model may name for count_tokens. */
export const TOKENIZERS = ['o200k_base', 'cl100k_base', 'p50k_base', 'r50k_base'] as const;
export type TokenizerName = (typeof TOKENIZERS)[number];

/**
 * A model's provider label, and its rule as the 400 states it after the field name; the admin DTO
 * (apps/host) is the one rule that checks it.
 */
export const PROVIDER_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;
export const PROVIDER_RULE = 'must be 1-64 lower-case letters, digits, ".", "_" or "-"';

/**
 * The bounds of a model's fields. The admin DTO (apps/host/src/http/dto/models.dto.ts) checks
 * them at the HTTP edge; validateModel (model-validation.ts) reads model_name's and base_url's,
 * whose rules it keeps for the quick start's env values, and checkModelId model_id's.
 */
export const MODEL_LIMITS = {
  /** `model_id`: 1-128 characters (MODEL_ID_PATTERN). */
  model_id: 128,
  model_name: 255,
  base_url: 1000,
  context_window: 100_000_000,
  max_output_tokens: 10_000_000,
} as const;

/** A host environment variable name (a model's `api_key_env`) and its rule: defined once in libs/config. */
export { ENV_NAME_PATTERN, ENV_NAME_RULE } from '@libs/config';

export interface ModelAbilities {
  tool_calling: boolean;
  vision: boolean;
  streaming: boolean;
}

export const DEFAULT_ABILITIES: ModelAbilities = { tool_calling: true, vision: false, streaming: true };

/**
 * A stored model's abilities (written by `validateModel`, so every flag is a boolean); a flag
 * missing from an older row reads as its default.
 */
export function storedAbilities(stored: Readonly<Record<string, unknown>> | null | undefined): ModelAbilities {
  const flag = (name: keyof ModelAbilities): boolean => {
    const v = stored?.[name];
    return typeof v === 'boolean' ? v : DEFAULT_ABILITIES[name];
  };
  return { tool_calling: flag('tool_calling'), vision: flag('vision'), streaming: flag('streaming') };
}

/** Abilities as the JSON column stores them (`{}` for a model kind without abilities, e.g. rerank). */
export function abilitiesJson(a: ModelAbilities | Record<string, never>): Record<string, boolean> {
  return 'tool_calling' in a ? { tool_calling: a.tool_calling, vision: a.vision, streaming: a.streaming } : {};
}

/**
 * A provider's usage object as JSON: the `openai` types declare interfaces (no index signature),
 * and what a compatible server sends may carry more fields; the JSON values of it are kept.
 */
export function usageJson(usage: object | null | undefined): Record<string, unknown> | null {
  return usage ? { ...usage } : null;
}

/** A field some OpenAI-compatible servers add to a message or delta (e.g. `reasoning_content`). */
export function extraField(message: object, name: string): unknown {
  return Object.prototype.hasOwnProperty.call(message, name) ? Reflect.get(message, name) : undefined;
}

/**
 * Admin input of a model (create and replace) as its edge admits it: the admin DTO checks each
 * field's type, bound, pattern and enum (apps/host/src/http/dto/models.dto.ts); `validateModel`
 * adds the domain's rules.
 */
export interface ModelInput {
  kind: ModelKind;
  provider?: string;
  base_url: string;
  /** Name of the environment variable holding the API key (a secret reference); null: no key. */
  api_key_env?: string | null;
  model_name: string;
  context_window?: number | null;
  max_output_tokens?: number | null;
  abilities?: Partial<ModelAbilities> | null;
  tokenizer?: TokenizerName | null;
  extra_args?: Record<string, unknown>;
}

/** A model as the admin API shows it: the key reference, never the key. */
export interface ModelView {
  model_id: string;
  /** The owning workspace, and whether every workspace's runs may be granted it (docs/tenancy.md#resources). */
  workspace_id: string;
  shared: boolean;
  kind: ModelKind;
  model_type: 'llm' | 'rerank';
  provider: string;
  base_url: string;
  api_key_env: string | null;
  /** Whether the host's environment has the variable `api_key_env` names. */
  api_key_set: boolean;
  model_name: string;
  context_window: number | null;
  max_output_tokens: number | null;
  abilities: ModelAbilities | null;
  tokenizer: TokenizerName | null;
  extra_args: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}
