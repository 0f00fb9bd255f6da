import OpenAI from 'openai';
import type { AppConfig } from '@libs/config';
import type { ModelEntity } from '@libs/persistence';
import { DomainError } from '@libs/protocol';

/** The SDK needs some key; a model without one sends no authorization header at all. */
const NO_KEY = 'unused';

interface Cached {
  updated_at: number;
  secret: string | null;
  client: OpenAI;
}

export interface ModelClient {
  client: OpenAI;
  /** The key value in use, so error messages can be scrubbed of it. */
  secret: string | null;
}

/**
 * One `openai` client per model (connections are reused across calls), rebuilt when the model is
 * replaced or its key changes. The key is read through the config at call time from the variable
 * the model names; every other SDK default that reads the environment is pinned. SDK retries
 * are off: retrying is the runner's decision, made on the protocol error's `retryable`.
 */
export class ModelClients {
  private readonly cache = new Map<string, Cached>();

  constructor(private readonly config: AppConfig) {}

  for(model: ModelEntity): ModelClient {
    const secret = this.secretOf(model);
    const hit = this.cache.get(model.model_id);
    if (hit && hit.updated_at === model.updated_at && hit.secret === secret) {
      return hit;
    }
    const client = new OpenAI({
      apiKey: secret ?? NO_KEY,
      adminAPIKey: null,
      organization: null,
      project: null,
      webhookSecret: null,
      baseURL: model.base_url,
      maxRetries: 0,
      // The call's own AbortSignal (run end, deadline, timeout_ms) bounds it; this is a backstop.
      timeout: 10 * 60 * 1000,
      logLevel: 'off',
      ...(secret === null ? { defaultHeaders: { authorization: null } } : {}),
    });
    const entry = { updated_at: model.updated_at, secret, client };
    this.cache.set(model.model_id, entry);
    return entry;
  }

  private secretOf(model: ModelEntity): string | null {
    if (model.api_key_env === null) {
      return null;
    }
    const secret = this.config.secret(model.api_key_env);
    if (secret === null) {
      // Names neither the key nor the variable: runners see only that the model is not set up.
      throw new DomainError(
        'unavailable',
        `model ${model.model_id}: its API key is not configured on the host`,
        { reason: 'api_key_missing' },
        false,
      );
    }
    return secret;
  }
}
