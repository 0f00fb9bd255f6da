import { loadConfig, secretEnvPolicy, type AppConfig } from '@libs/config';
import { ModelsRepository, type ModelEntity, type NewModelUsage } from '@libs/persistence';
import type { InvokeModelRequest, StreamModelChunk } from '@libs/proto';
import { DomainError } from '@libs/protocol';
import { ModelRegistry, ModelsService, type ModelInput, type ResourceCall } from '@libs/resources';

/*
 * Unit-test wiring of the model services without Nest or a database: an in-memory
 * ModelsRepository, a config whose secrets come from a given map, and small request helpers.
 */

export const UNIT_KEY = 'sk-unit-0123456789abcdefSECRET';

/**
 * In-memory ModelsRepository with the methods the services use (the others are not backed: the
 * TypeORM repositories and the hot store it would use are absent).
 */
export class MemoryModels extends ModelsRepository {
  readonly rows = new Map<string, ModelEntity>();
  /** The usage rows recorded (`recordUsage`). */
  readonly usageRows: NewModelUsage[] = [];

  constructor() {
    super(null!, null!, null!);
  }

  override insert(m: ModelEntity): Promise<void> {
    if (this.rows.has(m.model_id)) {
      return Promise.reject(new Error('duplicate key'));
    }
    this.rows.set(m.model_id, structuredClone(m));
    return Promise.resolve();
  }
  override get(id: string): Promise<ModelEntity | null> {
    return Promise.resolve(this.rows.has(id) ? structuredClone(this.rows.get(id)!) : null);
  }
  override all(): Promise<ModelEntity[]> {
    return Promise.resolve([...this.rows.values()].sort((a, b) => a.model_id.localeCompare(b.model_id)));
  }
  override async page(after: string | null, limit: number): Promise<ModelEntity[]> {
    return (await this.all()).filter((m) => after === null || m.model_id > after).slice(0, limit);
  }
  override update(m: ModelEntity): Promise<boolean> {
    const current = this.rows.get(m.model_id);
    if (!current) {
      return Promise.resolve(false);
    }
    this.rows.set(m.model_id, { ...structuredClone(m), created_at: current.created_at });
    return Promise.resolve(true);
  }
  override delete(id: string): Promise<boolean> {
    return Promise.resolve(this.rows.delete(id));
  }
  override recordUsage(row: NewModelUsage): Promise<void> {
    this.usageRows.push(row);
    return Promise.resolve();
  }
}

export interface ModelsFixture {
  config: AppConfig;
  repo: MemoryModels;
  registry: ModelRegistry;
  service: ModelsService;
  env: Record<string, string>;
}

export function modelsFixture(
  env: Record<string, string> = { UNIT_KEY },
  openai: AppConfig['openai'] = { keySet: false, baseUrl: null, model: null },
): ModelsFixture {
  // Every name but the host's own secrets may be referenced here (SECRET_ENV_ALLOWLIST has its own tests).
  const secretEnv = secretEnvPolicy(['*']);
  const config: AppConfig = {
    ...loadConfig({}),
    openai,
    secretEnv,
    secret: (name: string) => (secretEnv.allows(name) ? env[name] || null : null),
  };
  const repo = new MemoryModels();
  const registry = new ModelRegistry(repo, config);
  const service = new ModelsService(registry, repo, config);
  return { config, repo, registry, service, env };
}

export function runCall(overrides: Partial<ResourceCall> = {}): ResourceCall & { abort: AbortController } {
  const abort = new AbortController();
  return { run_id: 'run-1', signal: abort.signal, deadline_at_ms: null, abort, ...overrides };
}

export function chatModel(baseUrl: string, extra: Partial<ModelInput> = {}): ModelInput {
  return {
    kind: 'chat',
    base_url: baseUrl,
    api_key_env: 'UNIT_KEY',
    model_name: 'gpt-4o-mini',
    tokenizer: 'o200k_base',
    abilities: { tool_calling: true, vision: true, streaming: true },
    ...extra,
  };
}

export const invokeRequest = (extra: Partial<InvokeModelRequest> = {}): InvokeModelRequest => ({
  run_id: 'run-1',
  model_id: 'm',
  messages: [{ role: 'user', content: 'hello' }],
  tools: [],
  ...extra,
});

export async function collect(it: AsyncIterable<StreamModelChunk>): Promise<StreamModelChunk[]> {
  const out: StreamModelChunk[] = [];
  for await (const c of it) {
    out.push(c);
  }
  return out;
}

/** The DomainError a promise rejects with (anything else fails the test). */
export async function failure(p: Promise<unknown>): Promise<DomainError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof DomainError) {
      return e;
    }
    throw new Error(`expected a DomainError, got ${String(e)}`);
  }
  throw new Error('expected a DomainError, got success');
}
