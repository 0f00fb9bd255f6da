import { Host, TestDatabase, event, logged, startDemoRunner, waitFor, type Proc } from './harness';

jest.setTimeout(60_000);

describe('runs over real HTTP and gRPC with the demo runner', () => {
  const db = new TestDatabase();
  const host = new Host(db);
  let runner: Proc;
  let runnerId: string;

  const agent = async (agent_id: string, runner_config: Record<string, unknown>) => {
    const r = await host.api('POST', '/v1/admin/agents', { agent_id, runner_id: runnerId, runner_config });
    expect(r.status).toBe(201);
  };
  const start = async (agentId: string, text = 'hello brave new world', extra = {}) => {
    const r = await host.api('POST', '/v1/events', event(agentId, text, extra));
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ event_id: expect.any(String), disposition: 'started', run_id: expect.any(String) });
    return r.body.run_id as string;
  };

  beforeAll(async () => {
    await host.start();
    ({ runner, runnerId } = await startDemoRunner(host));
    await agent('echo', { mode: 'echo' });
    await agent('stall', { mode: 'stall' });
  });

  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await db.drop();
  });

  it('streams the echoed deltas and a terminal result, then replays and resumes', async () => {
    const runId = await start('echo', 'hello brave new world');
    const events = await host.sse(runId);
    const types = events.map((e) => e.event);
    expect(types.filter((t) => t === 'message.delta').length).toBeGreaterThan(1);
    expect(types.slice(-2)).toEqual(['message.completed', 'run.completed']);
    const text = events
      .filter((e) => e.event === 'message.delta')
      .map((e) => e.data.data.chunk.content)
      .join('');
    expect(text).toBe('hello brave new world');
    // Content-only deltas (docs/protocol.md#the-text-of-a-message); the completed message has the whole text.
    expect(events.filter((e) => e.event === 'message.delta').some((e) => 'all_content' in e.data.data.chunk)).toBe(
      false,
    );
    expect(events.at(-2)!.data.data.message.content).toBe('hello brave new world');
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));

    const run = await host.api('GET', `/v1/runs/${runId}`);
    expect(run.body).toMatchObject({ run_id: runId, status: 'completed', runner_id: runnerId, error: null });
    expect(run.body.usage).toMatchObject({ total_tokens: expect.any(Number) });

    expect(await host.sse(runId)).toEqual(events);
    const resumed = await host.sse(runId, { lastEventId: '2' });
    expect(resumed.map((e) => e.id)).toEqual(events.slice(2).map((e) => e.id));
    expect((await host.sse(runId, { after: events.length - 1 })).map((e) => e.event)).toEqual(['run.completed']);
    // At LOG_LEVEL=info the run path's own lines are written (it skips them only below the
    // logger's level: libs/telemetry/src/log-levels.ts).
    await logged(() => host.proc.logs(), new RegExp(`"run_id":"${runId}".*"msg":"run dispatched to ${runnerId}"`));
    await logged(() => host.proc.logs(), new RegExp(`"run_id":"${runId}".*"msg":"run completed"`));
  });

  it('lists runs by conversation and status with a cursor', async () => {
    const conversation = { conversation_id: 'conv-list' };
    for (let i = 0; i < 3; i++) {
      await host.sse(await start('echo', `m${i}`, { conversation }));
    }
    const first = await host.api('GET', '/v1/runs?conversation_id=conv-list&status=completed&limit=2');
    expect(first.status).toBe(200);
    expect(first.body.items).toHaveLength(2);
    const second = await host.api('GET', `/v1/runs?conversation_id=conv-list&limit=2&cursor=${first.body.next_cursor}`);
    expect(second.body.items).toHaveLength(1);
    expect(second.body.next_cursor).toBeNull();
    const bad = await host.api('GET', '/v1/runs?status=sleeping');
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('status');
  });

  it('enforces the deadline: the run times out with runner.timeout (retryable)', async () => {
    await agent('short', { mode: 'stall', timeout: 1 });
    const runId = await start('short');
    const events = await host.sse(runId);
    expect(events.at(-1)!.data).toMatchObject({
      type: 'run.failed',
      source: 'host',
      data: { code: 'runner.timeout', retryable: true },
    });
    const run = await host.api('GET', `/v1/runs/${runId}`);
    expect(run.body).toMatchObject({ status: 'timeout', error: { code: 'runner.timeout', retryable: true } });
  });

  it('cancels a stalled run through the runner, and refuses to cancel it twice', async () => {
    const runId = await start('stall');
    await waitFor('first delta', async () => (await host.api('GET', `/v1/runs/${runId}`)).body.status === 'running');
    const c = await host.api('POST', `/v1/runs/${runId}/cancel`, { reason: 'user left' });
    expect(c.status).toBe(200);
    expect(c.body.status).toBe('cancelled');
    const last = (await host.sse(runId)).at(-1)!;
    expect(last.data).toMatchObject({ type: 'run.failed', source: 'runner', data: { code: 'cancelled' } });
    const again = await host.api('POST', `/v1/runs/${runId}/cancel`, {});
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('conflict');
    const unknown = await host.api('POST', '/v1/runs/00000000-0000-4000-8000-000000000000/cancel', {});
    expect(unknown.status).toBe(404);
  });

  it('finalises a cancel after the grace period when the runner ignores it', async () => {
    await agent('deaf', { mode: 'ignore_cancel' });
    const runId = await start('deaf');
    const c = await host.api('POST', `/v1/runs/${runId}/cancel`, {});
    expect(c.body.status).toBe('cancelled');
    expect((await host.sse(runId)).at(-1)!.data).toMatchObject({ source: 'host', data: { code: 'cancelled' } });
  });

  it('normalises sequences: duplicates dropped, gaps kept, missing ones assigned', async () => {
    await agent('badseq', { mode: 'bad_sequence' });
    const runId = await start('badseq');
    const ids = (await host.sse(runId)).map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.slice(0, 2)).toEqual([1, 3]);
    expect(ids.slice(2)).toEqual(ids.slice(2).map((_, i) => 4 + i));
    expect((await host.api('GET', `/v1/runs/${runId}`)).body.status).toBe('completed');
  });

  it('persists unknown result types and drops invalid payloads and results after the terminal one', async () => {
    await agent('unknown', { mode: 'unknown_type', after_terminal: true });
    await agent('badpayload', { mode: 'bad_payload' });
    const unknown = await host.sse(await start('unknown'));
    expect(unknown.map((e) => e.event)).toContain('demo.custom');
    expect(unknown.at(-1)!.event).toBe('run.completed');
    const runId = await start('badpayload');
    const events = await host.sse(runId);
    expect(events.every((e) => e.event !== 'message.delta' || e.data.data.chunk)).toBe(true);
    expect(events.some((e) => 'wrong' in e.data.data)).toBe(false);
    // The host logs before it publishes, but its stdout pipe and the SSE socket reach the test separately.
    await waitFor('the drop logged', () => Promise.resolve(host.proc.logs().includes('invalid message.delta payload')));
    expect(host.proc.logs()).toMatch(/"type":"message.delta","sequence":\d+,"msg":"result dropped/);
  });

  it('records runner failures with their code', async () => {
    await agent('fails', { mode: 'fail' });
    const runId = await start('fails');
    await host.sse(runId);
    expect((await host.api('GET', `/v1/runs/${runId}`)).body).toMatchObject({
      status: 'failed',
      status_reason: 'demo failure requested',
      error: { code: 'runner.error', retryable: false },
    });
  });

  it('answers duplicates with the original disposition and rejects a reused id with another body', async () => {
    const body = {
      ...event('echo', 'once'),
      event: { event_id: 'evt-dup-1', event_type: 'message.received', source: 'api' },
    };
    const first = await host.api('POST', '/v1/events', body);
    expect(first.status).toBe(202);
    const again = await host.api('POST', '/v1/events', body);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    const other = await host.api('POST', '/v1/events', { ...body, input: { text: 'twice' } });
    expect(other.status).toBe(409);
    const keyed = { ...event('echo', 'k'), conversation: { conversation_id: 'c-key' } };
    const k1 = await host.api('POST', '/v1/events', keyed, undefined, { 'idempotency-key': 'key-1' });
    const k2 = await host.api('POST', '/v1/events', keyed, undefined, { 'idempotency-key': 'key-1' });
    expect(k2.status).toBe(200);
    expect(k2.body.run_id).toBe(k1.body.run_id);
  });

  it('rejects malformed events naming the field, and writes nothing', async () => {
    const before = (await host.api('GET', '/v1/runs?limit=100')).body.items.length;
    const cases: [unknown, string][] = [
      [{ ...event('echo', 'x'), event: { source: 'api' } }, 'event.event_type'],
      [{ ...event('echo', 'x'), colour: 'red' }, 'colour'],
      [{ ...event('echo', 'x'), event: { event_type: 'message.received', source: 'mars' } }, 'event.source'],
      [{ ...event('echo', 'x'), input: { contents: [{ type: 'video' }] } }, 'input.contents[0].type'],
      [{ ...event('echo', 'x'), agent_id: undefined }, 'agent_id'],
    ];
    for (const [body, field] of cases) {
      const r = await host.api('POST', '/v1/events', body);
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ code: 'invalid_argument', retryable: false });
      expect(r.body.error.message).toContain(field);
    }
    const notJson = await host.api('POST', '/v1/events', '{"agent_id":');
    expect(notJson.status).toBe(400);
    expect(notJson.body.error.code).toBe('invalid_argument');
    const huge = await host.api('POST', '/v1/events', event('echo', 'x'.repeat(6 * 1024 * 1024)));
    expect(huge.status).toBe(413);
    expect(huge.body.error.code).toBe('payload_too_large');
    const unknownAgent = await host.api('POST', '/v1/events', event('nobody', 'x'));
    expect(unknownAgent.status).toBe(404);
    expect(unknownAgent.body.error.details.field).toBe('agent_id');
    expect((await host.api('GET', '/v1/runs?limit=100')).body.items.length).toBe(before);
  });

  it('requires API keys with the right role', async () => {
    expect((await host.api('GET', '/v1/runs', undefined, null)).status).toBe(401);
    expect((await host.api('GET', '/v1/runs', undefined, 'rhk_not-a-key')).status).toBe(401);
    const key = await host.api('POST', '/v1/admin/api-keys', { name: 'platform', role: 'platform' });
    expect(key.status).toBe(201);
    const platform = key.body.key as string;
    expect((await host.api('GET', '/v1/runs', undefined, platform)).status).toBe(200);
    const denied = await host.api('GET', '/v1/admin/agents', undefined, platform);
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe('unauthorized');
    expect((await host.api('GET', '/health/live', undefined, null)).status).toBe(200);
    // Verified once, the key is remembered (docs/security.md#credential-caches); a revocation still
    // refuses it on the very next request, and leaves another key's entry alone.
    const other = (await host.api('POST', '/v1/admin/api-keys', { name: 'other', role: 'platform' })).body
      .key as string;
    expect((await host.api('GET', '/v1/runs', undefined, other)).status).toBe(200);
    expect((await host.api('GET', '/v1/runs', undefined, platform)).status).toBe(200);
    expect((await host.api('DELETE', `/v1/admin/api-keys/${key.body.id}`)).status).toBe(204);
    expect((await host.api('GET', '/v1/runs', undefined, platform)).status).toBe(401);
    expect((await host.api('GET', '/v1/runs', undefined, platform)).status).toBe(401);
    expect((await host.api('GET', '/v1/runs', undefined, other)).status).toBe(200);
  });

  it('validates agents against the runner config schema', async () => {
    const bad = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'bad',
      runner_id: runnerId,
      runner_config: { mode: 'dance', timeout: -1 },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('runner_config.mode');
    expect(bad.body.error.message).toContain('runner_config.timeout');
    const badPolicy = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'bad',
      runner_id: runnerId,
      state_policy: { scopes: [] },
    });
    expect(badPolicy.status).toBe(400);
    expect(badPolicy.body.error.message).toContain('state_policy');
    expect((await host.api('GET', '/v1/admin/agents/bad')).status).toBe(404);
  });

  it('fails the run as runner.disconnected when the runner crashes mid-run', async () => {
    await agent('crash', { mode: 'crash' });
    const runId = await start('crash');
    const last = (await host.sse(runId)).at(-1)!;
    expect(last.data).toMatchObject({
      type: 'run.failed',
      source: 'host',
      data: { code: 'runner.disconnected', retryable: true },
    });
    expect((await host.api('GET', `/v1/runs/${runId}`)).body.status).toBe('failed');
    // The runner process died; a new event now fails fast as runner.unavailable, recorded.
    await waitFor(
      'runner gone',
      async () =>
        (await host.api<any[]>('GET', '/v1/admin/runners')).body.find((r) => r.kind === 'plugin').state ===
        'disconnected',
    );
    const r = await host.api('POST', '/v1/events', event('echo', 'anyone?'));
    expect(r.status).toBe(503);
    expect(r.body.error).toMatchObject({
      code: 'unavailable',
      retryable: true,
      details: { error_code: 'runner.unavailable' },
    });
    const failed = await host.api('GET', `/v1/runs/${r.body.error.details.run_id}`);
    expect(failed.body).toMatchObject({ status: 'failed', error: { code: 'runner.unavailable', retryable: true } });
  });
});
