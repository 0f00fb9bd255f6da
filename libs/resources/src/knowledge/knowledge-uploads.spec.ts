import { KB_BATCH, nextBatch } from './knowledge-uploads';

const chunk = (position: number, chars: number) => ({ position, content: 'x'.repeat(chars), metadata: {} });

describe('nextBatch', () => {
  it('takes at most KB_BATCH.rows chunks, and only as many as the iterator has', () => {
    const it = Array.from({ length: KB_BATCH.rows + 5 }, (_, i) => chunk(i, 10))[Symbol.iterator]();
    expect(nextBatch(it).map((c) => c.position)).toEqual([...Array(KB_BATCH.rows).keys()]);
    expect(nextBatch(it).map((c) => c.position)).toEqual([0, 1, 2, 3, 4].map((i) => KB_BATCH.rows + i));
    expect(nextBatch(it)).toEqual([]);
  });

  it('closes a batch at the chunk that reaches KB_BATCH.chars of text', () => {
    const size = 10_000;
    const it = Array.from({ length: 10 }, (_, i) => chunk(i, size))[Symbol.iterator]();
    const perBatch = Math.ceil(KB_BATCH.chars / size);
    expect(nextBatch(it)).toHaveLength(perBatch);
    expect(nextBatch(it)).toHaveLength(perBatch);
    // A chunk larger than the limit is a batch of its own.
    const big = [chunk(0, KB_BATCH.chars + 1), chunk(1, 1)][Symbol.iterator]();
    expect(nextBatch(big).map((c) => c.position)).toEqual([0]);
    expect(nextBatch(big).map((c) => c.position)).toEqual([1]);
  });

  it('pulls no chunk past the batch it answers', () => {
    let pulled = 0;
    const it: Iterator<ReturnType<typeof chunk>> = {
      next: () => (pulled < 1000 ? { done: false, value: chunk(pulled++, 1) } : { done: true, value: undefined }),
    };
    nextBatch(it);
    expect(pulled).toBe(KB_BATCH.rows);
  });
});
