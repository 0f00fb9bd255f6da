import type { TestingModule } from '@nestjs/testing';
import { secretEnvPolicy, type AppConfig } from '@libs/config';
import { ModelsRepository } from '@libs/persistence';
import { ModelRegistry, type ModelInput } from '@libs/resources';
import { DIALECTS, type TestDatabase, storesModule } from './support/databases';

/*
 * The model registry over the real repository, on every dialect: JSON columns (abilities,
 * extra_args), nullable ints, bigint timestamps, paging order, and model_usage rows with a
 * boolean `complete` and null token counts.
 */

jest.setTimeout(60_000);

const config = {
  openai: { keySet: false, baseUrl: null, model: null },
  secret: () => 'sk-x',
  secretEnv: secretEnvPolicy(['*']),
} as unknown as AppConfig;

describe.each(DIALECTS)('model registry on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let repo: ModelsRepository;
  let registry: ModelRegistry;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [ModelsRepository]);
    repo = moduleRef.get(ModelsRepository);
    registry = new ModelRegistry(repo, config);
  });

  afterAll(async () => {
    await moduleRef?.close();
    await db?.dispose();
  });

  it('stores, reads back, pages, replaces and deletes models', async () => {
    const chat: ModelInput = {
      kind: 'chat',
      base_url: 'https://api.example.test/v1',
      api_key_env: 'EXAMPLE_KEY',
      model_name: 'gpt-4o',
      context_window: 128_000,
      abilities: { vision: true },
      tokenizer: 'o200k_base',
      extra_args: { temperature: 0.5, stop: ['\n\n'] },
    };
    const created = await registry.create('b-chat', chat);
    await registry.create('a-rerank', { kind: 'rerank', base_url: 'http://127.0.0.1:8080', model_name: 'bge' });
    expect(await registry.get('b-chat')).toEqual(created);
    expect(created).toMatchObject({
      abilities: { tool_calling: true, vision: true, streaming: true },
      extra_args: { temperature: 0.5, stop: ['\n\n'] },
      max_output_tokens: null,
      api_key_set: true,
    });
    expect(await registry.get('a-rerank')).toMatchObject({ api_key_env: null, api_key_set: false, tokenizer: null });
    expect((await registry.page(null, 10)).items.map((m) => m.model_id)).toEqual(['a-rerank', 'b-chat']);
    expect(await registry.catalog()).toEqual([
      {
        model_id: 'a-rerank',
        model_type: 'rerank',
        provider: 'openai-compatible',
        context_window: null,
        workspace_id: 'default',
        shared: false,
      },
      {
        model_id: 'b-chat',
        model_type: 'llm',
        provider: 'openai-compatible',
        context_window: 128_000,
        workspace_id: 'default',
        shared: false,
      },
    ]);
    const replaced = await registry.replace('b-chat', { ...chat, model_name: 'gpt-4.1', extra_args: {} });
    expect(await registry.get('b-chat')).toEqual(replaced);
    expect(replaced.created_at).toBe(created.created_at);
    await registry.remove('b-chat');
    expect(await repo.get('b-chat')).toBeNull();
  });

  it('records model_usage rows, complete or not', async () => {
    const base = { run_id: 'run-1', model_id: 'm', created_at: 1_764_500_000_000 };
    await repo.recordUsage({
      ...base,
      operation: 'invoke',
      prompt_tokens: 3,
      completion_tokens: 4,
      total_tokens: 7,
      complete: true,
    });
    await repo.recordUsage({
      ...base,
      operation: 'stream',
      prompt_tokens: null,
      completion_tokens: null,
      total_tokens: null,
      complete: false,
    });
    await repo.recordUsage({
      ...base,
      run_id: 'run-2',
      operation: 'rerank',
      prompt_tokens: null,
      completion_tokens: null,
      total_tokens: 9,
      complete: true,
    });
    const rows = await repo.usageOfRun('run-1');
    expect(rows.map(({ id: _id, ...r }) => r)).toEqual([
      { ...base, operation: 'invoke', prompt_tokens: 3, completion_tokens: 4, total_tokens: 7, complete: true },
      {
        ...base,
        operation: 'stream',
        prompt_tokens: null,
        completion_tokens: null,
        total_tokens: null,
        complete: false,
      },
    ]);
  });
});
