import { randomUUID } from 'node:crypto';
import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { Response } from 'express';
import { throwError, type Observable } from 'rxjs';
import { DomainError, httpStatusOf, type ErrorCode, type ProtocolError } from '@libs/protocol';
import { GrpcStatusError } from '@libs/runner-gateway';

const HTTP_CODES: Record<number, ErrorCode> = {
  400: 'invalid_argument',
  401: 'unauthenticated',
  403: 'unauthorized',
  404: 'not_found',
  405: 'invalid_argument',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'invalid_argument',
  429: 'rate_limited',
};

/**
 * Every error leaves as the protocol error model: `{error: {code, message, retryable, details}}`
 * over HTTP, a mapped status over gRPC. Unknown errors become runtime_error / INTERNAL with a
 * logged error id and no detail.
 */
@Catch()
export class AllExceptionsFilter implements ExceptionFilter {
  private readonly logger = new Logger('Errors');

  catch(exception: unknown, host: ArgumentsHost): void | Observable<never> {
    if (exception instanceof GrpcStatusError && host.getType() === 'rpc') {
      return throwError(() => exception);
    }
    const error = this.toProtocol(exception);
    if (host.getType() === 'rpc') {
      return throwError(
        () => new GrpcStatusError(new DomainError(error.code, error.message, error.details, error.retryable)),
      );
    }
    if (host.getType() !== 'http') {
      return;
    }
    const res = host.switchToHttp().getResponse<Response>();
    if (res.headersSent) {
      res.end();
      return;
    }
    res.status(httpStatusOf(error.code)).json({ error });
  }

  private toProtocol(exception: unknown): ProtocolError {
    if (exception instanceof DomainError) {
      return exception.toProtocol();
    }
    if (exception instanceof HttpException) {
      const code = HTTP_CODES[exception.getStatus()];
      if (code) {
        return new DomainError(code, exception.message).toProtocol();
      }
    }
    const bodyError = bodyParserError(exception);
    if (bodyError) {
      return bodyError.toProtocol();
    }
    const errorId = randomUUID();
    this.logger.error({
      error_id: errorId,
      msg: exception instanceof Error ? (exception.stack ?? exception.message) : String(exception),
    });
    return {
      code: 'runtime_error',
      message: `internal error (error id ${errorId})`,
      retryable: false,
      details: { error_id: errorId },
    };
  }
}

/** Errors of the JSON body parser (raised before any controller runs) as protocol errors. */
function bodyParserError(e: unknown): DomainError | null {
  const { type, limit } = (e ?? {}) as { type?: unknown; limit?: unknown };
  if (type === 'entity.too.large') {
    return new DomainError('payload_too_large', `request body: larger than the limit of ${String(limit)} bytes`, {
      field: 'body',
    });
  }
  if (type === 'entity.parse.failed') {
    return new DomainError('invalid_argument', 'request body: not valid JSON', { field: 'body' });
  }
  if ((typeof type === 'string' && type.startsWith('encoding.')) || type === 'charset.unsupported') {
    return new DomainError('invalid_argument', 'request body: unsupported encoding or charset', { field: 'body' });
  }
  return null;
}
