import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Where `npm run build` puts the console (vite build of apps/console), beside the compiled host. */
export const CONSOLE_DIR = path.resolve(__dirname, '..', '..', '..', '..', 'console');
export const CONSOLE_PREFIX = '/console';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

/**
 * Same origin only, nothing from elsewhere: the console calls the API of the host that served it
 * (works with CORS off) and bundles everything (no CDN).
 */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
  /** Vite names assets by content hash (assets/…-<hash>.js): they never change, so they are cached for good. */
  immutable: boolean;
}

/** Every file of the built console, read once at boot (the bundle is small). */
export function loadConsole(dir: string): Map<string, Asset> | null {
  if (!fs.existsSync(path.join(dir, 'index.html'))) {
    return null;
  }
  const files = new Map<string, Asset>();
  const walk = (sub: string) => {
    for (const entry of fs.readdirSync(path.join(dir, sub), { withFileTypes: true })) {
      const rel = sub ? `${sub}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        walk(rel);
      } else if (entry.isFile()) {
        const body = fs.readFileSync(path.join(dir, rel));
        files.set(rel, {
          body,
          type: TYPES[path.extname(entry.name)] ?? 'application/octet-stream',
          etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
          immutable: rel.startsWith('assets/'),
        });
      }
    }
  };
  walk('');
  return files;
}

/**
 * Serves the admin console (docs/console.md) at /console from the same process and port as the API:
 * hashed assets `immutable`, `index.html` `no-cache`, and every other path under /console answered
 * with `index.html` so that a deep link (/console/runs/<id>) opens its page. Plain Fastify routes
 * outside Nest: no guard, no interceptor, nothing added to the API's requests. The files are public
 * (the admin key is entered in the page and kept in its sessionStorage). A host built without the
 * console (no dist/console) serves nothing there.
 */
export function registerConsole(app: FastifyInstance, dir = CONSOLE_DIR): boolean {
  const files = loadConsole(dir);
  if (!files) {
    return false;
  }
  const index = files.get('index.html')!;
  const send = (req: FastifyRequest, reply: FastifyReply, asset: Asset) => {
    void reply.headers({
      ...SECURITY_HEADERS,
      'content-type': asset.type,
      'cache-control': asset.immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
      etag: asset.etag,
    });
    if (req.headers['if-none-match'] === asset.etag) {
      void reply.code(304).send();
      return;
    }
    void reply.code(200).send(asset.body);
  };
  const handler = (req: FastifyRequest, reply: FastifyReply) => {
    const rest = (req.params as { '*'?: string })['*'] ?? '';
    const asset = files.get(rest);
    if (asset) {
      send(req, reply, asset);
      return;
    }
    if (rest.startsWith('assets/')) {
      // A missing hashed asset is a stale page after a deploy: a 404, not the page (it would parse as JS).
      void reply
        .code(404)
        .header('cache-control', 'no-cache')
        .send({
          error: {
            code: 'not_found',
            message: `url: console asset ${rest} not found`,
            retryable: false,
            details: { field: 'url' },
          },
        });
      return;
    }
    send(req, reply, index);
  };
  app.get(CONSOLE_PREFIX, (req, reply) => send(req, reply, index));
  app.get(`${CONSOLE_PREFIX}/*`, handler);
  return true;
}
