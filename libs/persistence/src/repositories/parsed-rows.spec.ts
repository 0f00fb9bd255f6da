import { ParsedRows } from './parsed-rows';

describe('ParsedRows: committed rows parsed once for the readers that read them', () => {
  const parser = () => {
    let calls = 0;
    const parse = (text: string) => () => {
      calls++;
      return JSON.parse(text) as { v: number };
    };
    return { parse, calls: () => calls };
  };

  it('answers the same frozen object for the same key and texts, parsing once', () => {
    const memo = new ParsedRows<{ v: number }>(1000);
    const p = parser();
    const a = memo.get('r1:1', ['{"v":1}', null], p.parse('{"v":1}'));
    const b = memo.get('r1:1', ['{"v":1}', null], p.parse('{"v":1}'));
    expect(b).toBe(a);
    expect(p.calls()).toBe(1);
    expect(Object.isFrozen(a)).toBe(true);
  });

  it('parses anew when the stored texts of a key differ (the database is the truth)', () => {
    const memo = new ParsedRows<{ v: number }>(1000);
    const p = parser();
    const a = memo.get('r1:1', ['{"v":1}', null], p.parse('{"v":1}'));
    const b = memo.get('r1:1', ['{"v":2}', null], p.parse('{"v":2}'));
    expect(b).not.toBe(a);
    expect(b).toEqual({ v: 2 });
    const c = memo.get('r1:1', ['{"v":2}', '{"u":1}'], p.parse('{"v":2}'));
    expect(c).not.toBe(b);
    expect(p.calls()).toBe(3);
    expect(memo.size).toBe(1);
  });

  it('keeps at most its bound of characters, least recently used out first, and never a text over an eighth of it', () => {
    const memo = new ParsedRows<{ v: number }>(80); // each entry: key 3 + text 7 = 10 characters
    const p = parser();
    for (let i = 0; i < 8; i++) {
      memo.get(`k:${i}`, [`{"v":${i}}`], p.parse(`{"v":${i}}`));
    }
    expect(memo.size).toBe(8);
    memo.get('k:0', ['{"v":0}'], p.parse('{"v":0}')); // k:0 used again: k:1 is now the oldest
    memo.get('k:8', ['{"v":8}'], p.parse('{"v":8}'));
    expect(memo.size).toBe(8);
    expect(p.calls()).toBe(9);
    memo.get('k:0', ['{"v":0}'], p.parse('{"v":0}'));
    expect(p.calls()).toBe(9); // still kept
    memo.get('k:1', ['{"v":1}'], p.parse('{"v":1}'));
    expect(p.calls()).toBe(10); // was evicted
    const big = `{"v":${'1'.repeat(20)}}`;
    memo.get('k:big', [big], p.parse(big));
    memo.get('k:big', [big], p.parse(big));
    expect(p.calls()).toBe(12); // too large to keep
  });

  it("counts each entry's objects beside its texts: entries of empty texts are bounded too", () => {
    const memo = new ParsedRows<{ v: number }>(1000, 96); // each entry: key 4 + no text + 96 = 100
    const p = parser();
    for (let i = 0; i < 30; i++) {
      memo.get(`k:${String(i).padStart(2, '0')}`, [''], p.parse('{"v":0}'));
    }
    expect(memo.size).toBe(10);
    memo.get('k:29', [''], p.parse('{"v":0}'));
    expect(p.calls()).toBe(30); // the newest is kept
    memo.get('k:00', [''], p.parse('{"v":0}'));
    expect(p.calls()).toBe(31); // the oldest went
  });
});
