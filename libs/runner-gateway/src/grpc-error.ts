import { randomUUID } from 'node:crypto';
import { Metadata, status } from '@grpc/grpc-js';
import { DomainError, grpcStatusOf, type ErrorCode } from '@libs/protocol';

/**
 * A finished gRPC status for a protocol error: the mapped status code, the message as details,
 * and the protocol code, retryable flag and details in the trailing metadata (`x-error-code`,
 * `x-error-retryable`, `x-error-details` as JSON when there are any). grpc-js sends `code`, `details` and `metadata` of an emitted error as is.
 */
export class GrpcStatusError extends Error {
  readonly code: status;
  readonly details: string;
  readonly metadata: Metadata;

  constructor(error: DomainError, code: status = grpcStatusOf(error.code)) {
    super(error.message);
    this.name = 'GrpcStatusError';
    this.code = code;
    // Message and details travel in HTTP/2 trailers: a message echoing a huge input (a 70,000-
    // character plugin name) would pass the peer's header-list limit and break the whole
    // connection, with every other call on it.
    this.details = clip(error.message, MAX_MESSAGE_CHARS);
    this.metadata = new Metadata();
    this.metadata.set('x-error-code', error.code);
    this.metadata.set('x-error-retryable', String(error.retryable));
    if (Object.keys(error.details).length > 0) {
      // Machine-readable detail for the runner (e.g. {reason: "context_length_exceeded"}).
      const json = asciiJson(error.details);
      this.metadata.set('x-error-details', json.length <= MAX_DETAILS_CHARS ? json : '{"truncated":true}');
    }
  }

  /** A declared RPC this host does not serve yet. */
  static unimplemented(message: string): GrpcStatusError {
    return new GrpcStatusError(new DomainError('runtime_error', message, {}, false), status.UNIMPLEMENTED);
  }
}

const MAX_MESSAGE_CHARS = 1024;
const MAX_DETAILS_CHARS = 2048;

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * JSON with every character outside printable ASCII escaped: a non-binary metadata value may hold
 * nothing else, and details echo caller input (a run_id of invalid UTF-8 decodes to U+FFFD).
 * Without this, building the trailer throws and the call ends UNKNOWN without `x-error-code`.
 */
function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export function grpcErrorOf(code: ErrorCode, message: string, retryable?: boolean): GrpcStatusError {
  return new GrpcStatusError(new DomainError(code, message, {}, retryable));
}

/**
 * An error no rule expected, as the protocol error the caller sees: `runtime_error` naming only a
 * fresh error id; the error itself (with its stack) is logged under that id.
 */
export function unexpectedError(exception: unknown, logger: { error(line: object): void }): DomainError {
  const errorId = randomUUID();
  logger.error({
    error_id: errorId,
    msg: exception instanceof Error ? (exception.stack ?? exception.message) : String(exception),
  });
  return new DomainError('runtime_error', `internal error (error id ${errorId})`, { error_id: errorId }, false);
}

/**
 * Any error of a gRPC handler as the status the call ends with: a GrpcStatusError as it is, a
 * protocol error mapped, anything else `runtime_error` / INTERNAL (see unexpectedError).
 */
export function grpcStatusErrorOf(exception: unknown, logger: { error(line: object): void }): GrpcStatusError {
  if (exception instanceof GrpcStatusError) {
    return exception;
  }
  return new GrpcStatusError(exception instanceof DomainError ? exception : unexpectedError(exception, logger));
}
