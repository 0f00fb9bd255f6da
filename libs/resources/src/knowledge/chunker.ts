/**
 * Splits a document into overlapping chunks of at most `chunk_size` characters.
 *
 * A chunk ends at the last paragraph break of its window, else the last line break, else the
 * last sentence end, else the last space (breaks in the first half of the window are passed over
 * while a later kind exists); only a word longer than the window, or text without spaces, is cut
 * inside. The next chunk starts up to `chunk_overlap` characters earlier, at a word start, and
 * never repeats more than half of the chunk before it. Markdown is first split into sections at
 * its ATX headings (outside code fences): chunks never cross sections, a heading stays with its
 * section, and each chunk knows the heading of its section.
 */

export interface ChunkOptions {
  chunk_size: number;
  chunk_overlap: number;
  markdown: boolean;
}

export interface Chunk {
  content: string;
  /** The heading of the Markdown section the chunk is in (null before the first heading, or for plain text). */
  heading: string | null;
}

interface Section {
  heading: string | null;
  text: string;
  /** The section is its heading line and nothing else. */
  bare: boolean;
}

const HEADING = /^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/;
const FENCE = /^ {0,3}(`{3,}|~{3,})/;

export function chunkDocument(text: string, opts: ChunkOptions): Chunk[] {
  return [...documentChunks(text, opts)];
}

/**
 * The chunks of chunkDocument, one at a time: a caller takes as many as it wants to handle in one
 * turn of the event loop (an upload writes them in batches: docs/models-tools-knowledge.md#uploads-in-batches).
 * Each chunk costs at most O(chunk_size) to produce; Markdown's sections are found as the chunks
 * reach them (one section's lines per step, never the whole document's ahead of the first chunk).
 */
export function* documentChunks(text: string, opts: ChunkOptions): Generator<Chunk, void, undefined> {
  const sections = opts.markdown
    ? markdownSections(text)
    : [{ heading: null, text: text.replace(/\r\n?/g, '\n'), bare: false }];
  for (const s of sections) {
    for (const content of textChunks(s.text, opts.chunk_size, opts.chunk_overlap)) {
      yield { content, heading: s.heading };
    }
  }
}

/**
 * Sections at ATX headings; a heading with no text of its own joins the section after it. Lazy:
 * each section is scanned when it is asked for (and the one after it, to know whether a bare heading
 * joins it), line by line from where the previous one ended; `\r\n` and `\r` end lines as `\n` does
 * and the sections' text has `\n` only.
 */
export function* markdownSections(text: string): Generator<Section, void, undefined> {
  let current: { heading: string | null; lines: string[] } = { heading: null, lines: [] };
  let fence: string | null = null;
  /** The last section closed, held until the next one says whether it joins it (a bare heading). */
  let held: Section | null = null;
  /** The closed `current` (if it has any text) in `held`'s place; what can be yielded now. */
  const close = (): Section | null => {
    const body = current.lines.join('\n');
    if (body.trim() === '') {
      return null;
    }
    const s = { heading: current.heading, text: body, bare: current.lines.slice(1).join('').trim() === '' };
    // "# Guide\n## Install\ntext": the bare "# Guide" goes with the Install section.
    if (held?.bare && held.heading !== null) {
      held = { heading: s.heading, text: `${held.text.trimEnd()}\n${s.text}`, bare: s.bare };
      return null;
    }
    const ready = held;
    held = s;
    return ready;
  };
  const eol = /\r\n?|\n/g;
  let pos = 0;
  for (;;) {
    const m = eol.exec(text);
    const line = text.slice(pos, m ? m.index : text.length);
    const f = FENCE.exec(line);
    if (f) {
      fence = fence === null ? f[1][0] : line.trimStart().startsWith(fence) ? null : fence;
    }
    const h = fence === null && !f ? HEADING.exec(line) : null;
    if (h && h[2].trim() !== '') {
      const ready = close();
      current = { heading: h[2].trim(), lines: [line] };
      if (ready) {
        yield ready;
      }
    } else {
      current.lines.push(line);
    }
    if (!m) {
      break;
    }
    pos = eol.lastIndex;
  }
  const ready = close();
  if (ready) {
    yield ready;
  }
  if (held) {
    yield held;
  }
}

/** Break kinds, best first: [pattern, break at the end of the match (else at its start)]. */
const BREAKS: Array<[RegExp, boolean]> = [
  [/\n[ \t]*\n/g, false],
  [/\n/g, false],
  [/[.!?]["'”’)\]]*(?=\s)|[。！？]/g, true],
];
const SPACE = /\s/;

/** Chunks of one section, trimmed, none empty. */
export function chunkText(text: string, size: number, overlap: number): string[] {
  return [...textChunks(text, size, overlap)];
}

function* textChunks(text: string, size: number, overlap: number): Generator<string, void, undefined> {
  let start = skipSpace(text, 0);
  let prevEnd = start;
  while (start < text.length) {
    const end = text.length - start <= size ? text.length : breakPoint(text, start, size, prevEnd);
    const piece = text.slice(start, end).trim();
    if (piece !== '') {
      yield piece;
    }
    if (end >= text.length || text.slice(end).trim() === '') {
      break;
    }
    const back = Math.min(overlap, Math.floor((end - start) / 2));
    start = overlapStart(text, start, end, back);
    prevEnd = end;
  }
}

/** Where a chunk starting at `start` ends (exclusive); always after `prevEnd`. */
function breakPoint(text: string, start: number, size: number, prevEnd: number): number {
  const hi = start + size;
  const half = Math.max(start + Math.floor(size / 2), prevEnd);
  for (const [re, atEnd] of BREAKS) {
    const p = lastBreak(text, re, half, hi, atEnd);
    if (p > 0) {
      return p;
    }
  }
  // The last space that ends a word, anywhere after the previous chunk's end.
  for (let p = hi; p > prevEnd; p--) {
    if (SPACE.test(text[p]) && !SPACE.test(text[p - 1])) {
      return p;
    }
  }
  // One word longer than the window (or text without spaces): cut, but not inside a surrogate pair.
  return isLowSurrogate(text.charCodeAt(hi)) ? hi - 1 : hi;
}

/** The last break position p with lo < p ≤ hi, or -1. */
function lastBreak(text: string, re: RegExp, lo: number, hi: number, atEnd: boolean): number {
  let best = -1;
  for (const m of text.slice(lo, hi + 1).matchAll(re)) {
    const p = lo + m.index + (atEnd ? m[0].length : 0);
    if (p > lo && p <= hi) {
      best = p;
    }
  }
  return best;
}

/** The first sentence end p with lo ≤ p < hi, or -1. */
function firstBreak(text: string, re: RegExp, lo: number, hi: number): number {
  for (const m of text.slice(lo, hi).matchAll(re)) {
    return lo + m.index + m[0].length;
  }
  return -1;
}

/** Where the next chunk starts: about `back` characters before `end`, at the start of a word. */
function overlapStart(text: string, start: number, end: number, back: number): number {
  let p = end - back;
  if (back === 0) {
    return skipSpace(text, end);
  }
  if (!/\s/.test(text.slice(start, end))) {
    // No spaces to align to (e.g. CJK text): overlap by characters, keeping surrogate pairs whole.
    return isLowSurrogate(text.charCodeAt(p)) ? p + 1 : p;
  }
  // Whole sentences when one starts inside the overlap, else whole words.
  const sentence = firstBreak(text, BREAKS[2][0], p, end);
  if (sentence >= 0 && skipSpace(text, sentence) < end) {
    return skipSpace(text, sentence);
  }
  if (!SPACE.test(text[p]) && p > 0 && !SPACE.test(text[p - 1])) {
    while (p < end && !SPACE.test(text[p])) {
      p++;
    }
  }
  p = skipSpace(text, p);
  return p >= end ? skipSpace(text, end) : p;
}

function skipSpace(text: string, p: number): number {
  while (p < text.length && SPACE.test(text[p])) {
    p++;
  }
  return p;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
