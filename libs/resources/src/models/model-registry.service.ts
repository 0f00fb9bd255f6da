import { DEFAULT_OWNER, type Owner } from '../owner';
import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import type { CatalogModel } from '@libs/authz';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { ModelsRepository, type JsonObject, type ModelEntity } from '@libs/persistence';
import { DomainError, readPage } from '@libs/protocol';
import {
  abilitiesJson,
  storedAbilities,
  type ModelInput,
  type ModelKind,
  type ModelView,
  type TokenizerName,
} from './model-types';
import { checkModelId, tokenizerFor, validateModel, type ValidatedModel } from './model-validation';
import { warmTokenizer } from './tokenizer';

export const DEFAULT_MODEL_ID = 'default';
/** How long a model call may use a definition read earlier (writes through this registry apply at once). */
const CALL_CACHE_MS = 2000;
const QUICK_START = { key_env: 'OPENAI_API_KEY', base_url: 'https://api.openai.com/v1', model: 'gpt-4o-mini' };

/**
 * The model registry: admin CRUD, the catalogue grants are checked against, and the quick-start
 * `default` model registered at boot when OPENAI_API_KEY is set. Keys are stored by reference
 * (`api_key_env`) only; no view carries a key.
 */
@Injectable()
export class ModelRegistry implements OnApplicationBootstrap {
  private readonly logger = new Logger('Models');
  private readonly forCalls = new Map<string, { model: ModelEntity; at: number }>();

  constructor(
    private readonly repo: ModelsRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.registerDefault();
    for (const m of await this.repo.all()) {
      warmTokenizer(m.tokenizer as TokenizerName | null);
    }
  }

  async create(modelId: string, input: ModelInput, owner: Owner = DEFAULT_OWNER): Promise<ModelView> {
    checkModelId(modelId);
    const fields = validateModel(input, this.config.secretEnv);
    if (await this.repo.get(modelId)) {
      throw new DomainError('conflict', `model ${modelId} already exists`, { model_id: modelId });
    }
    const now = Date.now();
    const entity = this.entity(modelId, fields, now, now, owner);
    warmTokenizer(fields.tokenizer);
    this.forCalls.delete(modelId);
    try {
      await this.repo.insert(entity);
    } catch (e) {
      if (await this.repo.get(modelId)) {
        throw new DomainError('conflict', `model ${modelId} already exists`, { model_id: modelId });
      }
      throw e;
    }
    return this.view(entity);
  }

  /** Replaces a model's definition; runs already started keep their grant, later calls use the new one. */
  async replace(modelId: string, input: ModelInput): Promise<ModelView> {
    const current = await this.load(modelId);
    const fields = validateModel(input, this.config.secretEnv);
    const entity = this.entity(
      modelId,
      fields,
      current.created_at,
      Math.max(Date.now(), current.updated_at + 1),
      current,
    );
    warmTokenizer(fields.tokenizer);
    this.forCalls.delete(modelId);
    if (!(await this.repo.update(entity))) {
      throw this.notFound(modelId);
    }
    return this.view(entity);
  }

  async get(modelId: string): Promise<ModelView> {
    return this.view(await this.load(modelId));
  }

  async page(
    after: string | null,
    limit: number,
    scope: readonly string[] | null = null,
  ): Promise<{ items: ModelView[]; next_cursor: string | null }> {
    const { rows, next_cursor } = await readPage(
      limit,
      (n) => this.repo.page(after, n, scope),
      (m) => m.model_id,
    );
    return { items: rows.map((m) => this.view(m)), next_cursor };
  }

  async remove(modelId: string): Promise<void> {
    this.forCalls.delete(modelId);
    if (!(await this.repo.delete(modelId))) {
      throw this.notFound(modelId);
    }
  }

  async catalog(): Promise<CatalogModel[]> {
    return (await this.repo.all()).map((m) => ({
      model_id: m.model_id,
      model_type: m.kind === 'chat' ? 'llm' : 'rerank',
      provider: m.provider,
      context_window: m.context_window,
      workspace_id: m.workspace_id,
      shared: m.shared,
    }));
  }

  /**
   * The model a call uses, of the kind the call needs (a granted model may have been deleted or
   * replaced since the run started). Read at most CALL_CACHE_MS earlier.
   */
  async require(modelId: string, kind: ModelKind): Promise<ModelEntity> {
    const hit = this.forCalls.get(modelId);
    let model = hit && Date.now() - hit.at < CALL_CACHE_MS ? hit.model : null;
    if (!model) {
      model = await this.load(modelId);
      this.forCalls.set(modelId, { model, at: Date.now() });
    }
    if (model.kind !== kind) {
      throw new DomainError('invalid_argument', `model ${modelId} is a ${model.kind} model, not a ${kind} model`, {
        field: 'model_id',
        model_id: modelId,
      });
    }
    return model;
  }

  view(m: ModelEntity): ModelView {
    const kind = m.kind as ModelKind;
    return {
      model_id: m.model_id,
      workspace_id: m.workspace_id,
      shared: m.shared,
      kind,
      model_type: kind === 'chat' ? 'llm' : 'rerank',
      provider: m.provider,
      base_url: m.base_url,
      api_key_env: m.api_key_env,
      api_key_set: m.api_key_env !== null && this.config.secret(m.api_key_env) !== null,
      model_name: m.model_name,
      context_window: m.context_window,
      max_output_tokens: m.max_output_tokens,
      abilities: kind === 'chat' ? storedAbilities(m.abilities) : null,
      tokenizer: m.tokenizer as TokenizerName | null,
      extra_args: m.extra_args,
      created_at: new Date(m.created_at).toISOString(),
      updated_at: new Date(m.updated_at).toISOString(),
    };
  }

  /**
   * Quick start: with OPENAI_API_KEY set, registers the chat model `default` (OPENAI_BASE_URL,
   * OPENAI_MODEL, key read from OPENAI_API_KEY at call time). A `default` that still reads
   * OPENAI_API_KEY follows the variables on every boot; one an admin repointed is left alone.
   */
  async registerDefault(): Promise<void> {
    const { keySet, baseUrl, model } = this.config.openai;
    if (!keySet) {
      return;
    }
    if (!this.config.secretEnv.allows(QUICK_START.key_env)) {
      this.logger.warn(
        `OPENAI_API_KEY is set but not on SECRET_ENV_ALLOWLIST: no "${DEFAULT_MODEL_ID}" model registered`,
      );
      return;
    }
    const modelName = model ?? QUICK_START.model;
    const input: ModelInput = {
      kind: 'chat',
      provider: 'openai',
      base_url: baseUrl ?? QUICK_START.base_url,
      api_key_env: QUICK_START.key_env,
      model_name: modelName,
      tokenizer: tokenizerFor(modelName),
    };
    const current = await this.repo.get(DEFAULT_MODEL_ID);
    if (!current) {
      await this.create(DEFAULT_MODEL_ID, input);
      this.logger.log(`registered model "${DEFAULT_MODEL_ID}" (${modelName}) from OPENAI_API_KEY`);
    } else if (
      current.api_key_env === QUICK_START.key_env &&
      (current.base_url !== validateModel(input, this.config.secretEnv).base_url || current.model_name !== modelName)
    ) {
      await this.replace(DEFAULT_MODEL_ID, {
        ...input,
        abilities: current.abilities,
        context_window: current.context_window,
        max_output_tokens: current.max_output_tokens,
        extra_args: current.extra_args,
      });
      this.logger.log(`model "${DEFAULT_MODEL_ID}" now follows OPENAI_BASE_URL / OPENAI_MODEL (${modelName})`);
    }
  }

  private entity(modelId: string, f: ValidatedModel, createdAt: number, updatedAt: number, owner: Owner): ModelEntity {
    return {
      model_id: modelId,
      workspace_id: owner.workspace_id,
      shared: owner.shared,
      ...f,
      abilities: abilitiesJson(f.abilities),
      extra_args: f.extra_args as JsonObject,
      created_at: createdAt,
      updated_at: updatedAt,
    };
  }

  private async load(modelId: string): Promise<ModelEntity> {
    const model = await this.repo.get(modelId);
    if (!model) {
      this.forCalls.delete(modelId);
      throw this.notFound(modelId);
    }
    return model;
  }

  private notFound(modelId: string): DomainError {
    return new DomainError('not_found', `model ${modelId} not found`, { model_id: modelId });
  }
}
