import { APIConnectionError, APIConnectionTimeoutError, APIError } from 'openai';
import { DomainError } from '@libs/protocol';
import type { CallScope } from './call-scope';

/** Who failed: the model, and the key value to keep out of every message. */
export interface ProviderContext {
  model_id: string;
  secret: string | null;
  /** Set once a stream has delivered a chunk: a connection failure after that is a lost connection. */
  streaming?: boolean;
}

const MAX_MESSAGE = 500;
/** Things that look like API keys (OpenAI-style prefixes, bearer tokens), masked in provider text. */
const KEY_LIKE = /\b(?:sk|rk|pk|key)-[A-Za-z0-9_*.-]{6,}|\bBearer\s+\S+/gi;
const CONTEXT_EXCEEDED = /context[ _]length|maximum context|context window|too many tokens|prompt is too long/i;

/** Provider text safe to show a runner: the key (and anything key-like) masked, length bounded. */
export function redact(text: string, secret: string | null): string {
  let out = secret && secret.length >= 4 ? text.split(secret).join('[redacted]') : text;
  out = out.replace(KEY_LIKE, '[redacted]');
  return out.length > MAX_MESSAGE ? `${out.slice(0, MAX_MESSAGE)}…` : out;
}

/** The parts of an SDK APIError the mapping reads. */
interface ApiFailure {
  status: number | undefined;
  error: unknown;
  code: string | null | undefined;
  headers: Headers | undefined;
  message: string;
}

function providerText(e: ApiFailure): string {
  const body = (e.error ?? {}) as { message?: unknown };
  return typeof body.message === 'string' ? body.message : e.message;
}

function retryAfterMs(e: ApiFailure): number | undefined {
  const ms = Number(e.headers?.get('retry-after-ms'));
  if (Number.isFinite(ms) && ms > 0) {
    return ms;
  }
  const s = Number(e.headers?.get('retry-after'));
  return Number.isFinite(s) && s > 0 ? s * 1000 : undefined;
}

function fromApiError(e: ApiFailure, ctx: ProviderContext): DomainError {
  const { model_id } = ctx;
  const status = e.status;
  const text = redact(providerText(e), ctx.secret);
  const where = status === undefined ? 'in the stream' : `HTTP ${status}`;
  if (
    (status === undefined || status === 400 || status === 413 || status === 422) &&
    (e.code === 'context_length_exceeded' || CONTEXT_EXCEEDED.test(text))
  ) {
    return new DomainError('invalid_argument', `model ${model_id}: context length exceeded: ${text}`, {
      reason: 'context_length_exceeded',
      status: status ?? null,
    });
  }
  if (status === 401) {
    // No provider text: providers echo (part of) the key they rejected.
    return new DomainError('unauthenticated', `model ${model_id}: the provider rejected the API key (HTTP 401)`, {
      reason: 'provider_unauthenticated',
      status,
    });
  }
  if (status === 403) {
    return new DomainError('unauthorized', `model ${model_id}: the provider refused access (HTTP 403)`, {
      reason: 'provider_forbidden',
      status,
    });
  }
  if (status === 429 || e.code === 'rate_limit_exceeded') {
    const quota = e.code === 'insufficient_quota';
    const retry = retryAfterMs(e);
    return new DomainError(
      'rate_limited',
      `model ${model_id}: ${quota ? 'provider quota exhausted' : 'rate limited by the provider'} (${where}): ${text}`,
      {
        reason: quota ? 'provider_quota' : 'provider_rate_limited',
        status: status ?? null,
        ...(retry ? { retry_after_ms: retry } : {}),
      },
      !quota,
    );
  }
  if (status === 404) {
    return new DomainError(
      'unavailable',
      `model ${model_id}: the provider does not serve this model or endpoint (HTTP 404): ${text}`,
      { reason: 'provider_not_found', status },
      false,
    );
  }
  if (status !== undefined && status >= 400 && status < 500 && status !== 408) {
    return new DomainError(
      'invalid_argument',
      `model ${model_id}: the provider rejected the request (${where}): ${text}`,
      {
        reason: 'provider_rejected',
        status,
      },
    );
  }
  // 408, 5xx, and error events inside a stream.
  return new DomainError('unavailable', `model ${model_id}: provider error (${where}): ${text}`, {
    reason: 'provider_error',
    status: status ?? null,
  });
}

/*
 * Errors of the fetch layer (undici) are recognised by name and code, not by class: they may come
 * from another realm than this module's globals.
 */
type ErrorLike = { name?: unknown; message?: unknown; cause?: { code?: unknown } };

const errorName = (e: unknown): string =>
  typeof e === 'object' && e !== null && typeof (e as ErrorLike).name === 'string' ? String((e as ErrorLike).name) : '';

/** Network failures raised outside the SDK's error classes (e.g. a connection reset mid-stream). */
function isNetworkError(e: unknown): boolean {
  const { message, cause } = (e ?? {}) as ErrorLike;
  return (
    (errorName(e) === 'TypeError' && /terminated|fetch failed|network/i.test(String(message))) ||
    (typeof cause?.code === 'string' && /^(E[A-Z]+|UND_ERR_\w+)$/.test(cause.code))
  );
}

function causeCode(e: unknown): string {
  let c: unknown = e;
  for (let i = 0; i < 4 && c; i++) {
    const code = (c as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') {
      return ` (${code})`;
    }
    c = (c as { cause?: unknown }).cause;
  }
  return '';
}

/**
 * Maps whatever a provider call threw to the protocol error a runner can act on. An abort by the
 * call's own scope wins over what the SDK made of it. No message carries the API key.
 */
export function providerError(e: unknown, scope: CallScope, ctx: ProviderContext): DomainError {
  if (e instanceof DomainError) {
    return e;
  }
  if (scope.cause) {
    return scope.error();
  }
  if (e instanceof APIConnectionTimeoutError) {
    return new DomainError('unavailable', `model ${ctx.model_id}: the provider timed out`, {
      reason: 'provider_timeout',
    });
  }
  if (e instanceof APIConnectionError || isNetworkError(e)) {
    return ctx.streaming
      ? new DomainError('unavailable', `model ${ctx.model_id}: connection to the provider lost${causeCode(e)}`, {
          reason: 'connection_lost',
        })
      : new DomainError('unavailable', `model ${ctx.model_id}: cannot reach the provider${causeCode(e)}`, {
          reason: 'connection_failed',
        });
  }
  if (e instanceof APIError) {
    return fromApiError(e as ApiFailure, ctx);
  }
  if (errorName(e) === 'SyntaxError') {
    return new DomainError(
      'runtime_error',
      `model ${ctx.model_id}: malformed provider response: ${redact(String((e as ErrorLike).message), ctx.secret)}`,
      { reason: 'malformed_response' },
      false,
    );
  }
  const message = typeof (e as ErrorLike)?.message === 'string' ? String((e as ErrorLike).message) : String(e);
  return new DomainError(
    'runtime_error',
    `model ${ctx.model_id}: provider call failed: ${redact(message, ctx.secret)}`,
    { reason: 'provider_failure' },
    false,
  );
}

/** A provider answer that does not have the shape the protocol promises. */
export function malformed(modelId: string, what: string): DomainError {
  return new DomainError(
    'runtime_error',
    `model ${modelId}: malformed provider response: ${what}`,
    { reason: 'malformed_response' },
    false,
  );
}
