import { Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import type { JsonObject } from './json';

/** The host's protocol error codes (the `x-error-code` trailer of a failed host API call). */
export const HOST_ERROR_CODES = [
  'unauthenticated',
  'unauthorized',
  'not_found',
  'invalid_argument',
  'conflict',
  'payload_too_large',
  'rate_limited',
  'deadline_exceeded',
  'unavailable',
  'runtime_error',
] as const;
export type HostErrorCode = (typeof HOST_ERROR_CODES)[number];

/**
 * A host API call the host refused or could not serve: the protocol error code, whether the
 * host says a retry may succeed, its machine-readable details (`x-error-details`) and the
 * gRPC status. Each code has its own subclass, so `catch (e) { if (e instanceof NotFoundError) }`
 * works, as does `e.code === 'not_found'`.
 */
export class HostApiError extends Error {
  constructor(
    readonly code: HostErrorCode,
    message: string,
    readonly retryable: boolean,
    readonly details: JsonObject = {},
    /** The host API method, e.g. `CallTool`. */
    readonly method = '',
    readonly grpcStatus: GrpcStatus = GRPC_STATUS_OF[code],
  ) {
    super(method ? `${method}: ${code}: ${message}` : `${code}: ${message}`);
    this.name = new.target.name;
  }
}

export class UnauthenticatedError extends HostApiError {}
export class UnauthorizedError extends HostApiError {}
export class NotFoundError extends HostApiError {}
export class InvalidArgumentError extends HostApiError {}
export class ConflictError extends HostApiError {}
export class PayloadTooLargeError extends HostApiError {}
export class RateLimitedError extends HostApiError {}
export class DeadlineExceededError extends HostApiError {}
export class UnavailableError extends HostApiError {}
export class HostRuntimeError extends HostApiError {}

const CLASS_OF: Record<HostErrorCode, typeof HostApiError> = {
  unauthenticated: UnauthenticatedError,
  unauthorized: UnauthorizedError,
  not_found: NotFoundError,
  invalid_argument: InvalidArgumentError,
  conflict: ConflictError,
  payload_too_large: PayloadTooLargeError,
  rate_limited: RateLimitedError,
  deadline_exceeded: DeadlineExceededError,
  unavailable: UnavailableError,
  runtime_error: HostRuntimeError,
};

const GRPC_STATUS_OF: Record<HostErrorCode, GrpcStatus> = {
  unauthenticated: GrpcStatus.UNAUTHENTICATED,
  unauthorized: GrpcStatus.PERMISSION_DENIED,
  not_found: GrpcStatus.NOT_FOUND,
  invalid_argument: GrpcStatus.INVALID_ARGUMENT,
  conflict: GrpcStatus.FAILED_PRECONDITION,
  payload_too_large: GrpcStatus.RESOURCE_EXHAUSTED,
  rate_limited: GrpcStatus.RESOURCE_EXHAUSTED,
  deadline_exceeded: GrpcStatus.DEADLINE_EXCEEDED,
  unavailable: GrpcStatus.UNAVAILABLE,
  runtime_error: GrpcStatus.INTERNAL,
};

/** Without an `x-error-code` trailer (a proxy, a transport failure): the code from the gRPC status. */
const CODE_OF_STATUS: Partial<Record<GrpcStatus, HostErrorCode>> = {
  [GrpcStatus.UNAUTHENTICATED]: 'unauthenticated',
  [GrpcStatus.PERMISSION_DENIED]: 'unauthorized',
  [GrpcStatus.NOT_FOUND]: 'not_found',
  [GrpcStatus.INVALID_ARGUMENT]: 'invalid_argument',
  [GrpcStatus.FAILED_PRECONDITION]: 'conflict',
  [GrpcStatus.RESOURCE_EXHAUSTED]: 'rate_limited',
  [GrpcStatus.DEADLINE_EXCEEDED]: 'deadline_exceeded',
  [GrpcStatus.UNAVAILABLE]: 'unavailable',
  [GrpcStatus.CANCELLED]: 'unavailable',
};

const RETRYABLE_BY_DEFAULT: ReadonlySet<HostErrorCode> = new Set(['unavailable', 'rate_limited', 'deadline_exceeded']);

export function isHostErrorCode(value: unknown): value is HostErrorCode {
  return typeof value === 'string' && (HOST_ERROR_CODES as readonly string[]).includes(value);
}

/** The typed error of one code (what the fake host throws, and what authors may throw in tests). */
export function hostApiError(
  code: HostErrorCode,
  message: string,
  opts: { retryable?: boolean; details?: JsonObject; method?: string } = {},
): HostApiError {
  const Class = CLASS_OF[code];
  return new Class(code, message, opts.retryable ?? RETRYABLE_BY_DEFAULT.has(code), opts.details ?? {}, opts.method);
}

/** The typed error of a failed gRPC call to the host API (reads the `x-error-*` trailers). */
export function hostApiErrorFromGrpc(method: string, err: Partial<ServiceError>): HostApiError {
  const metadata = err.metadata instanceof Metadata ? err.metadata : undefined;
  const first = (key: string): string | undefined => {
    const v = metadata?.get(key)[0];
    return v === undefined ? undefined : String(v);
  };
  const grpcStatus = err.code ?? GrpcStatus.UNKNOWN;
  const given = first('x-error-code');
  const code: HostErrorCode = isHostErrorCode(given) ? given : (CODE_OF_STATUS[grpcStatus] ?? 'runtime_error');
  const retryableText = first('x-error-retryable');
  const retryable = retryableText === undefined ? RETRYABLE_BY_DEFAULT.has(code) : retryableText === 'true';
  let details: JsonObject = {};
  const detailsText = first('x-error-details');
  if (detailsText) {
    try {
      const parsed: unknown = JSON.parse(detailsText);
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
        details = parsed as JsonObject;
      }
    } catch {
      details = { raw: detailsText };
    }
  }
  const Class = CLASS_OF[code];
  return new Class(code, err.details || err.message || GrpcStatus[grpcStatus], retryable, details, method, grpcStatus);
}

/** Why a run's signal fired. */
export type AbortKind = 'cancelled' | 'deadline' | 'disconnected' | 'stopped';

/** The `reason` of a run's AbortSignal, and what host API calls reject with once it fired. */
export class RunAbortedError extends Error {
  constructor(
    readonly kind: AbortKind,
    message: string,
  ) {
    super(message);
    this.name = 'RunAbortedError';
  }
}

/** The host refused the plugin (token, identity): reconnecting would not help. */
export class PluginRefusedError extends Error {
  constructor(
    readonly grpcStatus: GrpcStatus,
    readonly details: string,
  ) {
    super(`the host refused this plugin: ${GrpcStatus[grpcStatus]}: ${details}`);
    this.name = 'PluginRefusedError';
  }
}
