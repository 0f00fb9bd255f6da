import fc from 'fast-check';
import { wholeTextParagraphs, wholeTextSplit } from './whole-text.oracle';
import {
  EMPTY_GROWING_SPLIT,
  EMPTY_SCAN,
  NO_FENCE,
  advanceFence,
  completedParagraphs,
  finishSplit,
  growSplit,
  graphemeEnds,
  measure,
  scanFrom,
  scanParagraphs,
  scannedParagraphs,
  splitSpans,
  splitText,
  type SizeUnit,
} from './split';

const graphemes = (s: string) =>
  [...new Intl.Segmenter(undefined, { granularity: 'grapheme' }).segment(s)].map((g) => g.index);
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Text the splitter meets: words, punctuation, paragraphs, code fences, emoji (ZWJ, flags), CJK, combining marks. */
const piece = fc.constantFrom(
  'word ',
  'Hello, world. ',
  'Why? ',
  'a',
  ' ',
  '\n',
  '\n\n',
  '```ts\nconst x = 1;\n```\n',
  '👍',
  '👩‍👩‍👧‍👦',
  '🇩🇪',
  'é',
  'e\u0301',
  '你好。',
  'ß',
  'x'.repeat(37),
);
const text = fc.array(fc.oneof(piece, fc.string({ unit: 'grapheme' })), { maxLength: 120 }).map((a) => a.join(''));

describe('splitText (properties)', () => {
  for (const unit of ['chars', 'bytes'] as SizeUnit[]) {
    it(`${unit}: parts join to the input, each within the limit, no lone surrogate, grapheme ends`, () => {
      fc.assert(
        fc.property(text, fc.integer({ min: unit === 'chars' ? 2 : 4, max: 120 }), (t, limit) => {
          const spans = splitSpans(t, limit, unit);
          const parts = splitText(t, limit, unit);
          expect(parts).toEqual(spans.map((s) => t.slice(s.start, s.end)));
          const starts = new Set(graphemes(t));
          let at = 0;
          for (const [i, { start, end }] of spans.entries()) {
            const p = t.slice(start, end);
            // No part is whitespace only (docs/delivery.md#splitting).
            expect(p).toMatch(/\S/);
            // What lies between parts is dropped whitespace, only where no part could carry it:
            // whitespace that does not fit in one part with the next grapheme.
            const gap = t.slice(at, start);
            expect(gap).toMatch(/^\s*$/);
            if (gap !== '') {
              const next = [...starts].find((s) => s > start) ?? t.length;
              expect(measure(t.slice(at, next), unit)).toBeGreaterThan(limit);
            }
            expect(measure(p, unit)).toBeLessThanOrEqual(limit);
            expect(loneSurrogate.test(p)).toBe(false);
            at = end;
            // A part ends at a grapheme boundary unless one grapheme alone is larger than the limit.
            if (at < t.length && !starts.has(at)) {
              const g = [...starts].filter((s) => s < at).pop()!;
              const next = [...starts].find((s) => s > at) ?? t.length;
              expect(measure(t.slice(g, next), unit)).toBeGreaterThan(limit);
            }
            if (i === spans.length - 1 && at < t.length) {
              // Trailing whitespace is dropped only when the last part has no room for it.
              expect(t.slice(at)).toMatch(/^\s+$/);
              expect(measure(t.slice(start), unit)).toBeGreaterThan(limit);
            }
          }
          if (!/\S/.test(t)) {
            expect(parts).toEqual([]);
          } else if (!/\s/.test(t)) {
            expect(parts.join('')).toBe(t);
          }
        }),
        { numRuns: 400 },
      );
    });
  }

  it('no part is whitespace only; the whitespace is carried by a neighbouring part where it fits', () => {
    // Leading whitespace joins the next part, trailing whitespace the previous one.
    expect(splitText('\n\nHello world', 8)).toEqual(['\n\nHello ', 'world']);
    expect(splitText('Hello world\n\n', 8)).toEqual(['Hello ', 'world\n\n']);
    expect(splitText('x'.repeat(8) + '\n\n' + 'y', 8)).toEqual(['x'.repeat(8), '\n\ny']);
    // Before: ['x'.repeat(8), '\n\n'] — a whitespace-only message.
    expect(splitText('x'.repeat(8) + '\n\n', 8)).toEqual(['x'.repeat(8)]);
    // Before: ['abc' + 5 spaces, 8 spaces, 8 spaces, '  d'].
    expect(splitText('abc' + ' '.repeat(23) + 'd', 8)).toEqual(['abc' + ' '.repeat(5), 'd']);
    expect(splitText(' \n\t ', 2)).toEqual([]);
    expect(splitText('   ', null)).toEqual([]);
    expect(splitText('', 8)).toEqual([]);
  });
});

describe('splitText (boundaries)', () => {
  it.each([
    ['within the limit: one part', 'short text', 100, ['short text']],
    ['empty: no parts', '', 10, []],
    ['no limit: one part', 'x'.repeat(10_000), null, ['x'.repeat(10_000)]],
    [
      'a paragraph beats a later sentence',
      'First para.\n\nSecond one. Third',
      24,
      ['First para.\n\n', 'Second one. Third'],
    ],
    ['a sentence beats a later word', 'One two three. Four five six', 20, ['One two three. ', 'Four five six']],
    ['a word when nothing better', 'alpha beta gamma delta', 12, ['alpha beta ', 'gamma delta']],
    ['hard cut in an unbroken run', 'abcdefghij', 4, ['abcd', 'efgh', 'ij']],
    ['CJK sentence end', '你好。世界很大', 4, ['你好。', '世界很大']],
  ] as [string, string, number | null, string[]][])('%s', (_name, input, limit, expected) => {
    expect(splitText(input, limit)).toEqual(expected);
  });

  it('splits before a code fence rather than inside it, and inside one only at a line end', () => {
    const code = '```\nline one of code\nline two of code\n```\n';
    const t = `Intro text here.\n${code}After.`;
    const parts = splitText(t, 40);
    expect(parts.join('')).toBe(t);
    expect(parts[0]).toBe('Intro text here.\n');
    for (const p of parts.slice(1, -1)) {
      expect(p.endsWith('\n')).toBe(true);
    }
  });

  it('never splits a surrogate pair or a ZWJ emoji that fits', () => {
    const family = '👩‍👩‍👧‍👦';
    const parts = splitText(`ab${family}cd`, family.length + 1);
    expect(parts.join('')).toBe(`ab${family}cd`);
    expect(parts.filter((p) => p.includes(family))).toHaveLength(1);
  });

  it('counts UTF-8 bytes for byte-limited surfaces', () => {
    const parts = splitText('你好你好你好', 7, 'bytes');
    expect(parts).toEqual(['你好', '你好', '你好']);
  });
});

describe('completedParagraphs', () => {
  it.each([
    ['no paragraph yet', 'one line', 0],
    ['a paragraph followed by text', 'one\n\ntwo', 5],
    ['a paragraph not yet followed by text', 'one\n\n', 0],
    ['the blank line inside a fence is no boundary', '```\na\n\nb', 0],
    ['after a closed fence', '```\na\n```\n\nnext', 11],
  ])('%s', (_name, t, end) => {
    expect(completedParagraphs(t)).toBe(end);
  });
});

describe('graphemeEnds', () => {
  it('equals Intl.Segmenter on any text (the ASCII fast path and the chunking change nothing)', () => {
    const reference = (t: string) =>
      graphemes(t)
        .slice(1)
        .concat(t.length > 0 ? [t.length] : []);
    fc.assert(
      fc.property(
        fc.oneof(text, fc.string({ unit: 'grapheme', maxLength: 600 }), fc.string({ maxLength: 300 })),
        (t) => {
          expect(graphemeEnds(t)).toEqual(reference(t));
        },
      ),
      { numRuns: 400 },
    );
    const long = 'a\r\nb e\u0301 👩‍👩‍👧‍👦 你好'.repeat(200);
    expect(graphemeEnds(long)).toEqual(reference(long));
  });
});

/** Text dense in what the paragraph scan decides on: blank lines, fences (indented, ~~~, short), whitespace. */
const paragraphPiece = fc.constantFrom(
  '\n',
  '\n\n',
  ' \n',
  '\t',
  '   ```',
  '```',
  '``',
  '`',
  '~~~',
  '    ```',
  'code',
  'x',
  ' ',
  '\u00a0',
  '\r\n',
  'Para. ',
);
const paragraphText = fc
  .array(fc.oneof(paragraphPiece, paragraphPiece, fc.string({ maxLength: 4 })), { maxLength: 60 })
  .map((a) => a.join(''));

/** `t` cut at random points into consecutive chunks (empty ones included). */
const chunkings = (t: string) =>
  fc
    .array(fc.nat({ max: t.length }), { maxLength: 16 })
    .map((cuts) => [0, ...cuts.sort((a, b) => a - b), t.length])
    .map((at) => at.slice(1).map((end, i) => t.slice(at[i], end)));

describe('scanParagraphs (incremental) equals the whole-text scan', () => {
  it('after every chunk of any chunking of any text', () => {
    fc.assert(
      fc.property(
        fc.oneof(paragraphText, text).chain((t) => fc.tuple(fc.constant(t), chunkings(t))),
        ([t, chunks]) => {
          expect(chunks.join('')).toBe(t);
          let scan = EMPTY_SCAN;
          let fed = '';
          for (const c of chunks) {
            scan = scanParagraphs(scan, c);
            fed += c;
            expect(scannedParagraphs(scan)).toBe(wholeTextParagraphs(fed));
          }
          expect(completedParagraphs(t)).toBe(wholeTextParagraphs(t));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('one character at a time, on fences and blank lines', () => {
    fc.assert(
      fc.property(paragraphText, (t) => {
        let scan = EMPTY_SCAN;
        for (let i = 0; i < t.length; i++) {
          scan = scanParagraphs(scan, t[i]);
          expect(scannedParagraphs(scan)).toBe(wholeTextParagraphs(t.slice(0, i + 1)));
        }
      }),
      { numRuns: 500 },
    );
  });

  it('keeps a constant-size state however long the text', () => {
    let scan = EMPTY_SCAN;
    const delta = 'word '.repeat(1638);
    for (let i = 0; i < 2000; i++) {
      scan = scanParagraphs(scan, delta);
    }
    expect(scan.length).toBe(2000 * delta.length);
    expect(scan.head.length).toBeLessThanOrEqual(6);
    expect(scannedParagraphs(scanParagraphs(scan, '\n\nnext'))).toBe(scan.length + 2);
  });
});

describe('splitText window by window equals the whole-text splitter', () => {
  const zalgo = fc.integer({ min: 1, max: 90 }).map((n) => 'e' + '\u0301'.repeat(n));
  const long = fc
    .array(fc.oneof(piece, piece, paragraphPiece, zalgo, fc.string({ unit: 'grapheme', maxLength: 8 })), {
      maxLength: 300,
    })
    .map((a) => a.join(''));
  for (const unit of ['chars', 'bytes'] as SizeUnit[]) {
    it(`${unit}: the same parts for any text and limit`, () => {
      fc.assert(
        fc.property(long, fc.integer({ min: unit === 'chars' ? 2 : 4, max: 200 }), (t, limit) => {
          expect(splitText(t, limit, unit)).toEqual(wholeTextSplit(t, limit, unit));
        }),
        { numRuns: 600 },
      );
    });
  }
});

describe('growSplit (split as the text grows) equals splitText of the whole text', () => {
  const noFence = fc
    .array(
      fc.oneof(
        piece.filter((p) => !p.includes('```')),
        paragraphPiece.filter((p) => !p.includes('```') && !p.includes('~~~')),
        fc.integer({ min: 1, max: 90 }).map((n) => 'e' + '\u0301'.repeat(n)),
        fc.string({ unit: 'grapheme', maxLength: 8 }),
      ),
      { maxLength: 300 },
    )
    .map((a) => a.join(''));
  for (const unit of ['chars', 'bytes'] as SizeUnit[]) {
    it(`${unit}: any text, chunking and limit — with or without a fence (then the whole text is split at the end)`, () => {
      fc.assert(
        fc.property(
          fc.oneof(noFence, noFence, text).chain((t) => fc.tuple(fc.constant(t), chunkings(t))),
          fc.integer({ min: unit === 'chars' ? 2 : 4, max: 200 }),
          ([t, chunks], limit) => {
            let s = EMPTY_GROWING_SPLIT;
            for (const c of chunks) {
              const before = s;
              const frozen = JSON.stringify(before);
              s = growSplit(s, c, limit, unit);
              expect(JSON.stringify(before)).toBe(frozen); // a state is never changed by a later one
            }
            const whole = splitText(t, limit, unit);
            expect(finishSplit(s, limit, unit) ?? whole).toEqual(whole);
            if (/```|~~~/.test(t)) {
              expect(finishSplit(s, limit, unit)).toBeNull();
            }
          },
        ),
        { numRuns: 800 },
      );
    });
  }

  it('cuts a long answer as it grows, keeping a bounded buffer', () => {
    let s = EMPTY_GROWING_SPLIT;
    const delta = 'word '.repeat(1638);
    for (let i = 0; i < 200; i++) {
      s = growSplit(s, delta, 2000, 'chars');
      expect(s.buf.length).toBeLessThan(2 * 2064 + delta.length);
    }
    expect(s.cut).toBeGreaterThan(200 * delta.length - 2 * 2064);
    expect(finishSplit(s, 2000, 'chars')).toEqual(splitText(delta.repeat(200), 2000, 'chars'));
  });

  it('refuses a bad limit as splitText does', () => {
    expect(() => growSplit(EMPTY_GROWING_SPLIT, 'abc', 1, 'chars')).toThrow('limit: must be an integer ≥ 2 chars');
  });
});

describe('the rest of an answer after a sent part: its fence state carried (FenceContext)', () => {
  const answer = fc.oneof(paragraphText, text);
  /** An answer, where a part of it ends (anywhere, even inside a line or a fence marker), a chunking of the rest. */
  const cutAnswer = answer.chain((t) =>
    fc
      .tuple(fc.constant(t), fc.nat({ max: t.length }))
      .chain(([t, k]) => fc.tuple(fc.constant(t), fc.constant(k), chunkings(t.slice(k)))),
  );

  it('advanceFence over any chunking equals advanceFence over the whole text', () => {
    fc.assert(
      fc.property(cutAnswer, ([t, k, chunks]) => {
        const ctx = advanceFence(NO_FENCE, t.slice(0, k));
        expect(chunks.reduce(advanceFence, ctx)).toEqual(advanceFence(NO_FENCE, t));
        expect(ctx.head.length).toBeLessThanOrEqual(6);
      }),
      { numRuns: 1000 },
    );
  });

  it('scanParagraphs from the context equals the whole-text scan of the rest, the fences being the whole answer’s', () => {
    fc.assert(
      fc.property(cutAnswer, ([t, k, chunks]) => {
        let scan = scanFrom(advanceFence(NO_FENCE, t.slice(0, k)));
        let fed = t.slice(0, k);
        for (const c of chunks) {
          scan = scanParagraphs(scan, c);
          fed += c;
          expect(scannedParagraphs(scan)).toBe(wholeTextParagraphs(fed, k));
        }
      }),
      { numRuns: 2000 },
    );
  });

  for (const unit of ['chars', 'bytes'] as SizeUnit[]) {
    it(`${unit}: splitText from the context equals the whole-text splitter given the text before`, () => {
      fc.assert(
        fc.property(
          fc.oneof(paragraphText, text).chain((t) => fc.tuple(fc.constant(t), fc.nat({ max: t.length }))),
          fc.integer({ min: unit === 'chars' ? 2 : 4, max: 60 }),
          ([t, k], limit) => {
            const rest = t.slice(k);
            const ctx = advanceFence(NO_FENCE, t.slice(0, k));
            expect(splitText(rest, limit, unit, ctx)).toEqual(wholeTextSplit(rest, limit, unit, t.slice(0, k)));
          },
        ),
        { numRuns: 800 },
      );
    });
  }

  it('a fence opened before the rest: its blank lines are no paragraph, its closing line closes it', () => {
    const ctx = advanceFence(NO_FENCE, '```ts\nconst a = 1;');
    expect(ctx).toEqual({ open: true, head: 'const ' });
    expect(scannedParagraphs(scanParagraphs(scanFrom(ctx), '\n\nconst b = 2;'))).toBe(0);
    expect(scannedParagraphs(scanParagraphs(scanFrom(ctx), '\n```\n\nprose'))).toBe(6);
    // The same text with no fence before it: the blank line is a paragraph break, the ``` line an opener.
    expect(scannedParagraphs(scanParagraphs(EMPTY_SCAN, '\n\nconst b = 2;'))).toBe(2);
    expect(scannedParagraphs(scanParagraphs(EMPTY_SCAN, '\n```\n\nprose'))).toBe(0);
  });

  it('a line begun before the rest keeps its fence status, even a marker cut in two', () => {
    expect(advanceFence(NO_FENCE, '  `')).toEqual({ open: false, head: '  `' });
    expect(advanceFence(advanceFence(NO_FENCE, '  `'), '``x\n')).toEqual({ open: true, head: '' });
    // Four spaces before the marker: no fence, however the line is cut.
    expect(advanceFence(advanceFence(NO_FENCE, '  '), '  ```\n')).toEqual(NO_FENCE);
    expect(splitText('``x\n\nab cd ef\n', 6, 'chars', advanceFence(NO_FENCE, '  `'))).toEqual([
      '``x\n\n',
      'ab cd ',
      'ef\n',
    ]);
  });
});
