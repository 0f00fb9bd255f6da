import { MemorySignalBus } from '@libs/cluster';
import type { CatalogVersionRepository } from '@libs/persistence';
import { CATALOG_CHANNEL, CatalogVersions } from './catalog-versions';

/** The version row, read by hand: each read answers when the test says, with the row as it is then. */
function store() {
  const reads: { resolve: () => void }[] = [];
  const s = {
    row: 0,
    started: 0,
    read: () =>
      new Promise<number>((resolve) => {
        s.started++;
        reads.push({ resolve: () => resolve(s.row) });
      }),
    /** Answers the oldest pending read with the row as it is now. */
    answer: async () => {
      reads.shift()!.resolve();
      // Let the callers' continuations (and a queued read's start) run.
      await new Promise((r) => setImmediate(r));
    },
  };
  return s;
}

describe('CatalogVersions', () => {
  it('a caller never gets a read that started before its call: it shares the next one', async () => {
    const s = store();
    const versions = new CatalogVersions(s as unknown as CatalogVersionRepository, new MemorySignalBus());
    const first = versions.current();
    // An admin write commits while the first read is in flight; these callers came after it.
    s.row = 1;
    const later = [versions.current(), versions.current(), versions.current()];
    expect(s.started).toBe(1);
    s.row = 0; // the in-flight read saw the row before the write
    await s.answer();
    expect(await first).toBe(0);
    s.row = 1;
    expect(s.started).toBe(2); // one read for all three queued callers
    await s.answer();
    expect(await Promise.all(later)).toEqual([1, 1, 1]);
    expect(s.started).toBe(2);
  });

  it("one read per admission: a read started after the admission began serves its later calls, not an earlier admission's", async () => {
    const s = store();
    const versions = new CatalogVersions(s as unknown as CatalogVersionRepository, new MemorySignalBus());
    const earlier = performance.now();
    await new Promise((r) => setTimeout(r, 2));
    const since = performance.now();
    const first = versions.current(since);
    await s.answer();
    expect(await first).toBe(0);
    // Later reads of the same admission: the read above started after it began.
    s.row = 1;
    expect(await versions.current(since)).toBe(0);
    expect(s.started).toBe(1);
    // An admission that began before that read started reuses it too (it started after the instant).
    expect(await versions.current(earlier)).toBe(0);
    // A call of its own (no instant: now) never takes a read that started before it.
    const own = versions.current();
    expect(s.started).toBe(2);
    await s.answer();
    expect(await own).toBe(1);
  });

  it('a failed read fails its callers only; the queued callers get their own read', async () => {
    let fail = true;
    const pending: ((v: number) => void)[] = [];
    const failing = {
      read: () =>
        fail ? Promise.reject(new Error('connection lost')) : new Promise<number>((resolve) => pending.push(resolve)),
    };
    const versions = new CatalogVersions(failing as unknown as CatalogVersionRepository, new MemorySignalBus());
    const first = versions.current();
    fail = false;
    const queued = versions.current();
    await expect(first).rejects.toThrow('connection lost');
    await new Promise((r) => setImmediate(r));
    pending.shift()!(7);
    expect(await queued).toBe(7);
  });

  it('written() wakes the listeners of every process on the bus; a wake-up is never the version', () => {
    const bus = new MemorySignalBus();
    const s = store();
    const versions = new CatalogVersions(s as unknown as CatalogVersionRepository, bus);
    const woken: string[] = [];
    versions.onWritten(() => woken.push('here'));
    bus.subscribe(CATALOG_CHANNEL, () => woken.push('bus'));
    versions.written();
    expect(woken.sort()).toEqual(['bus', 'here']);
    // Another process's signal arrives the same way.
    bus.publish(CATALOG_CHANNEL, '{}');
    expect(woken).toHaveLength(4);
    expect(s.started).toBe(0);
  });

  it("a read seeded by another statement (admission's reads ahead) serves the callers whose instant it follows; when it fails they read for themselves", async () => {
    const s = store();
    const versions = new CatalogVersions(s as unknown as CatalogVersionRepository, new MemorySignalBus());
    const since = performance.now();
    let answer!: (v: number) => void;
    versions.seed(performance.now(), new Promise<number>((r) => (answer = r)));
    const shared = [versions.current(since), versions.current(since)];
    answer(7);
    expect(await Promise.all(shared)).toEqual([7, 7]);
    expect(s.started).toBe(0);
    // A caller whose instant is after the seeded read started does not take it.
    const own = versions.current();
    expect(s.started).toBe(1);
    await s.answer();
    expect(await own).toBe(0);

    const later = performance.now();
    versions.seed(performance.now(), Promise.reject(new Error('the reads ahead failed')));
    s.row = 3;
    const fallback = versions.current(later);
    await new Promise((r) => setImmediate(r));
    expect(s.started).toBe(2);
    await s.answer();
    expect(await fallback).toBe(3);
  });
});
