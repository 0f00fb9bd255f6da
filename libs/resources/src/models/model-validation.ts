import type { SecretEnvPolicy } from '@libs/config';
import { DomainError } from '@libs/protocol';
import { checkEnvReference } from '../env-reference';
import {
  DEFAULT_ABILITIES,
  MODEL_LIMITS,
  type ModelAbilities,
  type ModelInput,
  type ModelKind,
  type TokenizerName,
} from './model-types';

export const MODEL_ID_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,${MODEL_LIMITS.model_id - 1}}$`);
const MAX_EXTRA_ARGS_BYTES = 16 * 1024;
/** Request fields the host sets itself; extra_args may not override them. */
const RESERVED_ARGS: Record<ModelKind, string[]> = {
  chat: ['model', 'messages', 'tools', 'stream', 'stream_options', 'n'],
  rerank: ['model', 'query', 'documents'],
};

/** The stored fields of a model, validated and normalised. */
export interface ValidatedModel {
  kind: ModelKind;
  provider: string;
  base_url: string;
  api_key_env: string | null;
  model_name: string;
  context_window: number | null;
  max_output_tokens: number | null;
  abilities: ModelAbilities | Record<string, never>;
  tokenizer: TokenizerName | null;
  extra_args: Record<string, unknown>;
}

const invalid = (field: string, rule: string) => new DomainError('invalid_argument', `${field}: ${rule}`, { field });
const absent = (value: unknown): value is undefined | null => value === undefined || value === null;
const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The one reserved-key rule of extra_args, for a model's own and for one call's. */
function refuseReserved(args: Record<string, unknown>, kind: ModelKind): void {
  const reserved = Object.keys(args).find((k) => RESERVED_ARGS[kind].includes(k));
  if (reserved) {
    throw invalid(`extra_args.${reserved}`, 'is set by the host and cannot be overridden');
  }
}

export function checkModelId(modelId: string): void {
  if (typeof modelId !== 'string' || !MODEL_ID_PATTERN.test(modelId)) {
    throw invalid(
      'model_id',
      `must be 1-${MODEL_LIMITS.model_id} letters, digits, ".", "_", ":" or "-", starting with a letter or digit`,
    );
  }
}

/** An http(s) base URL without credentials, query or fragment; trailing slashes removed. */
export function normaliseBaseUrl(value: unknown, field = 'base_url'): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MODEL_LIMITS.base_url) {
    throw invalid(field, `must be an http(s) URL of at most ${MODEL_LIMITS.base_url} characters`);
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid(field, 'must be an http(s) URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw invalid(field, 'must be an http(s) URL');
  }
  if (url.username || url.password) {
    throw invalid(field, 'must not carry credentials (name the key with api_key_env)');
  }
  if (url.search || url.hash) {
    throw invalid(field, 'must not have a query or fragment');
  }
  return url.toString().replace(/\/+$/, '');
}

function abilitiesOf(value: ModelInput['abilities']): ModelAbilities {
  if (absent(value)) {
    return { ...DEFAULT_ABILITIES };
  }
  // An array passes the DTO's nested rule (it validates each element), so this one stays here.
  if (!isObject(value)) {
    throw invalid('abilities', 'must be an object {tool_calling, vision, streaming}');
  }
  const flag = (name: keyof ModelAbilities): boolean => {
    const v: boolean | null | undefined = value[name];
    // The DTO's @IsOptional lets a null flag through; it was refused before the rules were merged,
    // and the admin API's 400 stays as it was.
    if (v === null) {
      throw invalid(`abilities.${name}`, 'must be a boolean');
    }
    return v ?? DEFAULT_ABILITIES[name];
  };
  return { tool_calling: flag('tool_calling'), vision: flag('vision'), streaming: flag('streaming') };
}

function extraArgsOf(value: unknown, kind: ModelKind): Record<string, unknown> {
  if (absent(value)) {
    return {};
  }
  if (!isObject(value)) {
    throw invalid('extra_args', 'must be an object');
  }
  refuseReserved(value, kind);
  if (Buffer.byteLength(JSON.stringify(value)) > MAX_EXTRA_ARGS_BYTES) {
    throw invalid('extra_args', `must be at most ${MAX_EXTRA_ARGS_BYTES} bytes of JSON`);
  }
  return value;
}

/** Request arguments of one call over the model's own: the call wins; reserved keys are refused. */
export function mergeExtraArgs(
  model: Record<string, unknown>,
  call: Record<string, unknown> | undefined,
  kind: ModelKind,
): Record<string, unknown> {
  refuseReserved(call ?? {}, kind);
  return { ...model, ...(call ?? {}) };
}

/**
 * The domain's rules of an admin model input, over a body whose field rules its edge has checked:
 * kind, provider and api_key_env's name, the integer bounds, tokenizer and the ability flags are
 * stated once, in the admin DTO (apps/host/src/http/dto/models.dto.ts; docs/architecture.md#validation),
 * and `ModelInput` types them. Kept here: what no field rule says (the env-name policy, base_url's
 * clean-up, model_name's control characters — the quick start's env values reach only these —,
 * extra_args' reserved keys and size, the cross-field and per-kind rules) and the defaults.
 */
export function validateModel(input: ModelInput, secretEnv: SecretEnvPolicy): ValidatedModel {
  const kind = input.kind;
  const apiKeyEnv = input.api_key_env ?? null;
  if (apiKeyEnv !== null) {
    checkEnvReference(apiKeyEnv, 'api_key_env', secretEnv);
  }
  if (
    typeof input.model_name !== 'string' ||
    input.model_name.trim() === '' ||
    input.model_name.length > MODEL_LIMITS.model_name ||
    /\p{Cc}/u.test(input.model_name)
  ) {
    throw invalid('model_name', `must be 1-${MODEL_LIMITS.model_name} characters without control characters`);
  }
  const common = {
    kind,
    provider: input.provider ?? 'openai-compatible',
    base_url: normaliseBaseUrl(input.base_url),
    api_key_env: apiKeyEnv,
    model_name: input.model_name,
    extra_args: extraArgsOf(input.extra_args, kind),
  };
  if (kind === 'rerank') {
    for (const field of ['context_window', 'max_output_tokens', 'abilities', 'tokenizer'] as const) {
      if (!absent(input[field])) {
        throw invalid(field, 'applies to chat models only');
      }
    }
    return { ...common, context_window: null, max_output_tokens: null, abilities: {}, tokenizer: null };
  }
  const contextWindow = input.context_window ?? null;
  const maxOutput = input.max_output_tokens ?? null;
  if (contextWindow !== null && maxOutput !== null && maxOutput > contextWindow) {
    throw invalid('max_output_tokens', 'must not exceed context_window');
  }
  return {
    ...common,
    context_window: contextWindow,
    max_output_tokens: maxOutput,
    abilities: abilitiesOf(input.abilities),
    tokenizer: input.tokenizer ?? null,
  };
}

/** The encoding OpenAI uses for a model name, when it is one of theirs; null otherwise. */
export function tokenizerFor(modelName: string): TokenizerName | null {
  const name = modelName.toLowerCase().replace(/^openai\//, '');
  if (/^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o1|o3|o4|chatgpt-4o)/.test(name)) {
    return 'o200k_base';
  }
  if (/^(gpt-4|gpt-3\.5)/.test(name)) {
    return 'cl100k_base';
  }
  return null;
}
