import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { BrowserConfig } from '@libs/config';

const ALLOWED_METHODS = 'GET, POST, PUT, DELETE';
/** What the API reads from a request; a preflight asking for anything else is refused by the browser. */
const ALLOWED_HEADERS = 'authorization, content-type, idempotency-key, last-event-id';
/** Browsers may cache a preflight answer this long (Chromium caps it at 2 hours). */
const PREFLIGHT_MAX_AGE_S = 600;

/**
 * CORS for the configured origins (CORS_ALLOWED_ORIGINS; none = off, and then a preflight is the
 * 404 any unknown route gets). Headers go on the raw response so that hijacked answers (SSE) carry
 * them too. The API authenticates with bearer keys, never cookies: no credentials mode.
 */
export function registerCors(app: FastifyInstance, config: BrowserConfig): void {
  if (!config.corsAnyOrigin && config.corsOrigins.length === 0) {
    return;
  }
  const allowed = new Set(config.corsOrigins);
  const allows = (origin: string) => config.corsAnyOrigin || allowed.has(origin.toLowerCase());
  app.addHook('onRequest', (req: FastifyRequest, reply: FastifyReply, done: () => void) => {
    const origin = req.headers.origin;
    const preflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
    if (origin === undefined) {
      done();
      return;
    }
    // The answer depends on the Origin: caches must not hand one origin's answer to another.
    reply.raw.setHeader('vary', 'Origin');
    if (!allows(origin)) {
      if (preflight) {
        void reply.code(403).send({
          error: {
            code: 'unauthorized',
            message: `origin ${origin} is not allowed (CORS_ALLOWED_ORIGINS)`,
            retryable: false,
            details: { field: 'Origin' },
          },
        });
        return;
      }
      // A simple request from another origin is answered without CORS headers: the browser hides it.
      done();
      return;
    }
    reply.raw.setHeader('access-control-allow-origin', config.corsAnyOrigin ? '*' : origin);
    if (preflight) {
      void reply
        .code(204)
        .header('access-control-allow-methods', ALLOWED_METHODS)
        .header('access-control-allow-headers', ALLOWED_HEADERS)
        .header('access-control-max-age', String(PREFLIGHT_MAX_AGE_S))
        .send();
      return;
    }
    done();
  });
}
