import { CommittedResults, type SizedRow } from './committed-results';

interface Row {
  sequence: number;
  type: string;
}

/** A run's committed rows as the database answers `sequence > after LIMIT n`, counting the reads. */
class FakeTable {
  rows: Row[] = [];
  reads: { after: number; limit: number }[] = [];

  commit(...types: string[]): void {
    for (const type of types) {
      this.rows.push({ sequence: this.rows.length + 1, type });
    }
  }

  load = (after: number, limit: number): Promise<SizedRow<Row>[]> => {
    this.reads.push({ after, limit });
    return Promise.resolve(
      this.rows
        .filter((r) => r.sequence > after)
        .slice(0, limit)
        .map((row) => ({ row, size: 10 })),
    );
  };
}

const seqs = (rows: Row[]) => rows.map((r) => r.sequence);

function cache(maxChars = 10_000, now = () => 0) {
  return new CommittedResults<Row>({ maxChars, idleMs: 1000, isLast: (r) => r.type === 'end', now });
}

describe('CommittedResults', () => {
  it('answers a second reader of the same rows from memory, the same objects', async () => {
    const db = new FakeTable();
    db.commit('delta', 'delta', 'delta', 'end');
    const c = cache();
    const first = await c.page('r', 0, 16, db.load);
    const second = await c.page('r', 0, 16, db.load);
    expect(seqs(second)).toEqual([1, 2, 3, 4]);
    expect(second[2]).toBe(first[2]);
    // The prefix ends with the terminal result: nothing can follow it, no second read.
    expect(db.reads).toHaveLength(1);
    expect(await c.page('r', 4, 16, db.load)).toEqual([]);
    expect(db.reads).toHaveLength(1);
  });

  it('reads what the prefix cannot fill from the database after it (rows committed since)', async () => {
    const db = new FakeTable();
    db.commit('delta', 'delta');
    const c = cache();
    await c.page('r', 0, 16, db.load);
    db.commit('delta', 'end');
    expect(seqs(await c.page('r', 0, 16, db.load))).toEqual([1, 2, 3, 4]);
    expect(db.reads).toEqual([
      { after: 0, limit: 16 },
      { after: 2, limit: 14 },
    ]);
    // Page by page from the middle: the limit holds, memory answers.
    expect(seqs(await c.page('r', 1, 2, db.load))).toEqual([2, 3]);
    expect(db.reads).toHaveLength(2);
  });

  it('keeps only a prefix that starts at the first result and grows without gaps', async () => {
    const db = new FakeTable();
    db.commit('delta', 'delta', 'delta', 'delta');
    const c = cache();
    // A resume from 2 does not start a prefix: rows 1–2 were never read.
    expect(seqs(await c.page('r', 2, 16, db.load))).toEqual([3, 4]);
    expect(c.size).toBe(0);
    expect(seqs(await c.page('r', 0, 2, db.load))).toEqual([1, 2]);
    // Contiguous (from 2 = its end): extends it.
    expect(seqs(await c.page('r', 2, 16, db.load))).toEqual([3, 4]);
    db.reads = [];
    expect(seqs(await c.page('r', 0, 3, db.load))).toEqual([1, 2, 3]);
    expect(db.reads).toEqual([]);
  });

  it('drops the least recently used run past the bound, and a run not read for idleMs', async () => {
    let now = 0;
    // 160 characters: at most 20 (two rows) per run, eight runs of two rows.
    const c = cache(160, () => now);
    const tables = Array.from({ length: 9 }, () => {
      const t = new FakeTable();
      t.commit('delta', 'end');
      return t;
    });
    for (const [i, t] of tables.entries()) {
      await c.page(`run-${i}`, 0, 16, t.load);
    }
    expect(c.size).toBe(8); // run-0 went
    await c.page('run-0', 0, 16, tables[0].load);
    expect(tables[0].reads).toHaveLength(2);
    await c.page('run-8', 0, 16, tables[8].load);
    expect(tables[8].reads).toHaveLength(1);
    now = 2000;
    await c.page('run-8', 0, 16, tables[8].load);
    expect(tables[8].reads).toHaveLength(2); // idle too long: read again
  });

  it('stops growing one run past an eighth of the bound: its later rows come from the database', async () => {
    const db = new FakeTable();
    db.commit('delta', 'delta', 'delta', 'delta', 'end');
    const c = cache(160); // 20 characters: two rows
    await c.page('r', 0, 16, db.load);
    expect(seqs(await c.page('r', 0, 16, db.load))).toEqual([1, 2, 3, 4, 5]);
    expect(db.reads).toEqual([
      { after: 0, limit: 16 },
      { after: 2, limit: 14 },
    ]);
  });

  it("counts each kept row's objects beside its texts (rowChars)", async () => {
    const c = new CommittedResults<Row>({
      maxChars: 1_000,
      rowChars: 90,
      idleMs: 1000,
      isLast: (r) => r.type === 'end',
      now: () => 0,
    });
    // Each row counts 10 + 90 = 100; a run's prefix stops at an eighth of the bound: 1 row.
    const db = new FakeTable();
    db.commit('delta', 'delta', 'end');
    await c.page('r', 0, 10, db.load);
    await c.page('r', 0, 10, db.load);
    expect(db.reads).toEqual([
      { after: 0, limit: 10 },
      { after: 1, limit: 9 }, // only the first row was kept
    ]);
    // Ten one-row prefixes fill the bound: the eleventh run's puts out the least recently used.
    for (let i = 0; i < 11; i++) {
      await c.page(`run${i}`, 0, 1, db.load);
    }
    expect(c.size).toBe(10);
  });
});
