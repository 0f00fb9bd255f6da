import { ADMIN_KEY, Host, TestDatabase, event, parseSse, startDemoRunner, type Proc } from './harness';

jest.setTimeout(60_000);

/** Stream tokens and the end-of-stream 204, over HTTP (the Chromium test is browser-chromium). */
describe('browser streams: run-scoped stream tokens and 204 after the end', () => {
  const db = new TestDatabase();
  const host = new Host(db);
  let runner: Proc;
  let platformKey: string;

  const run = async () => {
    const r = await host.api('POST', '/v1/events', event('echo', 'hello brave new world'), platformKey);
    expect(r.status).toBe(202);
    return r.body.run_id as string;
  };
  const mint = async (runId: string, key: string | null = platformKey) =>
    host.api('POST', `/v1/runs/${runId}/stream-tokens`, undefined, key);
  const get = (path: string, headers: Record<string, string> = {}) => fetch(`${host.http}${path}`, { headers });

  beforeAll(async () => {
    await host.start();
    let runnerId: string;
    ({ runner, runnerId } = await startDemoRunner(host));
    expect((await host.api('POST', '/v1/admin/agents', { agent_id: 'echo', runner_id: runnerId })).status).toBe(201);
    const key = await host.api('POST', '/v1/admin/api-keys', { name: 'page', role: 'platform' });
    platformKey = key.body.key;
  });
  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await db.drop();
  });

  it("mints a token with a key and follows the run's stream with it, without Authorization", async () => {
    const runId = await run();
    const minted = await mint(runId);
    expect(minted.status).toBe(201);
    expect(minted.body).toEqual({
      token: expect.stringMatching(/^rhst_/),
      run_id: runId,
      expires_at: expect.any(String),
      events_url: `/v1/runs/${runId}/events?stream_token=${encodeURIComponent(minted.body.token)}`,
    });
    expect(Date.parse(minted.body.expires_at) - Date.now()).toBeGreaterThan(60_000);
    const res = await get(minted.body.events_url);
    expect(res.status).toBe(200);
    const frames = parseSse(await res.text());
    expect(frames.at(-1)!.event).toBe('run.completed');
    expect(frames.map((f) => f.id)).toEqual(frames.map((_, i) => i + 1));
    // The same with the bearer key: the token is an alternative, not a requirement.
    expect((await host.sse(runId)).length).toBe(frames.length);
  });

  it('accepts the token on its own run stream only', async () => {
    const [a, b] = [await run(), await run()];
    const { token } = (await mint(a)).body;
    const other = await get(`/v1/runs/${b}/events?stream_token=${token}`);
    expect(other.status).toBe(403);
    expect(((await other.json()) as any).error).toMatchObject({
      code: 'unauthorized',
      message: 'stream_token: issued for another run',
    });
    // Not a credential anywhere else, even for the same run.
    for (const path of [`/v1/runs/${a}`, '/v1/runs', `/v1/conversations/c1/transcript`]) {
      const res = await get(`${path}?stream_token=${token}`);
      expect([path, res.status]).toEqual([path, 401]);
      expect(((await res.json()) as any).error.message).toContain('missing bearer API key');
    }
    const bad = await get(`/v1/runs/${a}/events?stream_token=rhst_bogus.${'A'.repeat(43)}`);
    expect(bad.status).toBe(401);
    expect(((await bad.json()) as any).error.details).toEqual({ field: 'stream_token' });
  });

  it('refuses a token for an unknown run, without a key, and with a revoked key', async () => {
    expect((await mint('0b6c6c1e-9a43-4d55-9c1c-3c1f3f7a2f10')).status).toBe(404);
    const runId = await run();
    expect((await mint(runId, null)).status).toBe(401);
    const temp = await host.api('POST', '/v1/admin/api-keys', { name: 'temp', role: 'platform' });
    const { token } = (await mint(runId, temp.body.key)).body;
    expect((await get(`/v1/runs/${runId}/events?stream_token=${token}`)).status).toBe(200);
    expect((await host.api('DELETE', `/v1/admin/api-keys/${temp.body.id}`)).status).toBe(204);
    const revoked = await get(`/v1/runs/${runId}/events?stream_token=${token}`);
    expect(revoked.status).toBe(401);
    expect(((await revoked.json()) as any).error.message).toContain('revoked');
  });

  it('answers 204 to a resume at or past the terminal result (EventSource stops), 200 with the rest before it', async () => {
    const runId = await run();
    const frames = await host.sse(runId);
    const last = frames.at(-1)!.id;
    const { token } = (await mint(runId)).body;
    for (const [headers, query] of [
      [{ authorization: `Bearer ${ADMIN_KEY}`, 'last-event-id': String(last) }, ''],
      [{ 'last-event-id': String(last) }, `?stream_token=${token}`],
      [{ authorization: `Bearer ${ADMIN_KEY}` }, `?after=${last + 5}`],
    ] as const) {
      const res = await get(`/v1/runs/${runId}/events${query}`, headers);
      expect(res.status).toBe(204);
      expect(await res.text()).toBe('');
    }
    const rest = await get(`/v1/runs/${runId}/events?stream_token=${token}`, { 'last-event-id': String(last - 1) });
    expect(rest.status).toBe(200);
    expect(parseSse(await rest.text()).map((f) => f.event)).toEqual(['run.completed']);
  });

  it('never writes a stream token to the log', async () => {
    const runId = await run();
    const { token } = (await mint(runId)).body;
    await (await get(`/v1/runs/${runId}/events?stream_token=${token}`)).text();
    await (await get(`/v1/runs/${runId}/events?stream_token=${token}x`)).text();
    const signature = token.split('.')[1];
    // The whole log read (the last test: the host is stopped and its pipes closed), so that the
    // absence means something — a line still in the pipe would pass unseen.
    await host.stop();
    await host.proc.closed;
    expect(host.proc.logs()).not.toContain(signature);
  });
});
