import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Fastify from 'fastify';
import { registerConsole } from './console';

describe('registerConsole (the admin console at /console)', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-spec-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const build = (files: Record<string, string>) => {
    for (const [name, body] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
      fs.writeFileSync(path.join(dir, name), body);
    }
  };

  it('serves nothing when the console was not built (no index.html)', async () => {
    const app = Fastify();
    expect(registerConsole(app, dir)).toBe(false);
    expect((await app.inject({ url: '/console' })).statusCode).toBe(404);
  });

  it('serves index.html no-cache, hashed assets immutable with an ETag, deep links as the page', async () => {
    build({ 'index.html': '<!doctype html><p>console</p>', 'assets/index-AbC123.js': 'console.log(1)' });
    const app = Fastify({ routerOptions: { caseSensitive: false, ignoreTrailingSlash: true } });
    expect(registerConsole(app, dir)).toBe(true);

    for (const url of ['/console', '/console/', '/console/runs/r1/snapshot?compare=x']) {
      const page = await app.inject({ url });
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(page.headers['cache-control']).toBe('no-cache');
      expect(page.headers['content-security-policy']).toContain("script-src 'self'");
      expect(page.headers['x-content-type-options']).toBe('nosniff');
      expect(page.body).toBe('<!doctype html><p>console</p>');
    }

    // The asset name keeps its case (content hashes are mixed-case) though routes match case-insensitively.
    const js = await app.inject({ url: '/console/assets/index-AbC123.js' });
    expect(js.statusCode).toBe(200);
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const etag = js.headers.etag as string;
    expect(etag).toMatch(/^"[\w-]+"$/);
    const again = await app.inject({ url: '/console/assets/index-AbC123.js', headers: { 'if-none-match': etag } });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
  });

  it('answers 404 for a missing hashed asset (never the page, which would run as a script)', async () => {
    build({ 'index.html': '<p>x</p>' });
    const app = Fastify();
    registerConsole(app, dir);
    const res = await app.inject({ url: '/console/assets/index-OLD.js' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ error: { code: 'not_found', details: { field: 'url' } } });
  });
});
