import { ADMIN_KEY, Host, TestDatabase, event, logged, startDemoRunner, waitFor, type Proc } from './harness';
import { RawSseReader, rssOf } from './sse-client';

jest.setTimeout(240_000);

// Echo runs with `cumulative: true` stream cumulative deltas (`all_content` on every delta, as a
// cumulative runner does): 250 words of 400 characters make ~12.5 MB of SSE per reader and run. 4 runs x 6 readers that never read would queue ~300 MB in a host
// without backpressure.
const WORDS = 250;
const WORD = 400;
const RUNS = 4;
const READERS_PER_RUN = 6;
const BACKLOG = 256 * 1024;
const STREAMS_PER_KEY = 30;

describe('SSE backpressure: stalled readers cannot exhaust the host', () => {
  const db = new TestDatabase();
  const host = new Host(db, {
    SSE_MAX_BACKLOG_BYTES: String(BACKLOG),
    SSE_MAX_STREAMS_PER_KEY: String(STREAMS_PER_KEY),
    LOG_LEVEL: 'warn',
  });
  let runner: Proc;
  let runnerId: string;
  const text = Array.from({ length: WORDS }, (_, i) => `${String(i).padStart(4, '0')}${'x'.repeat(WORD - 5)} `).join(
    '',
  );

  const start = async (agentId: string, body = text) => {
    const r = await host.api('POST', '/v1/events', event(agentId, body));
    expect(r.status).toBe(202);
    return r.body.run_id as string;
  };
  const status = async (runId: string) => (await host.api('GET', `/v1/runs/${runId}`)).body.status as string;
  /**
   * The stored results of a run once it has completed. An echo run streams ~12.5 MB as fast as it
   * can: a reader following it live may be cut (SSE_MAX_BACKLOG_BYTES) whenever this process lags
   * on a loaded machine — by design; a reader of stored results is paced and never cut.
   */
  const storedResults = async (runId: string) => {
    await waitFor(`run ${runId} completed`, async () => (await status(runId)) === 'completed', 120_000);
    return host.sse(runId);
  };
  /**
   * /health/live answers while readers stall. No wall-clock bound beyond "not frozen" (30 s): on a
   * machine shared by other jobs a probe can wait seconds for the CPU; the latency figure is the
   * bench's job, not a test's.
   */
  const liveAnswers = async () => {
    const r = await fetch(`${host.http}/health/live`, { signal: AbortSignal.timeout(30_000) }).catch(() => null);
    return r?.status === 200;
  };

  beforeAll(async () => {
    await host.start();
    ({ runner, runnerId } = await startDemoRunner(host));
    const agents: [string, Record<string, unknown>][] = [
      ['echo', { mode: 'echo', cumulative: true }],
      // 20 ms between deltas: readers attach while the run is live, not after it.
      ['slow', { mode: 'echo', cumulative: true, chunk_delay_ms: 20 }],
      ['stall', { mode: 'stall' }],
    ];
    for (const [agent_id, runner_config] of agents) {
      const r = await host.api('POST', '/v1/admin/agents', { agent_id, runner_id: runnerId, runner_config });
      expect(r.status).toBe(201);
    }
  });

  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await db.drop();
  });

  it('keeps RSS bounded and /health/live answering while readers stall; a cut reader resumes with Last-Event-ID', async () => {
    const pid = host.proc.child.pid!;
    // Warm-up: one full run read normally, so the baseline includes a working host.
    const warm = await start('echo');
    expect((await storedResults(warm)).at(-1)!.event).toBe('run.completed');
    const baseline = await rssOf(pid);

    const runIds = await Promise.all(Array.from({ length: RUNS }, () => start('slow')));
    const readers = await Promise.all(
      runIds.flatMap((runId) =>
        Array.from({ length: READERS_PER_RUN }, () =>
          RawSseReader.open(host.http, `/v1/runs/${runId}/events`, ADMIN_KEY),
        ),
      ),
    );
    expect(readers.map((r) => r.status)).toEqual(readers.map(() => 200));
    try {
      await stalledReadersAreCut(runIds, readers, pid, baseline);
    } finally {
      readers.forEach((r) => r.close());
    }
  });

  async function stalledReadersAreCut(runIds: string[], readers: RawSseReader[], pid: number, baseline: number) {
    let peak = 0;
    let unanswered = 0;
    await waitFor(
      'the runs to complete',
      async () => {
        peak = Math.max(peak, await rssOf(pid));
        if (!(await liveAnswers())) {
          unanswered++;
        }
        const states = await Promise.all(runIds.map(status));
        return states.every((s) => s === 'completed');
      },
      180_000,
    );
    peak = Math.max(peak, await rssOf(pid));
    expect(unanswered).toBe(0);
    // Unbounded, the host would hold ~300 MB for these readers.
    expect(peak - baseline).toBeLessThan(150 * 1024 * 1024);

    // Every stalled reader was cut before the end; each resumes from what it got.
    const full = await host.sse(runIds[0]);
    expect(full.at(-1)!.event).toBe('run.completed');
    for (const [i, reader] of readers.entries()) {
      const got = await reader.readToEnd();
      expect(got.at(-1)?.event).not.toBe('run.completed');
      if (i % READERS_PER_RUN !== 0) {
        continue; // resuming one reader per run is enough
      }
      const runId = runIds[i / READERS_PER_RUN];
      const last = got.at(-1)?.id ?? 0;
      const rest = await host.sse(runId, last > 0 ? { lastEventId: String(last) } : {});
      const ids = [...got, ...rest].map((e) => e.id);
      expect(ids).toEqual(ids.map((_, k) => k + 1));
      expect(rest.at(-1)!.event).toBe('run.completed');
      expect(ids.length).toBe(full.length);
    }
    // Logged as the reader is cut, but on the host's stdout pipe, read apart from the HTTP answers.
    await logged(() => host.proc.logs(), 'SSE reader disconnected');
  }

  it('replays a finished run to stalled readers page by page, without holding it in memory', async () => {
    const runId = await start('echo');
    expect((await storedResults(runId)).at(-1)!.event).toBe('run.completed');
    const pid = host.proc.child.pid!;
    const before = await rssOf(pid);
    const readers = await Promise.all(
      Array.from({ length: 12 }, () => RawSseReader.open(host.http, `/v1/runs/${runId}/events`, ADMIN_KEY)),
    );
    try {
      await new Promise((r) => setTimeout(r, 1_500));
      expect(await liveAnswers()).toBe(true);
      // 12 x 12.5 MB would be 150 MB of live data if the replay were buffered, on top of the
      // transient garbage every reader's first pages leave until the next GC (60–110 MB seen).
      expect((await rssOf(pid)) - before).toBeLessThan(140 * 1024 * 1024);
      // A replay reader is not cut (nothing is queued for it beyond one page): it reads everything.
      const all = await readers[0].readToEnd();
      expect(all.at(-1)!.event).toBe('run.completed');
      expect(all.map((e) => e.id)).toEqual(all.map((_, k) => k + 1));
    } finally {
      readers.forEach((r) => r.close());
    }
  });

  it(`caps open streams per API key (SSE_MAX_STREAMS_PER_KEY) with 429 rate_limited`, async () => {
    const runId = await start('stall', 'hold on');
    const mkKey = async (name: string) =>
      (await host.api('POST', '/v1/admin/api-keys', { name, role: 'platform' })).body.key as string;
    const [key, other] = [await mkKey('sse-cap'), await mkKey('sse-other')];
    const path = `/v1/runs/${runId}/events`;
    const open = await Promise.all(
      Array.from({ length: STREAMS_PER_KEY }, () => RawSseReader.open(host.http, path, key)),
    );
    expect(open.every((r) => r.status === 200)).toBe(true);

    const refused = await fetch(`${host.http}${path}`, { headers: { authorization: `Bearer ${key}` } });
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: unknown }).error).toMatchObject({
      code: 'rate_limited',
      retryable: true,
    });

    const otherKey = await RawSseReader.open(host.http, path, other);
    expect(otherKey.status).toBe(200);

    // A closed stream gives its slot back.
    open[0].close();
    const again = await waitFor('a freed slot', async () => {
      const r = await RawSseReader.open(host.http, path, key);
      if (r.status === 200) {
        return r;
      }
      r.close();
      return null;
    });
    [...open.slice(1), again, otherKey].forEach((r) => r.close());
    expect((await host.api('POST', `/v1/runs/${runId}/cancel`, {})).status).toBe(200);
  });
});
