import { FirstN } from './compiled-body';

describe('FirstN: the n smallest offered, in order', () => {
  it('keeps what a full sort would put first, for any order of offers', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    for (const [count, n, range] of [
      [0, 3, 10],
      [2, 3, 10],
      [3, 3, 10],
      [500, 10, 20],
      [2_000, 100, 1_000_000],
      [50, 0, 10],
    ]) {
      const items = Array.from({ length: count }, (_, seq) => ({ key: Math.floor(random() * range), seq }));
      const compare = (a: { key: number; seq: number }, b: { key: number; seq: number }) =>
        a.key - b.key || a.seq - b.seq;
      const first = new FirstN(n, compare);
      items.forEach((i) => first.offer(i));
      expect(first.items()).toEqual([...items].sort(compare).slice(0, n));
    }
  });
});
