import { VerifiedKeys } from './verified-keys';

describe('VerifiedKeys (docs/security.md#credential-caches)', () => {
  const secret = (i: number) => `rhk_${String(i).padStart(43, '0')}`;

  it('answers a remembered secret until its time is up, and nothing else', () => {
    const keys = new VerifiedKeys<string>(8, 1000);
    keys.remember(secret(1), 'k1', 'p1', keys.generation, 0);
    expect(keys.get(secret(1), 999)).toBe('p1');
    expect(keys.get(secret(2), 999)).toBeUndefined();
    expect(keys.get(`${secret(1)}x`, 999)).toBeUndefined();
    expect(keys.get(secret(1).slice(0, -1), 999)).toBeUndefined();
    expect(keys.get(secret(1), 1000)).toBeUndefined();
    expect(keys.size).toBe(0); // the expired entry went
  });

  it('answers only the very secret it holds: a one-character change anywhere is refused', () => {
    const keys = new VerifiedKeys<string>(8, 1000, 7);
    keys.remember(secret(5), 'k5', 'p5', keys.generation, 0);
    for (let i = 0; i < secret(5).length; i++) {
      const other = secret(5).slice(0, i) + (secret(5)[i] === 'a' ? 'b' : 'a') + secret(5).slice(i + 1);
      expect(keys.get(other, 1)).toBeUndefined();
    }
    expect(keys.get(secret(5), 1)).toBe('p5');
  });

  it('holds at most its capacity, the longest held out first (verified again: to the back)', () => {
    const keys = new VerifiedKeys<number>(3, 10_000);
    for (let i = 0; i < 3; i++) {
      keys.remember(secret(i), `k${i}`, i, keys.generation, 0);
    }
    keys.remember(secret(0), 'k0', 0, keys.generation, 1); // 0 verified again: 1 is now the oldest
    keys.remember(secret(3), 'k3', 3, keys.generation, 1);
    expect(keys.size).toBe(3);
    expect(keys.get(secret(1), 2)).toBeUndefined();
    expect([0, 2, 3].map((i) => keys.get(secret(i), 2))).toEqual([0, 2, 3]);
    for (let i = 10; i < 1000; i++) {
      keys.remember(secret(i), `k${i}`, i, keys.generation, 3);
      expect(keys.size).toBeLessThanOrEqual(3);
    }
  });

  it('forgets a key at once, and a lookup that started before may not remember it', () => {
    const keys = new VerifiedKeys<string>(8, 10_000);
    keys.remember(secret(1), 'k1', 'p1', keys.generation, 0);
    keys.remember(secret(2), 'k2', 'p2', keys.generation, 0);
    const before = keys.generation;
    keys.forgetKey('k1');
    expect(keys.get(secret(1), 1)).toBeUndefined();
    expect(keys.get(secret(2), 1)).toBe('p2');
    keys.remember(secret(1), 'k1', 'p1', before, 1); // read before the revocation: ignored
    expect(keys.get(secret(1), 2)).toBeUndefined();
    keys.remember(secret(1), 'k1', 'p1', keys.generation, 2);
    expect(keys.get(secret(1), 3)).toBe('p1');
  });

  it('refuses a capacity that is not a positive integer', () => {
    expect(() => new VerifiedKeys(0, 1)).toThrow('capacity');
    expect(() => new VerifiedKeys(1.5, 1)).toThrow('capacity');
  });
});
