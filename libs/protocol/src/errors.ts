import { status as GrpcStatus } from '@grpc/grpc-js';

/** The protocol error codes (docs/api.md#errors). */
export const ERROR_CODES = [
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
export type ErrorCode = (typeof ERROR_CODES)[number];

/** `{code, message, retryable, details}` — the protocol error model on every wire. */
export interface ProtocolError {
  code: ErrorCode;
  message: string;
  retryable: boolean;
  details: Record<string, unknown>;
}

/** A failure the caller can act on. Services throw only these; transports map them. */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
    readonly retryable: boolean = defaultRetryable(code),
  ) {
    super(message);
    this.name = 'DomainError';
  }

  toProtocol(): ProtocolError {
    return { code: this.code, message: this.message, retryable: this.retryable, details: this.details };
  }
}

export function defaultRetryable(code: ErrorCode): boolean {
  return code === 'unavailable' || code === 'rate_limited' || code === 'deadline_exceeded';
}

function assertUnreachable(value: never): never {
  throw new Error(`unmapped error code ${String(value)}`);
}

/** The one code → HTTP status table. */
export function httpStatusOf(code: ErrorCode): number {
  switch (code) {
    case 'unauthenticated':
      return 401;
    case 'unauthorized':
      return 403;
    case 'not_found':
      return 404;
    case 'invalid_argument':
      return 400;
    case 'conflict':
      return 409;
    case 'payload_too_large':
      return 413;
    case 'rate_limited':
      return 429;
    case 'deadline_exceeded':
      return 504;
    case 'unavailable':
      return 503;
    case 'runtime_error':
      return 500;
    default:
      return assertUnreachable(code);
  }
}

/** The one code → gRPC status table. */
export function grpcStatusOf(code: ErrorCode): GrpcStatus {
  switch (code) {
    case 'unauthenticated':
      return GrpcStatus.UNAUTHENTICATED;
    case 'unauthorized':
      return GrpcStatus.PERMISSION_DENIED;
    case 'not_found':
      return GrpcStatus.NOT_FOUND;
    case 'invalid_argument':
      return GrpcStatus.INVALID_ARGUMENT;
    case 'conflict':
      return GrpcStatus.FAILED_PRECONDITION;
    case 'payload_too_large':
      return GrpcStatus.RESOURCE_EXHAUSTED;
    case 'rate_limited':
      return GrpcStatus.RESOURCE_EXHAUSTED;
    case 'deadline_exceeded':
      return GrpcStatus.DEADLINE_EXCEEDED;
    case 'unavailable':
      return GrpcStatus.UNAVAILABLE;
    case 'runtime_error':
      return GrpcStatus.INTERNAL;
    default:
      return assertUnreachable(code);
  }
}
