import 'reflect-metadata';
import type { ArgumentMetadata } from '@nestjs/common';
import { DomainError } from '@libs/protocol';
import { modelsFixture } from '@libs/testing';
import { validationPipe } from '../../filters/validation';
import { CreateModelDto, ReplaceModelDto } from './models.dto';

// The admin model body's field rules (kind, provider, api_key_env's name, the integer bounds,
// tokenizer, the ability flags) are stated here only: validateModel no longer repeats them
// (libs/resources model-validation.ts; docs/architecture.md#validation).
const pipe = validationPipe();
const create: ArgumentMetadata = { type: 'body', metatype: CreateModelDto };
const replace: ArgumentMetadata = { type: 'body', metatype: ReplaceModelDto };
const chat = { kind: 'chat', base_url: 'https://api.example.test/v1', model_name: 'gpt-4o-mini' };

async function refusal(value: unknown, meta = create): Promise<{ field: unknown; message: string }> {
  try {
    await pipe.transform(value, meta);
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    expect(e).toMatchObject({ code: 'invalid_argument' });
    return { field: (e as DomainError).details.field, message: (e as Error).message };
  }
  throw new Error('expected a refusal');
}

describe('the admin model body (CreateModelDto, ReplaceModelDto)', () => {
  it('admits a full chat model (null: an optional field left unset)', async () => {
    const body = {
      ...chat,
      model_id: 'm',
      provider: 'openai',
      api_key_env: null,
      context_window: 128_000,
      max_output_tokens: null,
      abilities: { vision: true },
      tokenizer: 'o200k_base',
      extra_args: { temperature: 0 },
    };
    await expect(pipe.transform(body, create)).resolves.toMatchObject({ ...body, abilities: { vision: true } });
  });

  it('admits a partial abilities object: the unset flags take their defaults in the registry', async () => {
    // The DTO instance carries every declared flag as an own property (undefined when unset); the
    // base build's per-key loop refused `{vision: true}` as "abilities.tool_calling: must be a boolean".
    for (const [abilities, want] of [
      [{ vision: true }, { tool_calling: true, vision: true, streaming: true }],
      [{}, { tool_calling: true, vision: false, streaming: true }],
    ] as const) {
      const dto = (await pipe.transform({ ...chat, model_id: 'm', abilities }, create)) as CreateModelDto;
      const { model_id: _id, workspace_id: _ws, shared: _shared, ...input } = dto;
      expect((await modelsFixture().registry.create('m', input)).abilities).toEqual(want);
    }
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['kind', { kind: 'embed' }, 'kind: kind must be one of the following values: chat, rerank'],
    ['provider', { provider: 'Open AI' }, 'provider: must be 1-64 lower-case letters, digits, ".", "_" or "-"'],
    ['provider', { provider: '' }, 'provider: must be 1-64 lower-case letters, digits, ".", "_" or "-"'],
    ['api_key_env', { api_key_env: 'sk-live-123' }, 'api_key_env: must be an environment variable name'],
    ['context_window', { context_window: 1.5 }, 'context_window: context_window must be an integer number'],
    ['context_window', { context_window: 0 }, 'context_window: context_window must not be less than 1'],
    [
      'context_window',
      { context_window: 100_000_001 },
      'context_window: context_window must not be greater than 100000000',
    ],
    [
      'max_output_tokens',
      { max_output_tokens: 10_000_001 },
      'max_output_tokens: max_output_tokens must not be greater than 10000000',
    ],
    ['max_output_tokens', { max_output_tokens: 0 }, 'max_output_tokens: max_output_tokens must not be less than 1'],
    ['tokenizer', { tokenizer: 'llama' }, 'tokenizer: tokenizer must be one of the following values: '],
    [
      'abilities.telepathy',
      { abilities: { telepathy: true } },
      'abilities.telepathy: property telepathy should not exist',
    ],
    ['abilities.vision', { abilities: { vision: 'yes' } }, 'abilities.vision: vision must be a boolean value'],
  ])('refuses naming %s (case %#)', async (field, patch, message) => {
    for (const [meta, extra] of [
      [create, { model_id: 'm' }],
      [replace, {}],
    ] as const) {
      const r = await refusal({ ...chat, ...extra, ...patch }, meta);
      expect(r.field).toBe(field);
      expect(r.message.startsWith(message)).toBe(true);
    }
  });
});
