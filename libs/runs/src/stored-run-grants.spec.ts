import { snapshotHash } from '@libs/authz';
import type { RunLiveness, RunsRepository } from '@libs/persistence';
import type { ActiveRuns } from './active-runs';
import type { RunGrant } from './run-grant';
import { MAX_REMOTE_GRANTS, StoredRunGrants } from './stored-run-grants';
import { testSnapshot } from './testing/snapshot';

/** The runs table as another process wrote it: a status row and a stored snapshot per run. */
function table() {
  const rows = new Map<string, { live: RunLiveness; snapshot: object; hash: string }>();
  const reads = { liveness: 0, authorization: 0 };
  const repo = {
    liveness: (id: string) => {
      reads.liveness++;
      return Promise.resolve(rows.get(id)?.live ?? null);
    },
    authorization: (id: string) => {
      reads.authorization++;
      const r = rows.get(id);
      return Promise.resolve(r ? { authorization: r.snapshot, authorization_hash: r.hash } : null);
    },
  };
  const put = (runId: string, status: RunLiveness['status'] = 'running', o: { burst?: number } = {}) => {
    const snapshot = testSnapshot({ run_id: runId, burst: o.burst ?? 2 });
    rows.set(runId, {
      live: {
        status,
        started_at: 1000,
        cancel_requested: false,
        lease: { run_id: runId, attempt: 1, owner_process_id: 'p-owner' },
      },
      snapshot: JSON.parse(JSON.stringify(snapshot)) as object,
      hash: snapshotHash(snapshot),
    });
    return rows.get(runId)!;
  };
  return { rows, reads, put, repo: repo as unknown as RunsRepository };
}

function grantsOver(t: ReturnType<typeof table>, local: Record<string, RunGrant> = {}) {
  const active = { grant: (id: string) => local[id] } as unknown as ActiveRuns;
  return new StoredRunGrants(active, t.repo);
}

describe('StoredRunGrants (the host API at a process that does not own the run)', () => {
  it('builds the grant of a running run owned elsewhere; the snapshot is read once, the status every call', async () => {
    const t = table();
    t.put('r1');
    const grants = grantsOver(t);
    const g = await grants.find('r1');
    expect(g).toMatchObject({
      run_id: 'r1',
      plugin_id: 'x/y',
      runner_id: 'plugin:x/y/default',
      active: true,
      cancel_requested: false,
      started_at: 1000,
    });
    expect(grants.grant('r1')).toBeUndefined(); // not this process's run
    t.rows.get('r1')!.live.cancel_requested = true;
    expect((await grants.find('r1'))?.cancel_requested).toBe(true);
    expect(t.reads).toEqual({ liveness: 2, authorization: 1 });
  });

  it('carries the lease read with the status on every call: its writes are fenced by the attempt it was granted for', async () => {
    const t = table();
    t.put('r1');
    const grants = grantsOver(t);
    expect((await grants.find('r1'))?.lease).toEqual({ run_id: 'r1', attempt: 1, owner_process_id: 'p-owner' });
    // Taken over and started again elsewhere: the cached snapshot stays, the lease is the new one.
    t.rows.get('r1')!.live.lease = { run_id: 'r1', attempt: 2, owner_process_id: 'p-next' };
    expect((await grants.find('r1'))?.lease).toEqual({ run_id: 'r1', attempt: 2, owner_process_id: 'p-next' });
    expect(t.reads.authorization).toBe(1);
  });

  it('refuses a run that ended since its grant was cached, and aborts that grant', async () => {
    const t = table();
    t.put('r1');
    const grants = grantsOver(t);
    const g = (await grants.find('r1'))!;
    t.rows.get('r1')!.live.status = 'completed';
    expect(await grants.find('r1')).toBeUndefined();
    expect(g.signal.aborted).toBe(true);
    expect(grants.cached).toBe(0);
  });

  it('grants nothing for an unknown run, a queued one, or a snapshot that does not match its stored hash', async () => {
    const t = table();
    t.put('queued', 'queued');
    t.put('tampered').hash = 'f'.repeat(64);
    const grants = grantsOver(t);
    expect(await grants.find('nope')).toBeUndefined();
    expect(await grants.find('queued')).toBeUndefined();
    expect(await grants.find('tampered')).toBeUndefined();
    expect(grants.cached).toBe(0);
  });

  it("answers with this process's own grant first, without reading the database", async () => {
    const t = table();
    const own = { run_id: 'mine', active: false } as RunGrant;
    const grants = grantsOver(t, { mine: own });
    expect(await grants.find('mine')).toBe(own);
    expect(t.reads).toEqual({ liveness: 0, authorization: 0 });
  });

  it("keeps one rate bucket per run in this process (the run's burst, then refused)", async () => {
    const t = table();
    t.put('r1', 'running', { burst: 2 });
    const grants = grantsOver(t);
    const takes = [];
    for (let i = 0; i < 3; i++) {
      takes.push((await grants.find('r1'))!.budget.take());
    }
    expect(takes).toEqual([true, true, false]);
  });

  it('is bounded: the least recently called run is dropped (and its grant aborted) past MAX_REMOTE_GRANTS', async () => {
    const t = table();
    const grants = grantsOver(t);
    for (let i = 0; i <= MAX_REMOTE_GRANTS; i++) {
      t.put(`r${i}`);
    }
    const first = (await grants.find('r0'))!;
    for (let i = 1; i < MAX_REMOTE_GRANTS; i++) {
      await grants.find(`r${i}`);
    }
    await grants.find('r0'); // r0 called again: r1 is now the least recent
    await grants.find(`r${MAX_REMOTE_GRANTS}`);
    expect(grants.cached).toBe(MAX_REMOTE_GRANTS);
    expect(first.signal.aborted).toBe(false);
    const before = t.reads.authorization;
    await grants.find('r1');
    expect(t.reads.authorization).toBe(before + 1); // r1 was dropped: read again
  });

  it('concurrent first calls of one run read its snapshot once', async () => {
    const t = table();
    t.put('r1');
    const grants = grantsOver(t);
    const all = await Promise.all([grants.find('r1'), grants.find('r1'), grants.find('r1')]);
    expect(all.every((g) => g?.run_id === 'r1')).toBe(true);
    expect(t.reads.authorization).toBe(1);
  });
});
