import { orderedUuid } from './ordered-id';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('orderedUuid', () => {
  it('is a version 7 UUID carrying the time in its first 48 bits', () => {
    const id = orderedUuid(1_764_700_000_123);
    expect(id).toMatch(V7);
    expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(1_764_700_000_123);
  });

  it('sorts ids of later milliseconds after earlier ones, as text', () => {
    const ids = [5, 1, 4, 2, 3].map((d) => orderedUuid(1_764_700_000_000 + d));
    expect([...ids].sort()).toEqual([1, 2, 3, 4, 5].map((d) => ids[[5, 1, 4, 2, 3].indexOf(d)]));
  });

  it('differs between ids of the same millisecond', () => {
    const ids = new Set(Array.from({ length: 1000 }, () => orderedUuid(1_764_700_000_000)));
    expect(ids.size).toBe(1000);
  });

  it('keeps 48 bits of time for times outside them', () => {
    expect(orderedUuid(-5).slice(0, 13)).toBe('00000000-0000');
    expect(orderedUuid(2 ** 60).slice(0, 13)).toBe('ffffffff-ffff');
    expect(orderedUuid(0)).toMatch(V7);
  });
});
