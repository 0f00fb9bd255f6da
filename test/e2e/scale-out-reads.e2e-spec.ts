import { randomBytes } from 'node:crypto';
import { ADMIN_KEY, Host, TestDatabase, freePort, parseSse, startDemoRunner, waitFor, type Proc } from './harness';
import { answered, conversationRuns, message } from './steering-support';

jest.setTimeout(240_000);

/**
 * Everything from anywhere (docs/scale-out.md#everything-from-anywhere-reads-cancel-steering):
 * several host processes on one PostgreSQL database. The runner is connected to B, where events
 * are admitted; the others (C, and A on the default bus) read the runs' streams live, cancel,
 * steer and interrupt them, and accept stream tokens minted at B. On each bus: PostgreSQL
 * LISTEN/NOTIFY, NATS, and a bus that never connects (NATS on a closed port: everything by polling).
 */

/** An SSE response read as it arrives. */
interface OpenStream {
  status: number;
  /** Frames so far (comments left out). */
  frames: () => ReturnType<typeof parseSse>;
  /** The whole body, comments left out, once the server ended it. */
  done: Promise<string>;
}

async function openSse(host: Host, path: string, headers: Record<string, string> = {}): Promise<OpenStream> {
  const res = await fetch(`${host.http}${path}`, { headers: { authorization: `Bearer ${ADMIN_KEY}`, ...headers } });
  let text = '';
  const clean = () =>
    text
      .split('\n\n')
      .filter((block) => block.trim() !== '' && !block.startsWith(':'))
      .map((block) => `${block}\n\n`)
      .join('');
  const done = (async () => {
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done: end } = await reader.read();
      if (end) {
        return clean();
      }
      text += decoder.decode(value, { stream: true });
    }
  })();
  return {
    status: res.status,
    frames: () => {
      const complete = clean();
      return complete === '' ? [] : parseSse(complete.slice(0, complete.lastIndexOf('\n\n')));
    },
    done,
  };
}

const BUSES: [string, (prefix: string) => Promise<Record<string, string>>, boolean][] = [
  ['PostgreSQL LISTEN/NOTIFY', () => Promise.resolve({ SIGNAL_BUS: 'postgres' }), true],
  [
    'NATS',
    (prefix) =>
      Promise.resolve({ SIGNAL_BUS: 'nats', NATS_URL: 'nats://127.0.0.1:4222', SIGNAL_BUS_SUBJECT_PREFIX: prefix }),
    false,
  ],
  [
    'a bus that never connects (polling only)',
    async () => ({ SIGNAL_BUS: 'nats', NATS_URL: `nats://127.0.0.1:${await freePort()}` }),
    false,
  ],
];

describe.each(BUSES)('several processes on one database, bus: %s', (_bus, busEnv, threeHosts) => {
  const db = new TestDatabase('postgres');
  let b: Host;
  let readers: Host[];
  let runner: Proc;

  const agent = async (agent_id: string, runner_config: Record<string, unknown>, concurrency_policy?: object) => {
    const r = await b.api('POST', '/v1/admin/agents', {
      agent_id,
      runner_id: 'plugin:demo/echo/default',
      runner_config,
      ...(concurrency_policy ? { concurrency_policy } : {}),
    });
    expect(r.status).toBe(201);
  };

  /** Admitted at B, where the runner is connected. */
  const admit = async (body: unknown) => {
    const r = await b.api('POST', '/v1/events', body);
    expect(r.status).toBe(202);
    return r.body as { run_id: string; disposition: string };
  };

  beforeAll(async () => {
    const env = { SIGNAL_POLL_MS: '100', ...(await busEnv(`e2e_${randomBytes(4).toString('hex')}`)) };
    // One after the other: each boot recovers the runs it finds running (none yet).
    b = await new Host(db, env).start();
    readers = [await new Host(db, env).start()];
    if (threeHosts) {
      readers.push(await new Host(db, env).start());
    }
    ({ runner } = await startDemoRunner(b, { env: { DEMO_STEERING: '1' } }));
    await agent('stall', { mode: 'stall' });
    await agent('echo', { mode: 'echo', chunk_delay_ms: 30 });
    await agent('steer', { mode: 'steer', chunk_delay_ms: 40, steer_wait_ms: 2000 }, { mode: 'steer' });
    await agent('interrupt', { mode: 'stall' }, { mode: 'interrupt' });
  });

  afterAll(async () => {
    await runner?.stop();
    for (const h of [...(readers ?? []), b]) {
      await h?.stop();
    }
    await db.drop();
  });

  it('follows a run active at B live from the other processes, and cancels it from one of them', async () => {
    const run = await admit({
      agent_id: 'stall',
      event: { event_type: 'message.received', source: 'api' },
      actor: { actor_type: 'user', actor_id: 'u1' },
      input: { text: 'wait for me' },
    });
    const path = `/v1/runs/${run.run_id}/events`;
    const local = await openSse(b, path);
    // Two readers of the run at each other process (one follower there), and one resuming.
    const remote = [];
    for (const h of readers) {
      remote.push(await openSse(h, path), await openSse(h, path));
    }
    const c = readers[0];
    // Every reader has the run's first delta: the run is live, and each stream is open.
    for (const s of [local, ...remote]) {
      expect(s.status).toBe(200);
      await waitFor('the first frame', () => Promise.resolve(s.frames().length >= 1));
    }
    const resumed = await openSse(c, path, { 'last-event-id': String(local.frames()[0].id) });

    const cancelled = await c.api('POST', `/v1/runs/${run.run_id}/cancel`, { reason: 'asked at another process' });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ run_id: run.run_id, status: 'cancelled' });

    const owner = await local.done;
    const frames = parseSse(owner);
    expect(frames.at(-1)!.data).toMatchObject({ type: 'run.failed', data: { code: 'cancelled' } });
    expect(frames.map((f) => f.id)).toEqual(frames.map((_, i) => i + 1));
    for (const s of remote) {
      expect(await s.done).toBe(owner);
    }
    expect(parseSse(await resumed.done).map((f) => f.id)).toEqual(frames.slice(1).map((f) => f.id));
    // After the end: the replay at any process is the same, and a resume at the terminal is 204.
    expect(await (await openSse(c, path)).done).toBe(owner);
    const over = await fetch(`${c.http}${path}?after=${frames.length}`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
    });
    expect(over.status).toBe(204);
    // Cancelled again at yet another process: the run has ended.
    expect((await readers.at(-1)!.api('POST', `/v1/runs/${run.run_id}/cancel`, {})).status).toBe(409);
  });

  it('streams a run of many deltas and its delivery ops at every process alike', async () => {
    const words = Array.from({ length: 30 }, (_, i) => `w${i}`).join(' ');
    const run = await admit({
      agent_id: 'echo',
      event: { event_type: 'message.received', source: 'api' },
      actor: { actor_type: 'user', actor_id: 'u1' },
      input: { text: words },
    });
    const streams = [];
    for (const h of [b, ...readers]) {
      streams.push(
        await openSse(h, `/v1/runs/${run.run_id}/events`),
        await openSse(h, `/v1/runs/${run.run_id}/deliveries`),
      );
    }
    const [events, deliveries, ...others] = await Promise.all(streams.map((s) => s.done));
    const frames = parseSse(events);
    expect(frames.at(-1)!.event).toBe('run.completed');
    const text = frames
      .filter((f) => f.event === 'message.delta')
      .map((f) => f.data.data.chunk.content)
      .join('');
    expect(text).toBe(words);
    expect(parseSse(deliveries).length).toBeGreaterThan(0);
    for (let i = 0; i < others.length; i += 2) {
      expect(others[i]).toBe(events);
      expect(others[i + 1]).toBe(deliveries);
    }
  });

  it('steers a follow-up posted at another process into the run at B, and interrupts from there', async () => {
    const c = readers[0];
    const conv = `steer-${randomBytes(4).toString('hex')}`;
    const first = await admit(message('steer', conv, 'the first message'));
    expect(first.disposition).toBe('started');
    const follow = await c.api('POST', '/v1/events', message('steer', conv, 'a follow-up from elsewhere'));
    expect(follow.status).toBe(202);
    expect(follow.body).toMatchObject({ disposition: 'steered', run_id: first.run_id, position: 1 });
    const runs = await conversationRuns(c, conv);
    const { order, counts } = answered(runs);
    expect(order).toEqual(['the first message', 'a follow-up from elsewhere']);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);

    const busy = `interrupt-${randomBytes(4).toString('hex')}`;
    const stalled = await admit(message('interrupt', busy, 'stall here'));
    await waitFor(
      'the stalled run running',
      async () => (await c.api('GET', `/v1/runs/${stalled.run_id}`)).body.status === 'running',
    );
    const next = await c.api('POST', '/v1/events', message('interrupt', busy, 'the next one'));
    expect(next.status).toBe(202);
    expect(next.body).toMatchObject({ disposition: 'queued', interrupted_run_id: stalled.run_id });
    const ended = await waitFor('the interrupted run ended', async () => {
      const r = await c.api('GET', `/v1/runs/${stalled.run_id}`);
      return r.body.status === 'running' ? null : r.body;
    });
    expect(ended).toMatchObject({ status: 'cancelled' });
  });

  it('accepts a stream token minted at B at every other process', async () => {
    const run = await admit({
      agent_id: 'echo',
      event: { event_type: 'message.received', source: 'api' },
      actor: { actor_type: 'user', actor_id: 'u1' },
      input: { text: 'token please' },
    });
    const minted = await b.api('POST', `/v1/runs/${run.run_id}/stream-tokens`);
    expect(minted.status).toBe(201);
    for (const h of readers) {
      const res = await fetch(`${h.http}${minted.body.events_url as string}`);
      expect(res.status).toBe(200);
      expect(parseSse(await res.text()).at(-1)!.event).toBe('run.completed');
    }
    const forged = `${minted.body.events_url as string}x`;
    expect((await fetch(`${readers[0].http}${forged}`)).status).toBe(401);
  });
});
