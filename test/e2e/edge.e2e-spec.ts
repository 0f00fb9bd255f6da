import { ADMIN_KEY, Host, TestDatabase, completeLines } from './harness';

jest.setTimeout(60_000);

/** The HTTP edge: body and content-type rules as protocol errors, the OpenAPI document, JSON-line logs. */
describe('HTTP edge', () => {
  const db = new TestDatabase();
  const host = new Host(db);

  const post = async (path: string, body: string | Uint8Array, headers: Record<string, string>) => {
    const res = await fetch(`${host.http}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_KEY}`, ...headers },
      body,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };

  beforeAll(async () => {
    await host.start();
  });

  afterAll(async () => {
    await host.stop();
    await db.drop();
  });

  it.each([
    ['a wrong content type', '{}', { 'content-type': 'application/xml' }, 'Content-Type'],
    ['text/plain on a JSON route', '{}', { 'content-type': 'text/plain' }, 'Content-Type'],
    ['a non-UTF-8 charset', '{}', { 'content-type': 'application/json; charset=latin1' }, 'Content-Type'],
    ['malformed JSON', '{"agent_id":', { 'content-type': 'application/json' }, 'body'],
    ['JSON that is not an object or array', '"text"', { 'content-type': 'application/json' }, 'body'],
    ['an empty JSON body (read as {})', '', { 'content-type': 'application/json' }, 'agent_id'],
  ])('answers %s with 400 invalid_argument naming the field', async (_what, body, headers, field) => {
    const r = await post('/v1/events', body, headers);
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: 'invalid_argument', retryable: false });
    expect(r.body.error.details.field).toBe(field);
  });

  it('answers a body without a content type with 400 invalid_argument', async () => {
    // fetch would add text/plain to a string body; a Uint8Array goes without a content type.
    const r = await post('/v1/events', new TextEncoder().encode('{}'), {});
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: 'invalid_argument', details: { field: 'Content-Type' } });
  });

  it('answers unknown routes and malformed URLs with the error model', async () => {
    const missing = await fetch(`${host.http}/v1/nothing`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: unknown }).error).toMatchObject({ code: 'not_found' });
    const bad = await fetch(`${host.http}/v1/runs/%zz`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: unknown }).error).toMatchObject({ code: 'invalid_argument' });
  });

  it('serves the OpenAPI document (bearer = opaque API key, not JWT) and the docs UI', async () => {
    const doc = (await (await fetch(`${host.http}/openapi.json`)).json()) as any;
    expect(doc.paths['/v1/runs/{run_id}/events']).toBeDefined();
    const scheme = doc.components.securitySchemes.bearer;
    expect(scheme).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'API key' });
    expect(JSON.stringify(scheme)).not.toMatch(/"JWT"/);
    const ui = await fetch(`${host.http}/docs`);
    expect(ui.status).toBe(200);
    expect(await ui.text()).toContain('swagger-ui');
  });

  it('logs JSON lines only', () => {
    // Complete lines only: the last one may still be in the pipe, cut where a read ended.
    const lines = completeLines(host.proc.logs());
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      expect(line).not.toContain('\u001b['); // no ANSI colour
      expect(() => JSON.parse(line) as unknown).not.toThrow();
    }
  });
});
