import { Metadata, type StatusObject } from '@grpc/grpc-js';
import { DomainError, grpcStatusOf, type ErrorCode } from '@libs/protocol';

/**
 * A gRPC status for a protocol error: the mapped status code, the message as details, and the
 * protocol code and retryable flag in the trailing metadata (`x-error-code`, `x-error-retryable`).
 */
export function grpcErrorOf(code: ErrorCode, message: string, retryable?: boolean): Partial<StatusObject> & Error {
  const e = new DomainError(code, message, {}, retryable);
  const metadata = new Metadata();
  metadata.set('x-error-code', e.code);
  metadata.set('x-error-retryable', String(e.retryable));
  return Object.assign(new Error(message), { code: grpcStatusOf(code), details: message, metadata });
}
