import { secretEnvPolicy } from '@libs/config';
import { DomainError } from '@libs/protocol';
import { ENV_NAME_PATTERN, PROVIDER_PATTERN } from './model-types';
import { mergeExtraArgs, validateModel } from './model-validation';
import type { ModelInput } from './model-types';

const policy = secretEnvPolicy(['OPENAI_API_KEY', 'RUNNERHOST_SECRET_*']);
const chat: ModelInput = { kind: 'chat', base_url: 'https://api.example.test/v1/', model_name: 'gpt-4o-mini' };
const rerank: ModelInput = { kind: 'rerank', base_url: 'https://rerank.example.test', model_name: 'bge' };

function refusal(fn: () => unknown): { field: unknown; message: string } {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    expect(e).toMatchObject({ code: 'invalid_argument' });
    return { field: (e as DomainError).details?.field, message: (e as Error).message };
  }
  throw new Error('expected a refusal');
}

describe('validateModel', () => {
  it('fills an unset ability with its default and refuses a null flag (the DTO lets null through)', () => {
    expect(validateModel({ ...chat, abilities: { vision: true } }, policy).abilities).toEqual({
      tool_calling: true,
      vision: true,
      streaming: true,
    });
    const nullFlag = { streaming: null } as unknown as ModelInput['abilities'];
    expect(refusal(() => validateModel({ ...chat, abilities: nullFlag }, policy))).toEqual({
      field: 'abilities.streaming',
      message: 'abilities.streaming: must be a boolean',
    });
  });

  it('normalises a chat model: default provider, base_url without trailing slash, default abilities', () => {
    expect(validateModel({ ...chat, api_key_env: 'OPENAI_API_KEY' }, policy)).toEqual({
      kind: 'chat',
      provider: 'openai-compatible',
      base_url: 'https://api.example.test/v1',
      api_key_env: 'OPENAI_API_KEY',
      model_name: 'gpt-4o-mini',
      context_window: null,
      max_output_tokens: null,
      abilities: { tool_calling: true, vision: false, streaming: true },
      tokenizer: null,
      extra_args: {},
    });
  });

  // The field rules (kind, provider, api_key_env's name, the integer bounds, tokenizer, the ability
  // flags) are the admin DTO's alone: apps/host/src/http/dto/models.dto.spec.ts.
  it.each<[string, Partial<ModelInput> | Record<string, unknown>, RegExp]>([
    ['api_key_env', { api_key_env: 'OTHER_KEY' }, /^api_key_env: OTHER_KEY is not a host variable/],
    ['api_key_env', { api_key_env: 'ADMIN_API_KEY' }, /^api_key_env: /],
    ['model_name', { model_name: ' ' }, /^model_name: must be 1-255 characters/],
    ['model_name', { model_name: 'a\u0007b' }, /^model_name: /],
    ['base_url', { base_url: 'ftp://x.test' }, /^base_url: must be an http\(s\) URL$/],
    ['base_url', { base_url: 'https://u:p@x.test' }, /^base_url: must not carry credentials/],
    ['base_url', { base_url: 'https://x.test/v1?k=1' }, /^base_url: must not have a query or fragment$/],
    ['max_output_tokens', { context_window: 10, max_output_tokens: 11 }, /must not exceed context_window$/],
    ['abilities', { abilities: [] as unknown as object }, /^abilities: must be an object/],
    ['extra_args', { extra_args: [] as unknown as object }, /^extra_args: must be an object$/],
    ['extra_args.messages', { extra_args: { messages: [] } }, /is set by the host and cannot be overridden$/],
    ['extra_args', { extra_args: { pad: 'x'.repeat(17_000) } }, /must be at most 16384 bytes of JSON$/],
  ])('refuses a chat model naming %s (case %#)', (field, patch, message) => {
    const r = refusal(() => validateModel({ ...chat, ...patch }, policy));
    expect(r.field).toBe(field);
    expect(r.message).toMatch(message);
  });

  it('refuses chat-only fields and the chat reserved keys per kind on a rerank model', () => {
    for (const field of ['context_window', 'max_output_tokens', 'abilities', 'tokenizer'] as const) {
      const value = field === 'abilities' ? { vision: true } : field === 'tokenizer' ? 'o200k_base' : 8;
      expect(refusal(() => validateModel({ ...rerank, [field]: value }, policy))).toEqual({
        field,
        message: `${field}: applies to chat models only`,
      });
    }
    expect(refusal(() => validateModel({ ...rerank, extra_args: { query: 'q' } }, policy)).field).toBe(
      'extra_args.query',
    );
    expect(validateModel({ ...rerank, extra_args: { messages: 1 } }, policy).extra_args).toEqual({ messages: 1 });
  });
});

describe('mergeExtraArgs', () => {
  it("lets the call win over the model's arguments and refuses the host's keys by kind", () => {
    expect(mergeExtraArgs({ temperature: 0, top_p: 1 }, { temperature: 1 }, 'chat')).toEqual({
      temperature: 1,
      top_p: 1,
    });
    expect(mergeExtraArgs({ a: 1 }, undefined, 'rerank')).toEqual({ a: 1 });
    expect(refusal(() => mergeExtraArgs({}, { stream: false }, 'chat')).field).toBe('extra_args.stream');
    expect(refusal(() => mergeExtraArgs({}, { documents: [] }, 'rerank')).field).toBe('extra_args.documents');
  });
});

describe('the shared patterns (the admin DTO checks them; the domain defines them)', () => {
  it.each([
    ['openai', true],
    ['a'.repeat(64), true],
    ['a'.repeat(65), false],
    ['-x', false],
    ['OpenAI', false],
  ])('provider %s → %s', (value, ok) => expect(PROVIDER_PATTERN.test(value)).toBe(ok));

  it.each([
    ['OPENAI_API_KEY', true],
    ['_x1', true],
    ['1X', false],
    ['A'.repeat(129), false],
    ['sk-123', false],
  ])('env name %s → %s', (value, ok) => expect(ENV_NAME_PATTERN.test(value)).toBe(ok));
});
