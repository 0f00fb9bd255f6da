import { UNIT_KEY, chatModel, failure, modelsFixture } from '@libs/testing';
import type { ModelInput } from './model-types';
import { encodingFor } from './tokenizer';

const BASE = 'https://api.example.test/v1';

describe('ModelRegistry', () => {
  // Registering a model warms its encoder on a later tick; build it now so that no warm-up runs
  // after this file's environment is torn down.
  beforeAll(() => encodingFor('o200k_base'));

  it('creates, lists, replaces and deletes; views carry the key reference, never the key', async () => {
    const { registry } = modelsFixture();
    const created = await registry.create(
      'gpt',
      chatModel(`${BASE}/`, { context_window: 128000, max_output_tokens: 16384 }),
    );
    expect(created).toMatchObject({
      model_id: 'gpt',
      kind: 'chat',
      model_type: 'llm',
      provider: 'openai-compatible',
      base_url: BASE,
      api_key_env: 'UNIT_KEY',
      api_key_set: true,
      context_window: 128000,
      abilities: { tool_calling: true, vision: true, streaming: true },
      tokenizer: 'o200k_base',
      extra_args: {},
    });
    expect(JSON.stringify(created)).not.toContain(UNIT_KEY);
    await registry.create('rr', { kind: 'rerank', base_url: BASE, api_key_env: 'OTHER', model_name: 'rerank-1' });
    expect(await registry.get('rr')).toMatchObject({ model_type: 'rerank', abilities: null, api_key_set: false });
    expect(await registry.catalog()).toEqual([
      // A model created without a workspace belongs to the default one, not shared (docs/tenancy.md).
      {
        model_id: 'gpt',
        model_type: 'llm',
        provider: 'openai-compatible',
        context_window: 128000,
        workspace_id: 'default',
        shared: false,
      },
      {
        model_id: 'rr',
        model_type: 'rerank',
        provider: 'openai-compatible',
        context_window: null,
        workspace_id: 'default',
        shared: false,
      },
    ]);
    const page = await registry.page(null, 1);
    expect(page).toMatchObject({ items: [{ model_id: 'gpt' }], next_cursor: 'gpt' });
    expect((await registry.page('gpt', 1)).items[0].model_id).toBe('rr');

    const replaced = await registry.replace(
      'gpt',
      chatModel(BASE, { model_name: 'gpt-4.1', abilities: { vision: false } }),
    );
    expect(replaced).toMatchObject({
      model_name: 'gpt-4.1',
      abilities: { vision: false, tool_calling: true },
      created_at: created.created_at,
    });
    expect(replaced.updated_at > created.updated_at).toBe(true);

    expect(await failure(registry.create('gpt', chatModel(BASE)))).toMatchObject({ code: 'conflict' });
    await registry.remove('gpt');
    expect(await failure(registry.get('gpt'))).toMatchObject({ code: 'not_found' });
    expect(await failure(registry.remove('gpt'))).toMatchObject({ code: 'not_found' });
    expect(await failure(registry.replace('gpt', chatModel(BASE)))).toMatchObject({ code: 'not_found' });
  });

  // The field rules (kind, provider, api_key_env's name, the integer bounds, tokenizer, the ability
  // flags) are the admin DTO's (apps/host/src/http/dto/models.dto.spec.ts); these are the registry's.
  it.each<[string, Partial<ModelInput>, string]>([
    ['bad id!', {}, 'model_id'],
    ['m', { base_url: 'not a url' }, 'base_url'],
    ['m', { base_url: 'ftp://x.test' }, 'base_url'],
    ['m', { base_url: 'https://user:pw@x.test/v1' }, 'base_url'],
    ['m', { base_url: 'https://x.test/v1?key=1' }, 'base_url'],
    ['m', { api_key_env: 'ADMIN_API_KEY' }, 'api_key_env'],
    ['m', { api_key_env: 'DATABASE_URL' }, 'api_key_env'],
    ['m', { model_name: '' }, 'model_name'],
    ['m', { model_name: 'a\nb' }, 'model_name'],
    ['m', { context_window: 1000, max_output_tokens: 2000 }, 'max_output_tokens'],
    ['m', { extra_args: { stream: true } }, 'extra_args.stream'],
    ['m', { extra_args: { big: 'x'.repeat(20_000) } }, 'extra_args'],
    ['m', { kind: 'rerank', abilities: undefined, tokenizer: 'o200k_base' }, 'tokenizer'],
    ['m', { kind: 'rerank', tokenizer: null }, 'abilities'],
  ])('refuses %j %j naming %s', async (id, patch, field) => {
    const { registry, repo } = modelsFixture();
    const e = await failure(registry.create(id, chatModel(BASE, patch)));
    expect(e).toMatchObject({ code: 'invalid_argument', details: { field } });
    expect(repo.rows.size).toBe(0);
  });

  describe('quick start (OPENAI_API_KEY at boot)', () => {
    const openai = (baseUrl: string | null, model: string | null) => ({ keySet: true, baseUrl, model });

    it('registers nothing without the key', async () => {
      const { registry, repo } = modelsFixture({});
      await registry.onApplicationBootstrap();
      expect(repo.rows.size).toBe(0);
    });

    it('registers "default" reading OPENAI_API_KEY, and follows the variables while it still reads it', async () => {
      const f = modelsFixture({ OPENAI_API_KEY: 'sk-boot' }, openai(null, null));
      await f.registry.registerDefault();
      expect(await f.registry.get('default')).toMatchObject({
        provider: 'openai',
        base_url: 'https://api.openai.com/v1',
        api_key_env: 'OPENAI_API_KEY',
        api_key_set: true,
        model_name: 'gpt-4o-mini',
        tokenizer: 'o200k_base',
      });
      const next = modelsFixture({ OPENAI_API_KEY: 'sk-boot' }, openai('http://127.0.0.1:11434/v1', 'llama3.1'));
      next.repo.rows.set('default', f.repo.rows.get('default')!);
      await next.registry.registerDefault();
      expect(await next.registry.get('default')).toMatchObject({
        base_url: 'http://127.0.0.1:11434/v1',
        model_name: 'llama3.1',
        tokenizer: null,
      });
    });

    it('leaves a "default" an admin repointed to another key alone', async () => {
      const f = modelsFixture({ OPENAI_API_KEY: 'sk-boot' }, openai(null, 'gpt-4o'));
      await f.registry.create('default', chatModel(BASE, { api_key_env: 'UNIT_KEY', model_name: 'mine' }));
      await f.registry.registerDefault();
      expect(await f.registry.get('default')).toMatchObject({ model_name: 'mine', api_key_env: 'UNIT_KEY' });
    });
  });
});
