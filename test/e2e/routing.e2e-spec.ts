import { Host, TestDatabase, dbRows, event, launchDemoRunner, runnerConnected, waitFor, type Proc } from './harness';

jest.setTimeout(120_000);

/**
 * Runs reach the process holding the runner's stream (docs/scale-out.md#routing): two host
 * processes on one PostgreSQL database, the demo runner connected to B only; events posted at A
 * are admitted there (202, `queued`), claimed and dispatched by B, and complete. Always on
 * PostgreSQL (two processes never share a SQLite file).
 */
describe('routing: two host processes on one PostgreSQL, the runner at B only', () => {
  const previous = process.env.E2E_DATABASE;
  let db: TestDatabase;
  let a: Host;
  let b: Host;
  let runner: Proc | undefined;
  const runnerId = 'plugin:demo/echo/default';

  const terminal = (host: Host, runId: string) =>
    waitFor(
      `run ${runId} terminal`,
      async () => {
        const r = await host.api('GET', `/v1/runs/${runId}`);
        return r.body.status !== 'queued' && r.body.status !== 'running' ? r.body : null;
      },
      30_000,
    );

  beforeAll(async () => {
    process.env.E2E_DATABASE = 'postgres';
    db = new TestDatabase();
    a = new Host(db, { HOST_INSTANCE_ID: 'host-a' });
    b = new Host(db, { HOST_INSTANCE_ID: 'host-b' });
    await a.start();
    await b.start();
    const reg = await a.api('POST', '/v1/admin/plugins', { author: 'demo', name: 'echo' });
    expect(reg.status).toBe(201);
    runner = launchDemoRunner(b, reg.body.token as string);
    await runnerConnected(b, runnerId);
    expect(
      (
        await a.api('POST', '/v1/admin/agents', {
          agent_id: 'echo',
          runner_id: runnerId,
          runner_config: { mode: 'echo' },
        })
      ).status,
    ).toBe(201);
    // B's presence row is written right after the attach.
    await waitFor('presence of the runner at B', async () =>
      (await dbRows(db, 'runner_presence')).find((r) => r.runner_id === runnerId),
    );
  });

  afterAll(async () => {
    await runner?.stop();
    await a?.stop();
    await b?.stop();
    await db?.drop();
    if (previous === undefined) {
      delete process.env.E2E_DATABASE;
    } else {
      process.env.E2E_DATABASE = previous;
    }
  });

  it("records which process holds the runner: one presence row, B's", async () => {
    const presence = await dbRows(db, 'runner_presence');
    const processes = await dbRows(db, 'host_processes');
    expect(presence).toHaveLength(1);
    const holder = processes.find((p) => p.id === presence[0].process_id);
    expect(holder).toMatchObject({ instance: 'host-b' });
    expect(presence[0]).toMatchObject({ runner_id: runnerId, plugin_id: 'demo/echo' });
  });

  it('an event without a conversation posted at A is queued there and completed by B', async () => {
    const r = await a.api('POST', '/v1/events', {
      agent_id: 'echo',
      event: { event_type: 'message.received', source: 'api' },
      input: { text: 'routed to the holder' },
    });
    expect(r.status).toBe(202);
    expect(r.body).toMatchObject({ disposition: 'queued', run_id: expect.any(String) });
    const run = await terminal(a, r.body.run_id);
    expect(run).toMatchObject({ status: 'completed', runner_id: runnerId, conversation_id: null });
    // B dispatched it: its stream replays there with the echoed text and the terminal result.
    const events = await b.sse(r.body.run_id);
    expect(events.at(-1)!.event).toBe('run.completed');
    const text = events
      .filter((e) => e.event === 'message.delta')
      .map((e) => e.data.data.chunk.content)
      .join('');
    expect(text).toBe('routed to the holder');
  });

  it('events of one conversation posted at A run at B one after the other, in order', async () => {
    const conversation = { conversation_id: 'conv-routed' };
    const ids: string[] = [];
    for (const text of ['first', 'second', 'third']) {
      const r = await a.api('POST', '/v1/events', event('echo', text, { conversation, concurrency: 'queue' }));
      expect(r.status).toBe(202);
      expect(r.body.disposition).toBe('queued');
      ids.push(r.body.run_id as string);
    }
    const runs = [];
    for (const id of ids) {
      runs.push(await terminal(a, id));
    }
    expect(runs.map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
    const started = runs.map((r) => Date.parse(r.started_at));
    const finished = runs.map((r) => Date.parse(r.finished_at));
    expect(started[1]).toBeGreaterThanOrEqual(finished[0]);
    expect(started[2]).toBeGreaterThanOrEqual(finished[1]);
  });

  it('a runner held nowhere still fails at once (503 runner.unavailable); its presence row is gone', async () => {
    await runner!.stop();
    runner = undefined;
    await waitFor('presence row gone', async () => (await dbRows(db, 'runner_presence')).length === 0);
    const r = await a.api('POST', '/v1/events', event('echo', 'anyone?'));
    expect(r.status).toBe(503);
    expect(r.body.error).toMatchObject({ code: 'unavailable', details: { error_code: 'runner.unavailable' } });
  });
});
