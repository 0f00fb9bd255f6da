import { ADMIN_KEY, Host, TestDatabase } from './harness';

jest.setTimeout(60_000);

const ALLOWED = 'http://console.example.test:8080';

async function preflight(host: Host, origin: string, path = '/v1/runs') {
  return fetch(`${host.http}${path}`, {
    method: 'OPTIONS',
    headers: {
      origin,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type',
    },
  });
}

describe('CORS: off by default, configured origins only', () => {
  describe('CORS_ALLOWED_ORIGINS unset', () => {
    const db = new TestDatabase();
    const host = new Host(db);
    beforeAll(() => host.start());
    afterAll(async () => {
      await host.stop();
      await db.drop();
    });

    it('answers no preflight and sends no CORS header', async () => {
      const pre = await preflight(host, ALLOWED);
      expect(pre.status).toBe(404);
      expect(pre.headers.get('access-control-allow-origin')).toBeNull();
      const get = await fetch(`${host.http}/v1/runs`, {
        headers: { origin: ALLOWED, authorization: `Bearer ${ADMIN_KEY}` },
      });
      expect(get.status).toBe(200);
      expect(get.headers.get('access-control-allow-origin')).toBeNull();
    });
  });

  describe(`CORS_ALLOWED_ORIGINS=${ALLOWED}`, () => {
    const db = new TestDatabase();
    const host = new Host(db, { CORS_ALLOWED_ORIGINS: `https://other.example.test, ${ALLOWED}` });
    beforeAll(() => host.start());
    afterAll(async () => {
      await host.stop();
      await db.drop();
    });

    it('answers the preflight of an allowed origin with 204 and what the API reads', async () => {
      const pre = await preflight(host, ALLOWED, '/v1/events');
      expect(pre.status).toBe(204);
      expect(pre.headers.get('access-control-allow-origin')).toBe(ALLOWED);
      expect(pre.headers.get('vary')).toContain('Origin');
      expect(pre.headers.get('access-control-allow-methods')).toContain('POST');
      const allowedHeaders = pre.headers.get('access-control-allow-headers')!.split(/,\s*/);
      expect(allowedHeaders).toEqual(
        expect.arrayContaining(['authorization', 'content-type', 'idempotency-key', 'last-event-id']),
      );
      expect(Number(pre.headers.get('access-control-max-age'))).toBeGreaterThan(0);
      expect(pre.headers.get('access-control-allow-credentials')).toBeNull();
    });

    it('refuses the preflight of another origin with the error model, and leaves its answers without CORS headers', async () => {
      const pre = await preflight(host, 'https://evil.example.test');
      expect(pre.status).toBe(403);
      expect(pre.headers.get('access-control-allow-origin')).toBeNull();
      expect((await pre.json()) as any).toEqual({
        error: {
          code: 'unauthorized',
          message: 'origin https://evil.example.test is not allowed (CORS_ALLOWED_ORIGINS)',
          retryable: false,
          details: { field: 'Origin' },
        },
      });
      const get = await fetch(`${host.http}/v1/runs`, {
        headers: { origin: 'https://evil.example.test', authorization: `Bearer ${ADMIN_KEY}` },
      });
      expect(get.headers.get('access-control-allow-origin')).toBeNull();
    });

    it('puts the allowed origin on answers, errors and 404s included', async () => {
      for (const [path, key, status] of [
        ['/v1/runs', ADMIN_KEY, 200],
        ['/v1/runs', null, 401],
        ['/v1/nothing-here', ADMIN_KEY, 404],
      ] as const) {
        const res = await fetch(`${host.http}${path}`, {
          headers: { origin: ALLOWED, ...(key ? { authorization: `Bearer ${key}` } : {}) },
        });
        expect([path, res.status, res.headers.get('access-control-allow-origin')]).toEqual([path, status, ALLOWED]);
      }
    });

    it('treats an origin case-insensitively (browsers send it lower-cased)', async () => {
      const pre = await preflight(host, ALLOWED.toUpperCase().replace('HTTP://', 'http://'));
      expect(pre.status).toBe(204);
    });
  });
});
