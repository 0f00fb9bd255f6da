import { isUtf8 } from 'node:buffer';
import * as http from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { AppConfig } from '@libs/config';
import { DomainError, jsonTextProblem } from '@libs/protocol';
import { TEXT_BODY, TEXT_TYPES } from '../http/text-body';
import { registerConsole } from './console';
import { registerCors } from './cors';

/** Every request body (JSON or a raw text document) is capped at 5 MiB. */
export const BODY_LIMIT_BYTES = 5 * 1024 * 1024;

/**
 * The HTTP server: Fastify with the body rules the API has always had — JSON objects or arrays
 * only, an empty JSON body reads as `{}`, UTF-8 only, 5 MiB — and every refusal as the protocol
 * error (400 invalid_argument / 413 payload_too_large), never Fastify's own 415 or 500.
 */
export function createHttpAdapter(config: AppConfig): FastifyAdapter {
  const adapter = new FastifyAdapter({
    bodyLimit: BODY_LIMIT_BYTES,
    // Express matched paths case-insensitively and ignored a trailing slash; clients may rely on it.
    // Path ids go up to 255 characters (conversation ids), longer than Fastify's default of 100.
    routerOptions: { caseSensitive: false, ignoreTrailingSlash: true, maxParamLength: 1024 },
    frameworkErrors: frameworkError as never, // typed against the adapter's own copy of fastify
    clientErrorHandler,
    ...(config.tls ? { https: { cert: config.tls.cert, key: config.tls.key } } : {}),
  });
  registerBodyParsers(adapter.getInstance());
  registerCors(adapter.getInstance(), config.browser);
  registerConsole(adapter.getInstance());
  return adapter;
}

/** Requests that never reach a route (a malformed URL) still answer with the error model. */
function frameworkError(error: FastifyError, _req: FastifyRequest, reply: FastifyReply): void {
  // The input at fault is the URL itself (not decodable, a path segment over the limit).
  const message = error.message.length > 300 ? `${error.message.slice(0, 299)}…` : error.message;
  void reply.code(400).send({
    error: { code: 'invalid_argument', message: `url: ${message}`, retryable: false, details: { field: 'url' } },
  });
}

/**
 * Requests Node's HTTP parser refuses before Fastify sees them (headers over Node's limit, a
 * malformed request, a request that timed out) answer with the error model too, not Fastify's
 * own body; the connection is closed after the answer, since the parser cannot go on.
 */
export function clientErrorHandler(error: NodeJS.ErrnoException, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) {
    return;
  }
  const [status, reason, protocol] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? [
          431,
          'Request Header Fields Too Large',
          new DomainError(
            'payload_too_large',
            `request headers: larger than the limit of ${http.maxHeaderSize} bytes`,
            {
              field: 'headers',
              limit: http.maxHeaderSize,
            },
          ),
        ]
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', new DomainError('deadline_exceeded', 'request: not received in time', {}, true)]
        : [400, 'Bad Request', new DomainError('invalid_argument', 'request: not a valid HTTP request', {})];
  const body = JSON.stringify({ error: protocol.toProtocol() });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

function charsetOf(contentType: string | undefined): string | undefined {
  return /;\s*charset="?([^";]+)/i.exec(contentType ?? '')?.[1];
}

function requireUtf8(req: FastifyRequest): void {
  const charset = charsetOf(req.headers['content-type']);
  if (charset && !/^utf-?8$/i.test(charset)) {
    throw new DomainError('invalid_argument', `request body: charset ${charset} is not supported; send UTF-8`, {
      field: 'Content-Type',
    });
  }
}

function acceptsText(req: FastifyRequest): boolean {
  return req.routeOptions.config[TEXT_BODY] === true;
}

function wrongType(req: FastifyRequest): DomainError {
  const got = req.headers['content-type'] ?? 'none';
  const wanted = acceptsText(req) ? 'application/json, text/plain or text/markdown' : 'application/json';
  return new DomainError('invalid_argument', `Content-Type: must be ${wanted} (got ${got})`, {
    field: 'Content-Type',
  });
}

function registerBodyParsers(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  // Bytes, not a string: decoding to a string would replace invalid UTF-8 with U+FFFD silently.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body: Buffer, done) => {
    try {
      requireUtf8(req);
      if (!isUtf8(body)) {
        throw new DomainError('invalid_argument', 'request body: not valid UTF-8', { field: 'body' });
      }
      done(null, parseJsonBody(body.toString('utf8')));
    } catch (e) {
      done(e as Error, undefined);
    }
  });
  // Raw documents (knowledge uploads) are handed to the route as a Buffer; other routes refuse them.
  app.addContentTypeParser(TEXT_TYPES, { parseAs: 'buffer' }, (req, body: Buffer, done) => {
    if (!acceptsText(req)) {
      done(wrongType(req), undefined);
      return;
    }
    try {
      requireUtf8(req);
      done(null, body);
    } catch (e) {
      done(e as Error, undefined);
    }
  });
  app.addContentTypeParser('*', (req: FastifyRequest, _payload, done) => done(wrongType(req), undefined));
}

/**
 * The JSON rules of the former body parser: empty is `{}`, and only an object or an array is a
 * body. A body holding more values than JSON.parse handles in a few milliseconds is refused from
 * its text, before it is parsed (and before the key is checked: parsing comes first).
 */
export function parseJsonBody(body: string): unknown {
  const text = body.trim();
  if (text === '') {
    return {};
  }
  if (text[0] !== '{' && text[0] !== '[') {
    throw new DomainError('invalid_argument', 'request body: not valid JSON (an object or an array)', {
      field: 'body',
    });
  }
  const tooMany = jsonTextProblem(text);
  if (tooMany) {
    throw new DomainError('invalid_argument', `body: ${tooMany}`, { field: 'body' });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new DomainError('invalid_argument', 'request body: not valid JSON', { field: 'body' });
  }
}

export type { FastifyReply, FastifyRequest };
