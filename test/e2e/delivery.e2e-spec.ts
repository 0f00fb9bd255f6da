import { ADMIN_KEY, Host, TestDatabase, event, parseSse, startDemoRunner, waitFor, type Proc } from './harness';

jest.setTimeout(120_000);

interface Op {
  delivery_id: string;
  run_id: string;
  sequence: number;
  op: string;
  idempotency_key: string;
  target_delivery_id: string | null;
  reply_target: Record<string, unknown> | null;
  payload: Record<string, any>;
}

/** What a platform shows after applying the ops: message texts in creation order. */
function shown(ops: Op[]): string[] {
  const messages = new Map<string, string>();
  for (const o of ops) {
    if (o.op === 'message.send' || (o.op === 'message.final' && o.target_delivery_id === null)) {
      messages.set(o.delivery_id, o.payload.text);
    } else if (o.op === 'message.edit' || o.op === 'message.final') {
      expect(messages.has(o.target_delivery_id!)).toBe(true);
      messages.set(o.target_delivery_id!, o.payload.text);
    }
  }
  return [...messages.values()];
}

describe('delivery normalisation over real HTTP and gRPC', () => {
  const db = new TestDatabase();
  let host = new Host(db);
  let runner: Proc;
  let runnerId: string;

  const deliveries = async (runId: string, opts: { after?: number; lastEventId?: string } = {}): Promise<Op[]> => {
    const q = opts.after !== undefined ? `?after=${opts.after}` : '';
    const res = await fetch(`${host.http}/v1/runs/${runId}/deliveries${q}`, {
      headers: {
        authorization: `Bearer ${ADMIN_KEY}`,
        ...(opts.lastEventId ? { 'last-event-id': opts.lastEventId } : {}),
      },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    return parseSse(await res.text()).map((e) => {
      expect(e.id).toBe((e.data as unknown as Op).sequence);
      expect(e.event).toBe((e.data as unknown as Op).op);
      return e.data as unknown as Op;
    });
  };
  const start = async (agentId: string, text: string, delivery: Record<string, unknown>) => {
    const r = await host.api('POST', '/v1/events', event(agentId, text, { delivery }));
    expect(r.status).toBe(202);
    return r.body.run_id as string;
  };

  beforeAll(async () => {
    await host.start();
    ({ runner, runnerId } = await startDemoRunner(host));
    for (const [agent_id, mode, delivery_policy] of [
      ['echo', 'echo', {}],
      ['slow', 'echo', {}],
      ['fail', 'fail', { notice_texts: { failed: 'Something broke, sorry.' } }],
      ['stall', 'stall', {}],
    ] as const) {
      const r = await host.api('POST', '/v1/admin/agents', {
        agent_id,
        runner_id: runnerId,
        runner_config: { mode, ...(agent_id === 'slow' ? { chunk_delay_ms: 2 } : {}) },
        delivery_policy,
      });
      expect(r.status).toBe(201);
    }
  });

  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await db.drop();
  });

  it('2,000 deltas to an edit surface at a 1 s interval: one send, bounded edits, final text == completed message', async () => {
    const text = Array.from({ length: 2000 }, (_, i) => `tok${i}`).join(' ');
    const began = Date.now();
    const runId = await start('slow', text, { surface: 'slack', reply_target: { channel: 'C1', thread_ts: '1.2' } });
    const ops = await deliveries(runId);
    const seconds = (Date.now() - began) / 1000;
    const results = await host.sse(runId);
    expect(results.filter((e) => e.event === 'message.delta')).toHaveLength(2000);
    const completed = results.find((e) => e.event === 'message.completed')!.data.data.message.content as string;

    expect(ops.map((o) => o.sequence)).toEqual(ops.map((_, i) => i + 1));
    const sends = ops.filter((o) => o.op === 'message.send');
    const edits = ops.filter((o) => o.op === 'message.edit');
    const finals = ops.filter((o) => o.op === 'message.final');
    expect(sends).toHaveLength(1);
    // Slack's preset: 1.2 s between edits; never more edits than the stream's seconds allow.
    expect(edits.length).toBeLessThanOrEqual(Math.ceil(seconds / 1.2) + 1);
    expect(finals).toHaveLength(1);
    expect(finals[0].target_delivery_id).toBe(sends[0].delivery_id);
    expect(finals[0].payload.text).toBe(completed);
    expect(completed).toBe(text);
    expect(ops.every((o) => o.reply_target?.channel === 'C1')).toBe(true);
    expect(new Set(ops.map((o) => o.idempotency_key)).size).toBe(ops.length);
  });

  it('a 100 KB answer to a surface with max_message_size 4096 arrives as ordered parts within the limit', async () => {
    // 199 "words" of 500 characters with sentence ends inside: ~100 KB, ~200 cumulative deltas.
    const word = `${'x'.repeat(49)}。`.repeat(10);
    const text = Array.from({ length: 199 }, () => word).join(' ');
    expect(text.length).toBeGreaterThan(99_000);
    const runId = await start('echo', text, { surface: 'webhook', max_message_size: 4096 });
    const ops = await deliveries(runId);
    expect(ops.length).toBeGreaterThanOrEqual(25);
    expect(ops.slice(0, -1).every((o) => o.op === 'message.send')).toBe(true);
    expect(ops[ops.length - 1].op).toBe('message.final');
    expect(ops.map((o) => o.payload.part)).toEqual(ops.map((_, i) => i));
    expect(ops.every((o) => o.payload.text.length <= 4096)).toBe(true);
    expect(ops.map((o) => o.payload.text).join('')).toBe(text);
    // Parts end at the sentence ends, not mid-sentence.
    expect(ops.slice(0, -1).every((o) => /[。 ]$/.test(o.payload.text))).toBe(true);
  });

  it('resumes with Last-Event-ID and ?after=, and streams a live run from its start', async () => {
    const runId = await start('slow', 'one two three four five six seven eight', { surface: 'telegram' });
    const live = await deliveries(runId);
    expect(shown(live)).toEqual(['one two three four five six seven eight']);
    expect(await deliveries(runId)).toEqual(live);
    expect(await deliveries(runId, { lastEventId: '1' })).toEqual(live.slice(1));
    // At the end of a finished run's ops a resume gets 204, so EventSource stops reconnecting.
    for (const [q, h] of [
      [`?after=${live.length}`, {}],
      ['', { 'last-event-id': String(live.at(-1)!.sequence) }],
    ] as const) {
      const over = await fetch(`${host.http}/v1/runs/${runId}/deliveries${q}`, {
        headers: { authorization: `Bearer ${ADMIN_KEY}`, ...h },
      });
      expect([q, over.status, await over.text()]).toEqual([q, 204, '']);
    }
    // A browser follows the deliveries with a run-scoped stream token like the result stream.
    const minted = await host.api('POST', `/v1/runs/${runId}/stream-tokens`);
    expect(minted.status).toBe(201);
    const viaToken = await fetch(`${host.http}/v1/runs/${runId}/deliveries?stream_token=${minted.body.token}`);
    expect(viaToken.status).toBe(200);
    expect(parseSse(await viaToken.text()).map((e) => e.data)).toEqual(live);
    const bad = await fetch(`${host.http}/v1/runs/${runId}/deliveries`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}`, 'last-event-id': 'abc' },
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { details: { field: string } } }).error.details.field).toBe('Last-Event-ID');
    expect((await host.api('GET', `/v1/runs/00000000-0000-4000-8000-000000000000/deliveries`)).status).toBe(404);
  });

  it('POST /v1/events with Accept: text/event-stream answers with the admission, then the deliveries', async () => {
    const res = await fetch(`${host.http}/v1/events`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${ADMIN_KEY}`,
        'content-type': 'application/json',
        accept: 'text/event-stream',
      },
      body: JSON.stringify(event('echo', 'Para one.\n\nPara two.', { delivery: { surface: 'api' } })),
    });
    expect(res.status).toBe(200);
    const body = await res.text();
    const [admission, ...rest] = body.split('\n\n').filter((b) => b.trim() && !b.startsWith(':'));
    expect(admission).toMatch(/^event: admission\ndata: /);
    const answer = JSON.parse(admission.slice(admission.indexOf('data: ') + 6)) as {
      run_id: string;
      disposition: string;
    };
    expect(answer.disposition).toBe('started');
    const ops = parseSse(rest.join('\n\n') + '\n\n').map((e) => e.data as unknown as Op);
    expect(ops.map((o) => [o.op, o.payload.text])).toEqual([
      ['message.send', 'Para one.\n\n'],
      ['message.final', 'Para two.'],
    ]);
    expect(ops.every((o) => o.run_id === answer.run_id)).toBe(true);
    expect(await deliveries(answer.run_id)).toEqual(ops);
    // The streamed answer is the whole response: the framework does not try to answer it again
    // (checked on the host's whole log once it has exited: the last test).
    // Without the Accept header: the JSON answer, as before.
    const plain = await host.api('POST', '/v1/events', event('echo', 'json please'));
    expect(plain.status).toBe(202);
    expect(Object.keys(plain.body).sort()).toEqual(['disposition', 'event_id', 'run_id']);
  });

  it('a failed run: what streamed ends incomplete, then the agent notice without internals', async () => {
    const runId = await start('fail', 'first words of an answer', { surface: 'telegram' });
    const ops = await deliveries(runId);
    expect(ops.map((o) => o.op)).toEqual(['message.send', 'message.final', 'notice.send']);
    expect(ops[1].payload.incomplete).toBe(true);
    expect(ops[2].payload).toEqual({ kind: 'failed', text: 'Something broke, sorry.', retryable: false });
  });

  it('usage on the run record: the runner report and the host metering, independently', async () => {
    const runId = await start('echo', 'a b c', { surface: 'api' });
    await deliveries(runId);
    const run = await host.api('GET', `/v1/runs/${runId}`);
    expect(run.body.usage).toEqual({
      prompt_tokens: 3,
      completion_tokens: 3,
      total_tokens: 6,
      complete: true,
      host_metered: { calls: 0, prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, complete: true },
    });
  });

  it('rejects a webhook secret reference outside SECRET_ENV_ALLOWLIST and a URL with credentials', async () => {
    const bad = async (webhook: Record<string, unknown>) =>
      host.api('POST', '/v1/admin/agents', {
        agent_id: `bad-${Math.random().toString(36).slice(2)}`,
        runner_id: runnerId,
        delivery_policy: { webhook },
      });
    const secret = await bad({ url: 'https://hooks.example.com/x', secret_env: 'DATABASE_URL' });
    expect(secret.status).toBe(400);
    expect(secret.body.error.details.field).toBe('delivery_policy.webhook.secret_env');
    const creds = await bad({ url: 'https://u:p@hooks.example.com/x', secret_env: 'RUNNERHOST_SECRET_X' });
    expect(creds.status).toBe(400);
    expect(creds.body.error.message).toMatch(/delivery_policy/);
  });

  // Last: it replaces the host (the runner stays with the old one).
  it('a run a host crash interrupted: the message being edited is ended as it stands, then the notice', async () => {
    const runId = await start('stall', 'first words then silence', { surface: 'telegram' });
    await waitFor(
      'the first op',
      async () => (await host.api('GET', `/v1/admin/runs/${runId}/deliveries`)).body.length === 1,
    );
    await host.stop('SIGKILL');
    // The first host's whole log read (its pipes closed), so that an absence means something: no
    // streamed answer (POST /v1/events with Accept: text/event-stream) was answered a second time.
    await host.proc.closed;
    expect(host.proc.logs()).not.toMatch(/already sent|FST_ERR_REP/i);
    await runner.stop();
    host = new Host(db);
    await host.start();
    const ops = await deliveries(runId);
    expect(ops.map((o) => o.op)).toEqual(['message.send', 'message.final', 'notice.send']);
    expect(ops[1]).toMatchObject({
      target_delivery_id: ops[0].delivery_id,
      payload: { text: 'first ', incomplete: true },
    });
    expect(ops[2].payload).toMatchObject({ kind: 'failed', retryable: true });
    expect((await host.api('GET', `/v1/runs/${runId}`)).body.status).toBe('interrupted');
  });
});
