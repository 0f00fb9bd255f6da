import { chunks, driveCount, HUGE_TEXT_CHARS, LruCounts, MAX_PIECE_CHARS, upperEstimate } from './bounded-bpe';
import { encodingFor, TokenCounter } from './tokenizer';

/*
 * The bounded counter: exact where no pre-tokenizer piece is long, at or above the exact count
 * where pieces are cut, the UTF-8 upper bound for huge texts, and a cost that stays linear
 * (a 64k-character unbroken word is counted at all: plain js-tiktoken would take minutes).
 */

const exact = (s: string) => encodingFor('o200k_base').encode(s, [], []).length;

describe('bounded BPE counting', () => {
  const c = new TokenCounter('o200k_base');
  const english =
    'The quick brown fox jumps over the lazy dog; then, some   more words   appear\n\n  in this sentence ' +
    "(with punctuation!) — don't they? https://example.com/a/b?c=d 12345 ";

  it('is exact for text without long pieces, across segment boundaries', () => {
    for (const s of [english, english.repeat(60), '東京タワー、 大阪城。 Ünïcödé — 🦆🦆 ok'.repeat(20)]) {
      expect(c.text(s)).toBe(exact(s));
    }
  });

  it('counts cut pieces at or above the exact count, and close to it', () => {
    const cases = [
      'x'.repeat(2000),
      '中文字符测试'.repeat(100),
      '我们今天去公园散步天气很好阳光明媚'.repeat(40),
      'ab'.repeat(700),
      `${english}${'Supercalifragilistic'.repeat(50)}${english}`,
      '-'.repeat(500),
      '🦆'.repeat(300),
    ];
    for (const s of cases) {
      const bounded = c.text(s);
      const e = exact(s);
      expect({ s: s.slice(0, 20), ok: bounded >= e }).toEqual({ s: s.slice(0, 20), ok: true });
      // At most one extra token per cut.
      expect(bounded - e).toBeLessThanOrEqual(Math.ceil(s.length / MAX_PIECE_CHARS));
    }
  });

  it('counts a 64k-character unbroken word and 20k CJK characters without a space', () => {
    const word = 'x'.repeat(64 * 1024);
    const n = c.text(word);
    expect(n).toBeGreaterThan(0);
    expect(n).toBeLessThanOrEqual(upperEstimate(word));
    const cjk = '中'.repeat(20_000);
    expect(c.text(cjk)).toBeGreaterThanOrEqual(20_000 / 2);
  });

  it('counts a text above HUGE_TEXT_CHARS as its UTF-8 bytes (an upper bound)', () => {
    expect(c.text('x'.repeat(HUGE_TEXT_CHARS + 1))).toBe(HUGE_TEXT_CHARS + 1);
    expect(c.text('中'.repeat(HUGE_TEXT_CHARS + 1))).toBe(3 * (HUGE_TEXT_CHARS + 1));
    expect(upperEstimate('héllo')).toBe(6);
  });

  it('cuts chunks without splitting a surrogate pair', () => {
    const s = `${'a'.repeat(15)}🦆${'b'.repeat(20)}`;
    const parts = [...chunks(s, 16)];
    expect(parts.join('')).toBe(s);
    expect(parts[0]).toBe('a'.repeat(15));
    expect(parts.every((p) => p.length <= 16 && !/[\ud800-\udbff]$/.test(p))).toBe(true);
  });

  it('counts a request asynchronously with the same result, and a message again from the cache', async () => {
    const messages = [
      { role: 'system' as const, content: english.repeat(20) },
      { role: 'user' as const, content: 'y'.repeat(5000) },
    ];
    const sync = new TokenCounter('o200k_base').request(messages, []);
    await expect(c.requestAsync(messages, [])).resolves.toEqual({ tokens: sync, estimated: false });
    await expect(c.requestAsync(messages, [])).resolves.toEqual({ tokens: sync, estimated: false });
  });

  it('answers the upper estimate past the time budget, and never caches it', async () => {
    const messages = [{ role: 'user' as const, content: `${'z'.repeat(30_000)} unique-${Date.now()}` }];
    const upper = c.upper(messages, []);
    const cut = await c.requestAsync(messages, [], { sliceMs: 0, budgetMs: 0 });
    expect(cut).toEqual({ tokens: upper, estimated: true });
    const full = await c.requestAsync(messages, []);
    expect(full.estimated).toBe(false);
    expect(full.tokens).toBeLessThan(upper);
    expect(full.tokens).toBe(new TokenCounter('o200k_base').request(messages, []));
  });

  it('gives the event loop turns while it counts', async () => {
    let turns = 0;
    const timer = setInterval(() => turns++, 0);
    try {
      await c.requestAsync([{ role: 'user', content: `${'q'.repeat(40_000)} ${Math.random()}` }], [], {
        sliceMs: 1,
        budgetMs: 60_000,
      });
    } finally {
      clearInterval(timer);
    }
    expect(turns).toBeGreaterThan(0);
  });

  it('driveCount sums units and closes the generator when the budget runs out', async () => {
    let closed = false;
    function* units() {
      try {
        for (let i = 0; i < 1000; i++) {
          yield 1;
        }
      } finally {
        closed = true;
      }
    }
    await expect(driveCount(units(), () => -1)).resolves.toEqual({ tokens: 1000, estimated: false });
    closed = false;
    await expect(driveCount(units(), () => 7, { sliceMs: 0, budgetMs: 0 })).resolves.toEqual({
      tokens: 7,
      estimated: true,
    });
    expect(closed).toBe(true);
  });

  it('LruCounts keeps the most recently used entries', () => {
    const lru = new LruCounts(2);
    lru.set('a', 1);
    lru.set('b', 2);
    expect(lru.get('a')).toBe(1);
    lru.set('c', 3);
    expect([lru.get('a'), lru.get('b'), lru.get('c'), lru.size]).toEqual([1, undefined, 3, 2]);
  });
});
