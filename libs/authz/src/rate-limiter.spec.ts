import { TokenBucket } from './rate-limiter';

describe('TokenBucket', () => {
  it('take: refuses past the burst, refills at the rate', () => {
    const b = new TokenBucket(10, 2);
    const t = Date.now();
    expect([b.take(t), b.take(t), b.take(t)]).toEqual([true, true, false]);
    expect(b.take(t + 100)).toBe(true); // one token per 100 ms
    expect(b.take(t + 100)).toBe(false);
  });

  it('reserve: at once within the burst, then paced at the rate in the order asked', () => {
    const b = new TokenBucket(10, 2);
    const t = Date.now();
    expect([b.reserve(t), b.reserve(t), b.reserve(t), b.reserve(t)]).toEqual([0, 0, 100, 200]);
    // take() refuses while reservations are outstanding, and again once they are paid back.
    expect(b.take(t + 150)).toBe(false);
    expect(b.take(t + 300)).toBe(true);
    expect(b.reserve(t + 300)).toBe(100);
  });
});
