import fc from 'fast-check';
import {
  CHECKPOINT_CHARS,
  CUMULATIVE_MARKER,
  ChainTips,
  CumulativeDeltas,
  answerPage,
  type StoredRow,
} from './cumulative-deltas';

type Data = Record<string, unknown>;
const delta = (chunk: Data): Data => ({ chunk });

/** Stores `sent` (in arrival order) through the rule; the stored rows in sequence order. */
function ingest(sent: readonly StoredRow[]): StoredRow[] {
  const c = new CumulativeDeltas();
  const stored = sent.map((r) => ({ ...r, data: c.store(r.sequence, r.type, r.data) }));
  return stored.sort((a, b) => a.sequence - b.sequence);
}

/**
 * What a reader gets from `after` on, `limit` rows a page, as the repository reads (answerPage);
 * with `tips`, each page seeded by the previous one's chain tip (ChainTips), as a following reader.
 */
async function read(
  stored: readonly StoredRow[],
  after: number,
  limit: number,
  tips: ChainTips | null = null,
): Promise<StoredRow[]> {
  const out: StoredRow[] = [];
  let cursor = after;
  for (;;) {
    const page = stored.filter((r) => r.sequence > cursor).slice(0, limit);
    if (page.length === 0) {
      return out;
    }
    const answered = await answerPage(
      page,
      (from, count) => Promise.resolve(stored.filter((r) => r.sequence >= from).slice(0, count)),
      tips?.get('r') ?? null,
    );
    tips?.set('r', answered.tip);
    page.forEach((r, i) => out.push({ ...r, data: answered.data[i] ?? r.data }));
    cursor = page[page.length - 1].sequence;
  }
}

const sentIn = (sent: readonly StoredRow[]) => [...sent].sort((a, b) => a.sequence - b.sequence);
const storedChars = (rows: readonly StoredRow[]) => rows.reduce((n, r) => n + JSON.stringify(r.data).length, 0);

/** A consistent cumulative message of `n` deltas of `size` characters, sequences from 1. */
function cumulative(n: number, size: number): StoredRow[] {
  let text = '';
  const rows: StoredRow[] = [];
  for (let i = 0; i < n; i++) {
    const content = String.fromCharCode(97 + (i % 26)).repeat(size);
    text += content;
    rows.push({
      sequence: i + 1,
      type: 'message.delta',
      data: delta({ role: 'assistant', content, all_content: text }),
    });
  }
  return rows;
}

describe('cumulative deltas (docs/durability.md#cumulative-deltas)', () => {
  it('stores a consistent cumulative delta without its all_content, the first of the message whole', () => {
    const stored = ingest(cumulative(3, 2));
    expect(stored[0].data).toEqual(delta({ role: 'assistant', content: 'aa', all_content: 'aa' }));
    expect(stored[1].data).toEqual({ chunk: { role: 'assistant', content: 'bb' }, [CUMULATIVE_MARKER]: [1, 2] });
    expect(stored[2].data).toEqual({ chunk: { role: 'assistant', content: 'cc' }, [CUMULATIVE_MARKER]: [1, 2] });
  });

  it('reads every row as sent, keys in the order sent, from every position', async () => {
    const sent = cumulative(20, 3);
    const stored = ingest(sent);
    for (let after = 0; after <= 20; after++) {
      for (const limit of [1, 3, 100]) {
        const got = await read(stored, after, limit);
        expect(JSON.stringify(got)).toBe(JSON.stringify(sent.slice(after)));
      }
    }
  });

  it('stores whole what it cannot rest on the text before: rewrites, no all_content, after message.completed', () => {
    const c = new CumulativeDeltas();
    const kept = (seq: number, type: string, data: Data) => c.store(seq, type, data) === data;
    expect(kept(1, 'message.delta', delta({ content: 'ab', all_content: 'ab' }))).toBe(true);
    expect(kept(2, 'message.delta', delta({ content: 'c', all_content: 'xyc' }))).toBe(true); // a rewrite
    expect(kept(3, 'message.delta', delta({ content: 'd', all_content: 'xycd' }))).toBe(false);
    expect(kept(4, 'message.delta', delta({ content: 'e' }))).toBe(true); // no all_content: the chain ends
    expect(kept(5, 'message.delta', delta({ content: 'f', all_content: 'xycdef' }))).toBe(true);
    expect(kept(6, 'tool.call.started', { tool_call_id: 't', name: 'n' })).toBe(true);
    expect(kept(7, 'message.delta', delta({ content: 'g', all_content: 'xycdefg' }))).toBe(false); // other results continue it
    expect(kept(8, 'message.completed', { message: { role: 'assistant', content: 'xycdefg' } })).toBe(true);
    expect(kept(9, 'message.delta', delta({ content: 'h', all_content: 'h' }))).toBe(true); // a new message
    expect(kept(10, 'message.delta', delta({ content: ['x'], all_content: 'hx' }))).toBe(true); // content not text
    expect(kept(12, 'message.delta', delta({ content: 'i', all_content: 'hxi' }))).toBe(true); // a gap
    expect(kept(11, 'message.delta', delta({ content: 'j', all_content: 'hxij' }))).toBe(true); // out of order
    expect(kept(13, 'message.delta', delta({ content: 'k', all_content: 'hxijk' }))).toBe(true); // after out of order
    expect(kept(14, 'message.delta', delta({ content: 'l', all_content: 'hxijkl' }))).toBe(false);
  });

  it('keeps a full row at each checkpoint, so stored size grows linearly with the message', () => {
    const linear = (n: number) => n * (3 + 100) + 4 * CHECKPOINT_CHARS;
    for (const n of [1000, 10_000]) {
      // Stored: within a linear bound (each delta's content and a row's overhead, a few checkpoints).
      expect(storedChars(ingest(cumulative(n, 3)))).toBeLessThan(linear(n));
    }
    // The old storage (every all_content whole: 3 + 6 + … + 3n characters of it) is quadratic and exceeds it.
    expect((3 * 10_000 * (10_000 + 1)) / 2).toBeGreaterThan(10 * linear(10_000));
    const large = ingest(cumulative(10_000, 3));
    const full = large.filter((r) => !(CUMULATIVE_MARKER in r.data));
    expect(full.length).toBeGreaterThan(1);
  });

  it('rebuilds rows from before a checkpoint and across pages', async () => {
    const sent = cumulative(700, 200);
    const stored = ingest(sent);
    const full = stored.filter((r) => !(CUMULATIVE_MARKER in r.data)).map((r) => r.sequence);
    expect(full.length).toBeGreaterThan(2);
    const positions = [0, 1, ...full.flatMap((f) => [f - 2, f - 1, f]), 699].filter((p) => p >= 0);
    const text = (r: StoredRow) => (r.data.chunk as Data).all_content;
    for (const after of positions) {
      const got = await read(stored, after, 300);
      const want = sent.slice(after);
      expect(got.length).toBe(want.length);
      expect(
        got.every(
          (r, i) =>
            text(r) === text(want[i]) && Object.keys(r.data.chunk as Data).join() === 'role,content,all_content',
        ),
      ).toBe(true);
    }
  });

  it("a following reader seeded with the previous page's chain tip reads no row before its page", async () => {
    const sent = cumulative(50, 2);
    const stored = ingest(sent);
    const tips = new ChainTips(1 << 20);
    let readsBefore = 0;
    const out: StoredRow[] = [];
    for (let after = 0; after < 50; after += 3) {
      const page = stored.filter((r) => r.sequence > after).slice(0, 3);
      const answered = await answerPage(
        page,
        (from, count) => {
          readsBefore++;
          return Promise.resolve(stored.filter((r) => r.sequence >= from).slice(0, count));
        },
        tips.get('r'),
      );
      tips.set('r', answered.tip);
      page.forEach((r, i) => out.push({ ...r, data: answered.data[i] ?? r.data }));
    }
    expect(readsBefore).toBe(0);
    expect(JSON.stringify(out)).toBe(JSON.stringify(sent));
    // A tip is kept within its bound, and a page not right after it reads before itself.
    const small = new ChainTips(8 * 10);
    small.set('r', { base: 1, tip: 2, text: 'x'.repeat(11) });
    expect(small.size).toBe(0);
    // Each tip counts its objects beside its text: tips of empty texts are bounded too.
    const counted = new ChainTips(8 * 100, 100);
    for (let i = 0; i < 20; i++) {
      counted.set(`r${i}`, { base: 1, tip: 2, text: '' });
    }
    expect(counted.size).toBe(8);
    expect(counted.get('r19')).not.toBeNull();
    expect(counted.get('r11')).toBeNull();
    const page = stored.filter((r) => r.sequence > 20).slice(0, 2);
    await answerPage(
      page,
      (from, count) => {
        readsBefore++;
        return Promise.resolve(stored.filter((r) => r.sequence >= from).slice(0, count));
      },
      { base: 1, tip: 10, text: 'wrong' },
    );
    expect(readsBefore).toBe(1);
  });

  it('never answers a wrong all_content: a marked row whose chain is not all there reads without it', async () => {
    const sent = cumulative(6, 1);
    const stored = ingest(sent).filter((r) => r.sequence !== 3); // a row that failed to persist
    const got = await read(stored, 0, 100);
    expect(got.map((r) => (r.data.chunk as Data).all_content)).toEqual(['a', 'ab', undefined, undefined, undefined]);
    for (let after = 0; after < 6; after++) {
      const from = await read(stored, after, 2); // the rows before a page are read past the missing one
      expect(from.map((r) => (r.data.chunk as Data).all_content)).toEqual(
        ['a', 'ab', undefined, undefined, undefined].slice(after >= 3 ? after - 1 : after),
      );
    }
    const noBase = ingest(sent).filter((r) => r.sequence !== 1); // retention took the full row
    expect((await read(noBase, 0, 100)).every((r) => !('all_content' in (r.data.chunk as Data)))).toBe(true);
    expect((await read(noBase, 0, 100)).every((r) => !(CUMULATIVE_MARKER in r.data))).toBe(true);
  });

  it('after a failed write, later deltas do not rest on the chain', () => {
    const c = new CumulativeDeltas();
    const [a, b] = cumulative(2, 1);
    c.store(1, a.type, a.data);
    c.broken();
    expect(c.store(2, b.type, b.data)).toBe(b.data);
  });

  it('property: for random results, every row reads as sent, from every position and page size', async () => {
    const step = fc.oneof(
      fc.record({ kind: fc.constant('append' as const), text: fc.string({ maxLength: 5 }) }),
      fc.record({ kind: fc.constant('rewrite' as const), text: fc.string({ maxLength: 5 }) }),
      fc.record({ kind: fc.constant('plain' as const), text: fc.string({ maxLength: 5 }) }),
      fc.record({ kind: fc.constant('nocontent' as const), text: fc.constant('') }),
      fc.record({ kind: fc.constant('completed' as const), text: fc.constant('') }),
      fc.record({ kind: fc.constant('other' as const), text: fc.constant('') }),
    );
    const order = fc.oneof(
      { weight: 8, arbitrary: fc.constant(0) },
      { weight: 1, arbitrary: fc.integer({ min: -3, max: 3 }) },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(step, order), { maxLength: 40 }),
        fc.integer({ min: 1, max: 6 }),
        async (steps, limit) => {
          let text = '';
          let last = 0;
          const used = new Set<number>();
          const sent: StoredRow[] = [];
          for (const [s, shift] of steps) {
            let sequence = Math.max(1, last + 1 + shift);
            if (used.has(sequence)) {
              sequence = last + 1; // the sequence rules drop duplicates: take the next one
            }
            if (used.has(sequence)) {
              continue;
            }
            used.add(sequence);
            last = Math.max(last, sequence);
            let data: Data;
            let type = 'message.delta';
            switch (s.kind) {
              case 'append':
                text += s.text;
                data = delta({ role: 'assistant', content: s.text, all_content: text, msg_sequence: 1 });
                break;
              case 'rewrite':
                text = `${s.text}!`;
                data = delta({ content: s.text, all_content: text });
                break;
              case 'plain':
                text += s.text;
                data = delta({ content: s.text });
                break;
              case 'nocontent':
                data = delta({ role: 'assistant', all_content: text });
                break;
              case 'completed':
                type = 'message.completed';
                data = { message: { role: 'assistant', content: text } };
                text = '';
                break;
              case 'other':
                type = 'state.updated';
                data = { key: 'k', value: 1 };
            }
            sent.push({ sequence, type, data });
          }
          const stored = ingest(sent);
          const want = sentIn(sent);
          for (let i = 0; i <= want.length; i++) {
            const after = i === 0 ? 0 : want[i - 1].sequence;
            const got = await read(stored, after, limit);
            expect(JSON.stringify(got)).toBe(JSON.stringify(want.slice(i)));
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
