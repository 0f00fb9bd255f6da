import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { throwError, type Observable } from 'rxjs';
import { DomainError, httpStatusOf, type ErrorCode, type ProtocolError } from '@libs/protocol';
import { GrpcStatusError, unexpectedError } from '@libs/runner-gateway';
import { BODY_LIMIT_BYTES } from '../edge/http-adapter';

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
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    if (reply.sent || reply.raw.headersSent) {
      // A streaming answer (SSE) already started: all that is left is to end it.
      reply.raw.end();
      return;
    }
    const retryMs =
      error.code === 'rate_limited' || error.code === 'unavailable' ? error.details.retry_after_ms : undefined;
    if (typeof retryMs === 'number') {
      // docs/tenancy.md#quotas: a refused quota says when to come back; so does a draining process
      // (docs/deployment.md#graceful-shutdown).
      void reply.header('retry-after', String(Math.max(1, Math.ceil(retryMs / 1000))));
    }
    const send = () => void reply.status(httpStatusOf(error.code)).send({ error });
    const req = reply.request.raw;
    if (req.complete || req.destroyed) {
      send();
      return;
    }
    // Refused before the body was read (too large, wrong type): read it off first, as the former
    // body parser did, so the client can finish sending and then read the answer (no EPIPE).
    req.once('end', send);
    req.resume();
  }

  private toProtocol(exception: unknown): ProtocolError {
    if (exception instanceof DomainError) {
      return exception.toProtocol();
    }
    if (exception instanceof HttpException) {
      if (exception.getStatus() === 413) {
        // Fastify's body limit (checked before any parser or controller runs).
        return new DomainError(
          'payload_too_large',
          `request body: larger than the limit of ${BODY_LIMIT_BYTES} bytes`,
          {
            field: 'body',
          },
        ).toProtocol();
      }
      const code = HTTP_CODES[exception.getStatus()];
      if (code) {
        return new DomainError(code, exception.message).toProtocol();
      }
    }
    return unexpectedError(exception, this.logger).toProtocol();
  }
}
