import { Host, TestDatabase, startDemoRunner, waitFor } from './harness';
import { admin, answered, conversationRuns, message } from './steering-support';

jest.setTimeout(120_000);

/**
 * Conversations and steering (docs/conversations-and-steering.md) over real HTTP and gRPC: a burst
 * of follow-ups into a busy conversation under each policy; every message is answered exactly once
 * — injected into the running run or run as its own — and in arrival order.
 */
describe('conversations and steering: policies', () => {
  const db = new TestDatabase();
  let host: Host;
  let runnerProc: Awaited<ReturnType<typeof startDemoRunner>>['runner'];

  beforeAll(async () => {
    host = await new Host(db).start();
    const { runner, runnerId } = await startDemoRunner(host, { env: { DEMO_STEERING: '1' } });
    runnerProc = runner;
    const agents: [string, Record<string, unknown>, Record<string, unknown>?][] = [
      ['steer', { mode: 'steer', chunk_delay_ms: 40, steer_wait_ms: 1500 }],
      ['queue', { mode: 'steer', chunk_delay_ms: 40, steer_wait_ms: 200 }, { mode: 'queue' }],
      ['reject', { mode: 'echo', chunk_delay_ms: 200 }, { mode: 'reject' }],
      ['slow', { mode: 'echo', chunk_delay_ms: 200 }],
    ];
    for (const [agent_id, runner_config, concurrency_policy] of agents) {
      const r = await host.api('POST', '/v1/admin/agents', {
        agent_id,
        runner_id: runnerId,
        runner_config,
        ...(concurrency_policy ? { concurrency_policy } : {}),
      });
      expect(r.status).toBe(201);
    }
  });

  afterAll(async () => {
    await runnerProc?.stop();
    await host?.stop();
    await db.drop();
  });

  const texts = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix} follow-up ${i + 1}`);

  it('steer (the default with a steering runner): follow-ups are pulled into the running run, in order, once', async () => {
    const conv = 'c-steer';
    const first = await host.api(
      'POST',
      '/v1/events',
      message('steer', conv, 'the first message of this conversation'),
    );
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ disposition: 'started' });
    const follow = texts('steer', 8);
    const answers = [];
    for (const t of follow) {
      answers.push((await host.api('POST', '/v1/events', message('steer', conv, t))).body);
    }
    expect(answers.every((a) => ['steered', 'queued'].includes(a.disposition))).toBe(true);
    const steered = answers.filter((a) => a.disposition === 'steered');
    expect(steered.length).toBeGreaterThan(0);
    expect(steered.every((a) => a.run_id === first.body.run_id)).toBe(true);
    expect(steered.map((a) => a.position)).toEqual(steered.map((_, i) => i + 1));

    const runs = await conversationRuns(host, conv);
    const { order, counts } = answered(runs);
    expect(order).toEqual(['the first message of this conversation', ...follow]);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(runs.every((r) => r.status === 'completed')).toBe(true);

    const view = await admin(host, `/v1/admin/steering?conversation_id=${conv}&limit=100`);
    const injected = view.items.filter((i: any) => i.state === 'injected');
    expect(injected.length).toBe(steered.length);
    expect(injected.every((i: any) => i.pull_mode === 'all' && i.injected_at && i.run_id === first.body.run_id)).toBe(
      true,
    );
    const timeline = await admin(host, `/v1/admin/conversations/${conv}/timeline`);
    expect(timeline.entries.filter((e: any) => e.type === 'steering.injected')).toHaveLength(steered.length);
    expect(timeline.entries.filter((e: any) => e.type === 'event')).toHaveLength(follow.length + 1);
  });

  it('queue (agent policy): each follow-up runs on its own after the running one, in arrival order', async () => {
    const conv = 'c-queue';
    const first = await host.api('POST', '/v1/events', message('queue', conv, 'queue first'));
    expect(first.body.disposition).toBe('started');
    const follow = texts('queue', 5);
    const posted = await Promise.all(follow.map((t) => host.api('POST', '/v1/events', message('queue', conv, t))));
    expect(posted.map((p) => p.body.disposition)).toEqual(follow.map(() => 'queued'));
    // A reader of a run that has not started yet follows it to its end.
    const waitingReader = host.sse(posted[posted.length - 1].body.run_id);
    expect(new Set(posted.map((p) => p.body.run_id)).size).toBe(follow.length);
    const runs = await conversationRuns(host, conv);
    expect(runs).toHaveLength(follow.length + 1);
    expect((await waitingReader).map((e) => e.data.type)).toEqual([
      'message.delta',
      'message.delta',
      'message.delta',
      'message.completed',
      'run.completed',
    ]);
    const { counts } = answered(runs);
    for (const t of ['queue first', ...follow]) {
      expect({ t, n: counts.get(t) }).toEqual({ t, n: 1 });
    }
    // Arrival order = the order the host recorded them (concurrent POSTs): the runs follow it.
    const byEvent = await admin(host, `/v1/admin/steering?conversation_id=${conv}&limit=100`);
    const arrival = [...byEvent.items].reverse().map((i: any) => i.next_run_id);
    expect(runs.slice(1).map((r) => r.run_id)).toEqual(arrival);
  });

  it('reject: a follow-up gets 409 and changes nothing; the same event is accepted once the conversation is free', async () => {
    const conv = 'c-reject';
    const first = await host.api('POST', '/v1/events', message('reject', conv, 'one two three four five'));
    expect(first.body.disposition).toBe('started');
    const body = {
      ...message('reject', conv, 'not now'),
      event: { event_id: 'evt-reject-1', event_type: 'message.received', source: 'api' },
    };
    const refused = await host.api('POST', '/v1/events', body);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({
      code: 'conflict',
      details: { disposition: 'rejected', run_id: first.body.run_id },
    });
    const transcript = await host.api('GET', `/v1/conversations/${conv}/transcript`);
    expect(transcript.body.items.map((i: any) => i.content)).not.toContain('not now');
    await conversationRuns(host, conv);
    const again = await host.api('POST', '/v1/events', body);
    expect(again.status).toBe(202);
    expect(again.body.disposition).toBe('started');
  });

  it('interrupt (per event): the running run is cancelled through the cancel path, then the event runs', async () => {
    const conv = 'c-interrupt';
    const long = Array.from({ length: 100 }, (_, i) => `word${i}`).join(' ');
    const first = await host.api('POST', '/v1/events', message('slow', conv, long));
    expect(first.body.disposition).toBe('started');
    await waitFor(
      'first run running',
      async () => (await host.api('GET', `/v1/runs/${first.body.run_id}`)).body.status === 'running',
    );
    const next = await host.api(
      'POST',
      '/v1/events',
      message('slow', conv, 'stop that and do this', { concurrency: 'interrupt' }),
    );
    expect(next.status).toBe(202);
    expect(next.body).toMatchObject({ disposition: 'queued', interrupted_run_id: first.body.run_id });
    const runs = await conversationRuns(host, conv);
    expect(runs.map((r) => [r.run_id, r.status])).toEqual([
      [first.body.run_id, 'cancelled'],
      [next.body.run_id, 'completed'],
    ]);
    expect(runs[1].answers).toEqual(['stop that and do this']);
  });

  it('interrupt burst: every event runs once, in arrival order; the last one completes', async () => {
    const conv = 'c-interrupt-burst';
    const long = Array.from({ length: 100 }, (_, i) => `word${i}`).join(' ');
    const first = await host.api('POST', '/v1/events', message('slow', conv, long));
    const burst = [];
    for (const t of ['interrupt one', 'interrupt two', 'interrupt three']) {
      burst.push(await host.api('POST', '/v1/events', message('slow', conv, t, { concurrency: 'interrupt' })));
    }
    expect(burst.map((b) => b.body.disposition)).toEqual(['queued', 'queued', 'queued']);
    expect(burst[0].body.interrupted_run_id).toBe(first.body.run_id);
    const runs = await conversationRuns(host, conv);
    expect(runs.map((r) => r.event_id)).toEqual([first.body.event_id, ...burst.map((b) => b.body.event_id)]);
    expect(runs[0].status).toBe('cancelled');
    expect(runs.slice(1, 3).every((r) => ['cancelled', 'completed'].includes(r.status))).toBe(true);
    expect(runs[3]).toMatchObject({ status: 'completed', answers: ['interrupt three'] });
  });

  it('reject burst: every follow-up is refused and nothing is recorded for it', async () => {
    const conv = 'c-reject-burst';
    const first = await host.api('POST', '/v1/events', message('reject', conv, 'one two three four five six'));
    const refused = await Promise.all(
      Array.from({ length: 6 }, (_, i) => host.api('POST', '/v1/events', message('reject', conv, `no ${i}`))),
    );
    expect(refused.map((r) => [r.status, r.body.error.details.run_id])).toEqual(
      refused.map(() => [409, first.body.run_id]),
    );
    const runs = await conversationRuns(host, conv);
    expect(runs.map((r) => [r.run_id, r.status])).toEqual([[first.body.run_id, 'completed']]);
    const transcript = await host.api('GET', `/v1/conversations/${conv}/transcript`);
    expect(transcript.body.items.filter((i: any) => i.role === 'user').map((i: any) => i.content)).toEqual([
      'one two three four five six',
    ]);
  });

  it('a waiting run can be cancelled before it starts; the others still run in order', async () => {
    const conv = 'c-cancel-waiting';
    const long = Array.from({ length: 10 }, (_, i) => `word${i}`).join(' ');
    const first = await host.api('POST', '/v1/events', message('slow', conv, long));
    const second = await host.api('POST', '/v1/events', message('slow', conv, 'second', { concurrency: 'queue' }));
    const third = await host.api('POST', '/v1/events', message('slow', conv, 'third', { concurrency: 'queue' }));
    expect([first, second, third].map((r) => r.body.disposition)).toEqual(['started', 'queued', 'queued']);
    expect((await host.api('GET', `/v1/runs/${second.body.run_id}`)).body.status).toBe('queued');
    const cancelled = await host.api('POST', `/v1/runs/${second.body.run_id}/cancel`, { reason: 'not needed' });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'cancelled', error: { code: 'cancelled' } });
    const runs = await conversationRuns(host, conv);
    expect(runs.map((r) => [r.run_id, r.status])).toEqual([
      [second.body.run_id, 'cancelled'], // never started: no start time, first in start order
      [first.body.run_id, 'completed'],
      [third.body.run_id, 'completed'],
    ]);
    const events = await host.sse(second.body.run_id);
    expect(events.map((e) => [e.data.type, e.data.data.code])).toEqual([['run.failed', 'cancelled']]);
  });
});
