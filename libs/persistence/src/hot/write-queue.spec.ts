import { exec, type Op, type Unit } from './unit';
import { SQL } from './hot-sql';
import { WriteQueue, type WriterDriver } from './write-queue';

/** A driver over an in-memory log: a group commits its units' ops, or none of them. */
class FakeDriver implements WriterDriver {
  committed: string[] = [];
  groups: number[] = [];
  busy = false;

  ready(): boolean {
    return !this.busy;
  }

  runGroup(units: readonly (() => Unit<unknown>)[]): unknown[] {
    const staged: string[] = [];
    const out = units.map((u) => {
      const it = u();
      let r = it.next();
      while (!r.done) {
        const op: Op = r.value;
        if (op.params[0] === 'boom') {
          throw new Error('constraint failed');
        }
        staged.push(String(op.params[0]));
        r = it.next({ changes: 1 });
      }
      return r.value;
    });
    this.committed.push(...staged);
    this.groups.push(units.length);
    return out;
  }

  close(): void {}
}

function* write(tag: string): Unit<string> {
  yield* exec(SQL.insertAudit, [tag]);
  return tag;
}

describe('WriteQueue', () => {
  it('groups what is submitted in one tick into one transaction and resolves in order', async () => {
    const driver = new FakeDriver();
    const q = new WriteQueue(driver);
    const done = await Promise.all(['a', 'b', 'c'].map((t) => q.submit(() => write(t))));
    expect(done).toEqual(['a', 'b', 'c']);
    expect(driver.committed).toEqual(['a', 'b', 'c']);
    expect(driver.groups).toEqual([3]);
    expect(q.stats).toMatchObject({ units: 3, commits: 1, replays: 0 });
  });

  it('caps a group at maxBatch units', async () => {
    const driver = new FakeDriver();
    const q = new WriteQueue(driver, 2);
    await Promise.all(['a', 'b', 'c', 'd', 'e'].map((t) => q.submit(() => write(t))));
    expect(driver.groups).toEqual([2, 2, 1]);
  });

  it('fails only the failing unit of a group: the others commit, replayed one by one', async () => {
    const driver = new FakeDriver();
    const q = new WriteQueue(driver);
    const results = await Promise.allSettled([
      q.submit(() => write('a')),
      q.submit(() => write('boom')),
      q.submit(() => write('c')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(driver.committed).toEqual(['a', 'c']);
    expect(q.stats.replays).toBe(1);
  });

  it('waits while another owner holds the connection', async () => {
    const driver = new FakeDriver();
    driver.busy = true;
    const q = new WriteQueue(driver);
    const pending = q.submit(() => write('a'));
    await new Promise((r) => setTimeout(r, 10));
    expect(driver.committed).toEqual([]);
    driver.busy = false;
    await expect(pending).resolves.toBe('a');
  });

  describe('deferred units', () => {
    afterEach(() => jest.useRealTimers());

    it('join the next group another unit starts, in the order they were queued', async () => {
      const driver = new FakeDriver();
      const q = new WriteQueue(driver);
      const a = q.defer(() => write('a'));
      const b = q.submit(() => write('b'));
      expect(a.wait).toBe(false);
      await expect(b).resolves.toBe('b');
      await expect(a.committed).resolves.toBe('a');
      expect(driver.committed).toEqual(['a', 'b']);
      expect(driver.groups).toEqual([1 + 1]);
    });

    it('alone with no defer interval (DEFER_MS 0), start their group one turn after theirs: what their turn queued next runs first', async () => {
      // An answered read call queues its row, then node:http2 sends the call's trailers from an
      // immediate queued later in the same turn: the group must not run before them.
      const driver = new FakeDriver();
      const q = new WriteQueue(driver);
      const row = q.defer(() => write('row'));
      const seenByTrailers: string[][] = [];
      setImmediate(() => seenByTrailers.push([...driver.committed]));
      await expect(row.committed).resolves.toBe('row');
      expect(seenByTrailers).toEqual([[]]);
      expect(driver.groups).toEqual([1]);
    });

    it('alone with no defer interval, join a group a submitted unit starts meanwhile (one group, no second)', async () => {
      const driver = new FakeDriver();
      const q = new WriteQueue(driver);
      const row = q.defer(() => write('row'));
      await new Promise((resolve) => setImmediate(resolve));
      const w = q.submit(() => write('w'));
      await expect(w).resolves.toBe('w');
      await expect(row.committed).resolves.toBe('row');
      await q.drain();
      expect(driver.committed).toEqual(['row', 'w']);
      expect(driver.groups).toEqual([2]);
    });

    it('alone, commit as one group after the defer interval, not before', async () => {
      jest.useFakeTimers({ doNotFake: ['setImmediate'] });
      const driver = new FakeDriver();
      const q = new WriteQueue(driver, 256, 10);
      const units = ['a', 'b', 'c'].map((t) => q.defer(() => write(t)));
      await jest.advanceTimersByTimeAsync(9);
      expect(driver.committed).toEqual([]);
      await jest.advanceTimersByTimeAsync(1);
      expect(await Promise.all(units.map((u) => u.committed))).toEqual(['a', 'b', 'c']);
      expect(driver.groups).toEqual([3]);
    });

    it('past the bound of uncommitted deferred units, the next one must be waited for and flushes at once', async () => {
      jest.useFakeTimers({ doNotFake: ['setImmediate'] });
      const driver = new FakeDriver();
      const q = new WriteQueue(driver, 256, 1000, 2);
      const first = [q.defer(() => write('a')), q.defer(() => write('b'))];
      const third = q.defer(() => write('c'));
      expect(first.map((u) => u.wait)).toEqual([false, false]);
      expect(third.wait).toBe(true);
      await expect(third.committed).resolves.toBe('c'); // the immediate flush, long before the 1 s interval
      expect(driver.committed).toEqual(['a', 'b', 'c']);
      // Committed: room again.
      expect(q.defer(() => write('d')).wait).toBe(false);
    });

    it('are committed before a barrier resolves (the audit log read); an empty queue needs no group', async () => {
      const driver = new FakeDriver();
      const q = new WriteQueue(driver, 256, 60_000);
      await q.barrier();
      expect(driver.groups).toEqual([]);
      const a = q.defer(() => write('a'));
      await q.barrier();
      expect(driver.committed).toEqual(['a']);
      await expect(a.committed).resolves.toBe('a');
    });

    it('leave the queue idle for work outside it (the background transcript index); a submit does not', async () => {
      const driver = new FakeDriver();
      const q = new WriteQueue(driver, 256, 60_000);
      expect(q.idle).toBe(true);
      const a = q.defer(() => write('a'));
      expect(q.idle).toBe(true);
      const b = q.submit(() => write('b'));
      expect(q.idle).toBe(false);
      await Promise.all([a.committed, b]);
      expect(q.idle).toBe(true);
    });

    it('a failing one fails alone; drain and close commit the rest without waiting for the interval', async () => {
      const driver = new FakeDriver();
      const q = new WriteQueue(driver, 256, 60_000);
      const units = ['a', 'boom', 'c'].map((t) => q.defer(() => write(t)));
      await q.close();
      const settled = await Promise.allSettled(units.map((u) => u.committed));
      expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect(driver.committed).toEqual(['a', 'c']);
      const late = q.defer(() => write('d'));
      expect(late.wait).toBe(true);
      await expect(late.committed).rejects.toThrow('closed');
    });
  });

  it('drains, then refuses work once closed', async () => {
    const driver = new FakeDriver();
    const q = new WriteQueue(driver);
    const pending = q.submit(() => write('a'));
    await q.close();
    await expect(pending).resolves.toBe('a');
    await expect(q.submit(() => write('b'))).rejects.toThrow('closed');
  });
});
