import type { KnowledgeRepository } from '@libs/persistence';
import { KB_BATCH, KnowledgeUploads, nextBatch } from './knowledge-uploads';

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

describe('KnowledgeUploads at shutdown', () => {
  it('stops a sweep between batches and leaves what is left for the next boot', async () => {
    let purges = 0;
    const repo = {
      abandonStaleUploads: () => Promise.resolve(0),
      // A document with more chunks than the sweep can remove before shutdown: it stays `deleting`.
      // (a turn of its own, as a database read takes: a sweep that never stopped would hold the loop)
      deletingDocuments: async () => {
        await new Promise((r) => setImmediate(r));
        return ['doc-1'];
      },
      purgeDocument: () => {
        purges += 1;
        return Promise.resolve(false);
      },
    };
    const uploads = new KnowledgeUploads(repo as unknown as KnowledgeRepository);
    uploads.onApplicationBootstrap();
    while (purges < 3) {
      await new Promise((r) => setImmediate(r));
    }
    await uploads.onModuleDestroy();
    const after = purges;
    await new Promise((r) => setTimeout(r, 20));
    expect(purges).toBe(after);
  });
});
