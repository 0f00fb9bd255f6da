import { Host, SHORT_LEASE, TestDatabase, runnerConnected, startDemoRunner, takenOver, waitFor } from './harness';
import { admin, answered, conversationRuns, launchRunner, message } from './steering-support';

jest.setTimeout(180_000);

/**
 * Zero loss under faults (docs/conversations-and-steering.md#nothing-is-lost), over real HTTP and
 * gRPC: a runner that never pulls, a full steering queue, a host killed with items queued,
 * duplicates and concurrent admissions.
 */
describe('conversations and steering: faults', () => {
  const db = new TestDatabase();
  let host: Host;
  let runner: Awaited<ReturnType<typeof startDemoRunner>>['runner'];
  let token: string;

  beforeAll(async () => {
    host = await new Host(db, { QUEUED_RUN_RUNNER_WAIT_MS: '60000' }).start();
    const started = await startDemoRunner(host, { env: { DEMO_STEERING: '1' } });
    runner = started.runner;
    token = started.token;
    const agents: [string, Record<string, unknown>][] = [
      // Declares steering (DEMO_STEERING) but never pulls: every steered item comes back as a run.
      ['never', { mode: 'echo', chunk_delay_ms: 150 }],
      ['hold', { mode: 'stall' }],
      ['steer', { mode: 'steer', chunk_delay_ms: 20, steer_wait_ms: 300 }],
    ];
    for (const [agent_id, runner_config] of agents) {
      const r = await host.api('POST', '/v1/admin/agents', { agent_id, runner_id: started.runnerId, runner_config });
      expect(r.status).toBe(201);
    }
  });

  afterAll(async () => {
    await runner?.stop();
    await host?.stop();
    await db.drop();
  });

  const long = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`).join(' ');

  it('a runner that never pulls: every steered item is dropped at the run end and re-dispatched, in order', async () => {
    const conv = 'c-never';
    const firstText = long(12);
    const first = await host.api('POST', '/v1/events', message('never', conv, firstText));
    expect(first.body.disposition).toBe('started');
    const follow = ['never a', 'never b', 'never c', 'never d'];
    for (const t of follow) {
      const r = await host.api('POST', '/v1/events', message('never', conv, t));
      expect(r.body).toMatchObject({ disposition: 'steered', run_id: first.body.run_id });
    }
    const runs = await conversationRuns(host, conv);
    expect(answered(runs).order).toEqual([firstText, ...follow]);
    expect(runs.map((r) => r.status)).toEqual(runs.map(() => 'completed'));

    const view = await admin(host, `/v1/admin/steering?conversation_id=${conv}&limit=100`);
    expect(view.items).toHaveLength(follow.length);
    for (const item of view.items) {
      expect(item).toMatchObject({
        kind: 'steer',
        state: 'redispatched',
        dispatch: 'started',
        run_id: first.body.run_id,
      });
      expect(item.dropped_at && item.redispatched_at && item.started_at).toBeTruthy();
      expect(runs.find((r) => r.run_id === item.next_run_id)?.event_id).toBe(item.event_id);
    }
    const timeline = await admin(host, `/v1/admin/conversations/${conv}/timeline`);
    const types = timeline.entries.map((e: any) => e.type);
    expect(types.filter((t: string) => t === 'steering.dropped')).toHaveLength(follow.length);
    expect(types.filter((t: string) => t === 'steering.redispatched')).toHaveLength(follow.length);
    expect(types.indexOf('steering.dropped')).toBeGreaterThan(types.indexOf('run.ended'));
  });

  it('a full queue (100) overflows into queue; cancelling the run re-dispatches all of it; nothing is lost', async () => {
    const conv = 'c-overflow';
    const first = await host.api('POST', '/v1/events', message('hold', conv, 'hold on'));
    expect(first.body.disposition).toBe('started');
    const dispositions: string[] = [];
    const eventIds: string[] = [first.body.event_id];
    for (let i = 1; i <= 103; i++) {
      const r = await host.api('POST', '/v1/events', message('hold', conv, `item ${i}`));
      dispositions.push(r.body.disposition);
      eventIds.push(r.body.event_id);
    }
    expect(dispositions.slice(0, 100)).toEqual(Array(100).fill('steered'));
    expect(dispositions.slice(100)).toEqual(['queued', 'queued', 'queued']);
    const view = await admin(host, `/v1/admin/steering?conversation_id=${conv}&limit=1`);
    expect(view.active_runs).toHaveLength(1);
    expect(view.active_runs[0].queue.map((i: any) => i.position)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));

    // Each run stalls until cancelled: cancel whatever runs until nothing waits.
    for (;;) {
      const running = await waitFor('a running or no waiting run', async () => {
        const r = await host.api('GET', `/v1/runs?conversation_id=${conv}&status=queued,running&limit=100`);
        const live = r.body.items.find((x: any) => x.status === 'running');
        return live ? live : r.body.items.length === 0 ? 'done' : null;
      });
      if (running === 'done') {
        break;
      }
      await host.api('POST', `/v1/runs/${running.run_id}/cancel`, { reason: 'next' });
    }
    const all = [];
    for (let cursor = ''; ;) {
      const page = await host.api('GET', `/v1/runs?conversation_id=${conv}&limit=100${cursor}`);
      all.push(...page.body.items);
      if (!page.body.next_cursor) {
        break;
      }
      cursor = `&cursor=${page.body.next_cursor}`;
    }
    expect(all).toHaveLength(104);
    expect(new Set(all.map((r: any) => r.event_id))).toEqual(new Set(eventIds));
    expect(all.every((r: any) => r.status === 'cancelled')).toBe(true);
  });

  it('duplicates answer the original disposition and run, whatever happened since; another body is a conflict', async () => {
    const conv = 'c-dup';
    await host.api('POST', '/v1/events', message('never', conv, long(6)));
    const body = message('never', conv, 'dup follow-up');
    const key = { 'idempotency-key': 'steer-dup-1' };
    const concurrent = await Promise.all(
      Array.from({ length: 8 }, () => host.api('POST', '/v1/events', body, undefined, key)),
    );
    expect(concurrent.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 202]);
    const original = concurrent.find((r) => r.status === 202)!.body;
    expect(original.disposition).toBe('steered');
    expect(concurrent.every((r) => r.body.run_id === original.run_id && r.body.disposition === 'steered')).toBe(true);
    await conversationRuns(host, conv);
    // The item has since been re-dispatched as a run of its own: the answer stays the original one.
    const later = await host.api('POST', '/v1/events', body, undefined, key);
    expect(later.status).toBe(200);
    expect(later.body).toEqual({ event_id: original.event_id, disposition: 'steered', run_id: original.run_id });
    const other = await host.api('POST', '/v1/events', message('never', conv, 'another body'), undefined, key);
    expect(other.status).toBe(409);
    const runs = await conversationRuns(host, conv);
    expect(answered(runs).counts.get('dup follow-up')).toBe(1);
  });

  it('concurrent POSTs for one conversation never make two running runs', async () => {
    const conv = 'c-race';
    let maxRunning = 0;
    let polling = true;
    const poll = (async () => {
      while (polling) {
        const r = await host.api('GET', `/v1/runs?conversation_id=${conv}&status=running&limit=100`);
        maxRunning = Math.max(maxRunning, r.body.items.length);
      }
    })();
    const texts = Array.from({ length: 30 }, (_, i) => `race ${i}`);
    const posted = await Promise.all(texts.map((t) => host.api('POST', '/v1/events', message('steer', conv, t))));
    expect(posted.every((p) => p.status === 202)).toBe(true);
    expect(posted.filter((p) => p.body.disposition === 'started')).toHaveLength(1);
    const runs = await conversationRuns(host, conv);
    polling = false;
    await poll;
    expect(maxRunning).toBeLessThanOrEqual(1);
    const { counts } = answered(runs);
    expect(texts.map((t) => counts.get(t))).toEqual(texts.map(() => 1));
  });

  it('a host killed with items queued: the run ends interrupted and its items run after the restart, in order', async () => {
    const conv = 'c-kill';
    const firstText = long(60);
    const first = await host.api('POST', '/v1/events', message('never', conv, firstText));
    const follow = ['after restart 1', 'after restart 2', 'after restart 3'];
    const steered = [];
    for (const [i, t] of follow.entries()) {
      const body = message('never', conv, t);
      steered.push(await host.api('POST', '/v1/events', { ...body, event: { ...body.event, event_id: `kill-${i}` } }));
    }
    expect(steered.map((s) => s.body.disposition)).toEqual(['steered', 'steered', 'steered']);
    await host.stop('SIGKILL');
    await runner.stop();

    host = await new Host(db, { QUEUED_RUN_RUNNER_WAIT_MS: '60000', ...SHORT_LEASE }).start();
    await takenOver(db, [first.body.run_id as string]);
    // A fresh event (a free conversation) with no runner connected still gets today's 503 at once.
    const fresh = await host.api('POST', '/v1/events', message('never', 'c-fresh', 'nobody home'));
    expect(fresh.status).toBe(503);
    // The re-dispatched items wait for the runner instead of failing runner.unavailable.
    const waiting = await admin(host, `/v1/admin/steering?conversation_id=${conv}&limit=100`);
    expect(waiting.items.map((i: any) => [i.state, i.dispatch])).toEqual(follow.map(() => ['redispatched', 'waiting']));
    // A reader of a waiting run (its channel opened by this new process) follows it to its end.
    const reader = host.sse(waiting.items.at(-1).next_run_id);
    runner = launchRunner(host, token);
    await runnerConnected(host);

    const runs = await conversationRuns(host, conv);
    expect(runs[0]).toMatchObject({ run_id: first.body.run_id, status: 'interrupted' });
    expect(runs.slice(1).map((r) => [r.status, r.answers])).toEqual(follow.map((t) => ['completed', [t]]));
    expect((await reader).map((e) => e.data.type).at(-1)).toBe('run.completed');
    // A duplicate after the restart answers as before: steered into the interrupted run.
    const again = message('never', conv, follow[0]);
    const dup = await host.api('POST', '/v1/events', { ...again, event: { ...again.event, event_id: 'kill-0' } });
    expect(dup.status).toBe(200);
    expect(dup.body).toEqual({ event_id: 'kill-0', disposition: 'steered', run_id: first.body.run_id });
  });

  it('waiting runs whose runner does not come back in time fail runner.unavailable (bounded wait)', async () => {
    const conv = 'c-gone';
    await host.api('POST', '/v1/events', message('never', conv, long(60)));
    for (const t of ['gone 1', 'gone 2']) {
      expect((await host.api('POST', '/v1/events', message('never', conv, t))).body.disposition).toBe('steered');
    }
    await host.stop('SIGKILL');
    await runner.stop();
    host = await new Host(db, { QUEUED_RUN_RUNNER_WAIT_MS: '1000', ...SHORT_LEASE }).start();
    const runs = await conversationRuns(host, conv);
    // The waiting runs never started (they sort first, without a start time).
    expect(runs.map((r) => r.status)).toEqual(['failed', 'failed', 'interrupted']);
    for (const r of runs.slice(0, 2)) {
      expect((await host.api('GET', `/v1/runs/${r.run_id}`)).body.error).toEqual({
        code: 'runner.unavailable',
        retryable: true,
      });
    }
    const view = await admin(host, `/v1/admin/steering?conversation_id=${conv}&limit=100`);
    expect(view.items.map((i: any) => [i.state, i.dispatch])).toEqual([
      ['redispatched', 'failed'],
      ['redispatched', 'failed'],
    ]);
  });
});
