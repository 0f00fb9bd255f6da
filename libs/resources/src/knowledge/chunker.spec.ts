import fc from 'fast-check';
import { chunkDocument, chunkText, markdownSections } from './chunker';

const words = (n: number, prefix = 'w') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
const sentence = (i: number) => `Sentence ${i} is about topic ${i % 5} and nothing else.`;

/** The longest suffix of `a` (at most `max` chars) that `b` starts with. */
function sharedPrefix(a: string, b: string, max: number): string {
  for (let n = Math.min(max, a.length, b.length); n > 0; n--) {
    if (b.startsWith(a.slice(a.length - n))) {
      return a.slice(a.length - n);
    }
  }
  return '';
}

describe('chunkText', () => {
  it('keeps every chunk within the size, on word boundaries, overlapping its predecessor by whole words', () => {
    const source = words(600);
    const chunks = chunkText(source.join(' '), 200, 50);
    const vocabulary = new Set(source);
    expect(chunks.length).toBeGreaterThan(15);
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(200);
      // Every token is a whole source word: nothing was cut inside a word.
      expect(c.split(' ').every((w) => vocabulary.has(w))).toBe(true);
    }
    for (let i = 1; i < chunks.length; i++) {
      const shared = sharedPrefix(chunks[i - 1], chunks[i], 50);
      expect(shared.length).toBeGreaterThan(20);
      expect(vocabulary.has(shared.split(' ')[0])).toBe(true);
    }
    // Nothing lost: every word is in some chunk, in order.
    const covered = new Set(chunks.flatMap((c) => c.split(' ')));
    expect(source.every((w) => covered.has(w))).toBe(true);
  });

  it('shares nothing with overlap 0: the chunks are the text, split', () => {
    const text = words(500).join(' ');
    const chunks = chunkText(text, 150, 0);
    expect(chunks.join(' ')).toBe(text);
    expect(chunks.every((c) => c.length <= 150)).toBe(true);
  });

  it('prefers paragraph breaks, then sentence ends, then spaces', () => {
    const p1 = [0, 1, 2].map(sentence).join(' ');
    const p2 = [3, 4, 5].map(sentence).join(' ');
    const chunks = chunkText(`${p1}\n\n${p2}`, 250, 0);
    expect(chunks).toEqual([p1, p2]);

    const flowing = [...Array(12).keys()].map(sentence).join(' ');
    const bySentence = chunkText(flowing, 200, 0);
    expect(bySentence.length).toBeGreaterThan(2);
    expect(bySentence.every((c) => c.endsWith('else.'))).toBe(true);
    expect(bySentence.join(' ')).toBe(flowing);
  });

  it('overlaps by whole sentences when a sentence starts inside the overlap', () => {
    const chunks = chunkText([0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(sentence).join(' '), 200, 60);
    for (let i = 1; i < chunks.length; i++) {
      expect(chunks[i]).toMatch(/^Sentence \d+ /);
      expect(chunks[i - 1].endsWith(sharedPrefix(chunks[i - 1], chunks[i], 60))).toBe(true);
      expect(sharedPrefix(chunks[i - 1], chunks[i], 60)).toMatch(/^Sentence \d+ .*else\.$/);
    }
  });

  it('cuts inside a word only when the word is longer than a chunk', () => {
    const long = 'x'.repeat(250);
    const chunks = chunkText(`alpha beta ${long} gamma delta`, 100, 20);
    expect(chunks.every((c) => c.length <= 100)).toBe(true);
    expect(chunks[0]).toBe('alpha beta');
    expect(chunks.join('').replace(/\s/g, '')).toContain('x'.repeat(100));
    expect(chunks.at(-1)).toMatch(/gamma delta$/);
  });

  it('splits text without spaces by characters, never inside a surrogate pair', () => {
    const text = '知识库检索测试😀'.repeat(60);
    const chunks = chunkText(text, 100, 20);
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(100);
      expect(c).not.toMatch(/^[\uDC00-\uDFFF]|[\uD800-\uDBFF]$/);
    }
    expect(sharedPrefix(chunks[0], chunks[1], 21).length).toBeGreaterThanOrEqual(19);
    expect(chunks.length).toBeLessThan(Math.ceil(text.length / 80) + 2);
  });

  it('never repeats more than half a chunk, so a large overlap still makes progress', () => {
    const chunks = chunkText(words(2000).join(' '), 100, 50);
    const totalChars = chunks.reduce((n, c) => n + c.length, 0);
    expect(totalChars).toBeLessThan(words(2000).join(' ').length * 2.2);
  });
});

describe('chunkDocument (Markdown)', () => {
  const md = [
    'Preamble before any heading.',
    '',
    '# Guide',
    '## Install',
    'Run the installer.',
    '',
    '```sh',
    '# not a heading, a comment',
    'make install',
    '```',
    '## Usage',
    'Call it with --help.',
    '### Options ###',
    'Every option is optional.',
  ].join('\r\n');

  it('splits at ATX headings outside code fences; a bare heading joins the section after it', () => {
    expect([...markdownSections(md)].map((s) => s.heading)).toEqual([null, 'Install', 'Usage', 'Options']);
  });

  it('keeps each heading with its section and labels the chunks with it', () => {
    const chunks = chunkDocument(md, { chunk_size: 500, chunk_overlap: 50, markdown: true });
    expect(chunks).toEqual([
      { heading: null, content: 'Preamble before any heading.' },
      {
        heading: 'Install',
        content: '# Guide\n## Install\nRun the installer.\n\n```sh\n# not a heading, a comment\nmake install\n```',
      },
      { heading: 'Usage', content: '## Usage\nCall it with --help.' },
      { heading: 'Options', content: '### Options ###\nEvery option is optional.' },
    ]);
  });

  it('never lets a chunk cross a section, and long sections keep their heading on every chunk', () => {
    const long = `# A\n${[0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(sentence).join(' ')}\n# B\nShort.`;
    const chunks = chunkDocument(long, { chunk_size: 150, chunk_overlap: 40, markdown: true });
    expect(chunks.at(-1)).toEqual({ heading: 'B', content: '# B\nShort.' });
    expect(chunks.slice(0, -1).every((c) => c.heading === 'A' && !c.content.includes('# B'))).toBe(true);
    expect(chunks[0].content.startsWith('# A\n')).toBe(true);
  });

  it('treats plain text headings as text', () => {
    expect(chunkDocument('# Title\nbody', { chunk_size: 100, chunk_overlap: 0, markdown: false })).toEqual([
      { heading: null, content: '# Title\nbody' },
    ]);
  });

  it('chunks a 5 MiB document quickly', () => {
    const text = [...Array(40_000).keys()]
      .map(sentence)
      .join(' ')
      .padEnd(5 * 1024 * 1024, ' tail');
    const started = Date.now();
    const chunks = chunkDocument(text, { chunk_size: 1000, chunk_overlap: 150, markdown: true });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(chunks.length).toBeGreaterThan(5000);
    expect(chunks.length).toBeLessThan(8000);
  });
});

/**
 * The round-8 split (docs/benchmarks.md, round 8 wt-know): the whole document into sections before
 * the first chunk. Kept here as the oracle of the lazy one.
 */
function eagerSections(raw: string): { heading: string | null; text: string; bare: boolean }[] {
  const HEADING = /^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/;
  const FENCE = /^ {0,3}(`{3,}|~{3,})/;
  const text = raw.replace(/\r\n?/g, '\n');
  const sections: { heading: string | null; text: string; bare: boolean }[] = [];
  let current: { heading: string | null; lines: string[] } = { heading: null, lines: [] };
  let fence: string | null = null;
  const close = () => {
    const body = current.lines.join('\n');
    if (body.trim() !== '') {
      sections.push({ heading: current.heading, text: body, bare: current.lines.slice(1).join('').trim() === '' });
    }
  };
  for (const line of text.split('\n')) {
    const f = FENCE.exec(line);
    if (f) {
      fence = fence === null ? f[1][0] : line.trimStart().startsWith(fence) ? null : fence;
    }
    const h = fence === null && !f ? HEADING.exec(line) : null;
    if (h && h[2].trim() !== '') {
      close();
      current = { heading: h[2].trim(), lines: [line] };
    } else {
      current.lines.push(line);
    }
  }
  close();
  const merged: typeof sections = [];
  for (const s of sections) {
    const prev = merged.at(-1);
    if (prev?.bare && prev.heading !== null) {
      merged[merged.length - 1] = { heading: s.heading, text: `${prev.text.trimEnd()}\n${s.text}`, bare: s.bare };
    } else {
      merged.push(s);
    }
  }
  return merged;
}

describe('markdownSections: lazy, the same sections as the whole-document split', () => {
  const line = fc.oneof(
    fc.constantFrom(
      '',
      ' ',
      '\t',
      '# A',
      '## B ##',
      '   ### C',
      '#### ',
      '#nospace',
      '####### seven',
      '```',
      '```sh',
      '~~~',
      '    ```',
      '> quote',
      '- item',
      'Some text. More text!',
      '   ',
      '# ',
      '##\tTabbed',
      'x',
    ),
    fc.string({ maxLength: 12 }),
  );
  const eol = fc.constantFrom('\n', '\r\n', '\r', '\n\n');
  const doc = fc.array(fc.tuple(line, eol), { maxLength: 40 }).map((ls) => ls.map(([l, e]) => l + e).join(''));

  it('yields the sections of the eager split, byte for byte, on random Markdown', () => {
    fc.assert(
      fc.property(doc, (md) => {
        expect([...markdownSections(md)]).toEqual(eagerSections(md));
      }),
      { numRuns: 2000 },
    );
  });

  it('gives the same chunks as chunking the eager sections, on random Markdown', () => {
    fc.assert(
      fc.property(doc, fc.integer({ min: 8, max: 60 }), fc.integer({ min: 0, max: 20 }), (md, size, overlap) => {
        const eager = eagerSections(md).flatMap((s) =>
          chunkText(s.text, size, overlap).map((content) => ({ content, heading: s.heading })),
        );
        expect(chunkDocument(md, { chunk_size: size, chunk_overlap: overlap, markdown: true })).toEqual(eager);
      }),
      { numRuns: 1000 },
    );
  });

  it('is a generator: the first section comes before the rest of the document is split', () => {
    const sections = markdownSections(`# One\nshort text\n${'## Two\nmore text\n'.repeat(100_000)}`);
    expect(sections.next()).toEqual({ done: false, value: { heading: 'One', text: '# One\nshort text', bare: false } });
    expect(sections.next().value).toEqual({ heading: 'Two', text: '## Two\nmore text', bare: false });
  });
});
