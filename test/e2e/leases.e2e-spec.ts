import { Host, SHORT_LEASE, TestDatabase, dbRows, event, startDemoRunner, takenOver, waitFor } from './harness';

jest.setTimeout(120_000);

/**
 * Run leases and fencing (docs/scale-out.md#leases-and-fencing) with real processes. On
 * PostgreSQL, two hosts on one database: the owner of a run is paused (`SIGSTOP`) past its lease,
 * the other takes the run over (`interrupted`), and once resumed (`SIGCONT`) the paused one
 * writes nothing more: its late results are refused (fenced, or dropped by its self-fence) and it
 * registers again. On SQLite (one process per file) nobody can declare the paused process dead:
 * its run goes on.
 */
describe('run leases across processes', () => {
  const db = new TestDatabase();
  const postgres = process.env.E2E_DATABASE === 'postgres';

  afterAll(async () => {
    await db.drop();
  });

  const results = async (runId: string) =>
    (await dbRows(db, 'run_results'))
      .filter((r) => r.run_id === runId)
      .map((r) => ({ sequence: Number(r.sequence), type: String(r.type), source: String(r.source) }))
      .sort((a, b) => a.sequence - b.sequence);

  it('a paused owner is replaced: its run ends interrupted at the other process, and nothing is written after the terminal', async () => {
    const owner = await new Host(db, SHORT_LEASE).start();
    const other = postgres ? await new Host(db, SHORT_LEASE).start() : null;
    const { runner, runnerId } = await startDemoRunner(owner);
    await owner.api('POST', '/v1/admin/agents', {
      agent_id: 'slow',
      runner_id: runnerId,
      runner_config: { mode: 'echo', chunk_delay_ms: 40 },
    });
    const words = Array.from({ length: 300 }, (_, i) => `w${i}`).join(' ');
    const admitted = await owner.api('POST', '/v1/events', event('slow', words));
    expect(admitted.status).toBe(202);
    const runId = admitted.body.run_id as string;
    await waitFor('first results committed', async () => (await results(runId)).length > 0);

    owner.proc.child.kill('SIGSTOP');
    try {
      if (other) {
        await takenOver(db, [runId]);
      } else {
        await new Promise((r) => setTimeout(r, 2 * Number(SHORT_LEASE.PROCESS_LEASE_MS)));
      }
    } finally {
      owner.proc.child.kill('SIGCONT');
    }

    if (other) {
      const run = await other.api('GET', `/v1/runs/${runId}`);
      expect(run.body).toMatchObject({ status: 'interrupted', error: { code: 'host.interrupted' } });
      const atTakeover = await results(runId);
      expect(atTakeover.at(-1)).toMatchObject({ type: 'run.failed', source: 'host' });
      // The resumed owner finds itself declared dead: it fences itself and registers again.
      await waitFor(
        'the resumed owner registered again',
        async () => (await dbRows(db, 'host_processes')).length === 2,
      );
      await waitFor('the owner closed its runner streams (self-fence)', () =>
        Promise.resolve(owner.proc.logs().includes('self-fence')),
      );
      // Nothing was written after the terminal (the paused process's buffered results were refused).
      expect(await results(runId)).toEqual(atTakeover);
      await other.stop();
    } else {
      // One process: a pause is no death; the run finishes.
      await waitFor(
        'the run completed',
        async () => (await owner.api('GET', `/v1/runs/${runId}`)).body.status === 'completed',
      );
      expect((await results(runId)).at(-1)).toMatchObject({ type: 'run.completed', source: 'runner' });
    }
    await runner.stop();
    await owner.stop();
  });
});
