/**
 * Boundary-aware splitting of long text into parts a platform accepts (docs/delivery.md#splitting). The parts,
 * joined, are the input exactly; each measures at most `limit` in the surface's unit (UTF-16 code
 * units, as Telegram/Slack/Discord count, or UTF-8 bytes, as WeCom does); a part never ends inside
 * a surrogate pair or — unless one grapheme alone is larger than the limit — inside a grapheme.
 * Where the window allows, a part ends at a paragraph, then a line, then a sentence, then a word
 * boundary outside code fences; inside a fence only at a line end.
 */
export type SizeUnit = 'chars' | 'bytes';

/** The smallest limit the splitter accepts: any one code point fits. */
export const MIN_LIMIT: Record<SizeUnit, number> = { chars: 2, bytes: 4 };

const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

export function measure(text: string, unit: SizeUnit): number {
  return unit === 'chars' ? text.length : Buffer.byteLength(text, 'utf8');
}

/** Boundary ranks: higher is better. */
const enum Rank {
  Grapheme = 0,
  FenceLine = 1,
  Word = 2,
  Sentence = 3,
  Line = 4,
  Paragraph = 5,
}

/** A boundary earlier than this share of the window is only taken when nothing better lies after it. */
const MIN_FILL = 0.3;

const SENTENCE_END = /[.!?…]["')\]]*$/;
const CJK_SENTENCE_END = /[。！？；]$/;

/**
 * For each line start offset, whether the line is inside a code fence (the fence lines included).
 * A line whose trimmed start is ``` (or ~~~) opens or closes a fence.
 */
function fencedLines(text: string): { starts: number[]; fenced: boolean[]; closes: boolean[] } {
  const starts: number[] = [];
  const fenced: boolean[] = [];
  const closes: boolean[] = [];
  let open = false;
  let at = 0;
  for (;;) {
    starts.push(at);
    const nl = text.indexOf('\n', at);
    const line = text.slice(at, nl === -1 ? text.length : nl);
    const isFence = /^\s{0,3}(```|~~~)/.test(line);
    fenced.push(open || isFence);
    closes.push(isFence && open);
    if (isFence) {
      open = !open;
    }
    if (nl === -1) {
      break;
    }
    at = nl + 1;
  }
  return { starts, fenced, closes };
}

/** The rank of a split before `text[i]` (0 < i < length), given whether it falls in a fence. */
function rankAt(text: string, i: number, inFence: boolean): Rank {
  const prev = text[i - 1];
  if (inFence) {
    return prev === '\n' ? Rank.FenceLine : Rank.Grapheme;
  }
  if (prev === '\n') {
    return text[i - 2] === '\n' ? Rank.Paragraph : Rank.Line;
  }
  if (/\s/.test(prev)) {
    const before = text.slice(Math.max(0, i - 8), i).trimEnd();
    return SENTENCE_END.test(before) ? Rank.Sentence : Rank.Word;
  }
  return CJK_SENTENCE_END.test(prev) ? Rank.Sentence : Rank.Grapheme;
}

/** A grapheme boundary is certain between two ASCII characters other than CR LF (UAX #29 GB3-GB5, GB999). */
function asciiBoundary(text: string, p: number): boolean {
  const a = text.charCodeAt(p - 1);
  const b = text.charCodeAt(p);
  return a < 0x80 && b < 0x80 && !(a === 13 && b === 10);
}

/** Longest run handed to Intl.Segmenter at once: its cost grows faster than linearly with the input. */
const SEGMENT_CHUNK = 256;

/**
 * The end offsets of the graphemes of `text`, in linear time: ASCII runs need no segmenter; the
 * rest is segmented in short chunks, each starting at a known boundary (its last, maybe cut,
 * grapheme is segmented again with the next chunk).
 */
export function graphemeEnds(text: string): number[] {
  const ends: number[] = [];
  let i = 0;
  while (i < text.length) {
    if (i + 1 >= text.length || asciiBoundary(text, i + 1)) {
      ends.push(++i);
      continue;
    }
    let p = i + 1;
    while (p < text.length && p - i < SEGMENT_CHUNK && !asciiBoundary(text, p)) {
      p++;
    }
    const high = text.charCodeAt(p - 1);
    if (p < text.length && high >= 0xd800 && high <= 0xdbff) {
      p++; // never cut a surrogate pair
    }
    const certain = p >= text.length || asciiBoundary(text, p);
    const segs = [...segmenter.segment(text.slice(i, p))];
    const complete = certain || segs.length === 1 ? segs : segs.slice(0, -1);
    for (const g of complete) {
      ends.push(i + g.index + g.segment.length);
    }
    i = ends[ends.length - 1];
  }
  return ends;
}

/** Code-point boundaries of a (too large) grapheme, for the last resort. */
function codePointEnds(g: string, from: number): number[] {
  const ends: number[] = [];
  let at = from;
  for (const cp of g) {
    at += cp.length;
    ends.push(at);
  }
  return ends;
}

/**
 * Splits `text` into parts of at most `limit` (in `unit`); `null` or a text within the limit is
 * one part. An empty text has no parts.
 */
export function splitText(text: string, limit: number | null, unit: SizeUnit = 'chars'): string[] {
  if (text === '') {
    return [];
  }
  if (limit === null || measure(text, unit) <= limit) {
    return [text];
  }
  if (!Number.isInteger(limit) || limit < MIN_LIMIT[unit]) {
    throw new RangeError(`limit: must be an integer ≥ ${MIN_LIMIT[unit]} ${unit}`);
  }
  // Grapheme ends, with code-point ends inside any grapheme larger than the limit.
  const ends: number[] = [];
  const sizes: number[] = [];
  let prevEnd = 0;
  for (const end of graphemeEnds(text)) {
    const size = measure(text.slice(prevEnd, end), unit);
    if (size > limit) {
      let last = prevEnd;
      for (const e of codePointEnds(text.slice(prevEnd, end), prevEnd)) {
        ends.push(e);
        sizes.push(measure(text.slice(last, e), unit));
        last = e;
      }
    } else {
      ends.push(end);
      sizes.push(size);
    }
    prevEnd = end;
  }
  const { starts, fenced, closes } = fencedLines(text);
  const fenceAt = (pos: number): boolean => {
    // The line containing pos (binary search over line starts).
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= pos) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    // A split at a line start is inside a fence when the line before is (and does not close it).
    if (starts[lo] === pos && lo > 0) {
      return fenced[lo - 1] && !closes[lo - 1];
    }
    return fenced[lo];
  };

  const parts: string[] = [];
  let start = 0;
  let k = 0; // index into ends of the first unit after start
  while (start < text.length) {
    let size = 0;
    let j = k;
    while (j < ends.length && size + sizes[j] <= limit) {
      size += sizes[j];
      j++;
    }
    if (j === ends.length) {
      parts.push(text.slice(start));
      break;
    }
    // Candidate ends are ends[k..j-1]; choose the best-ranked one past MIN_FILL of the window.
    const windowEnd = ends[j - 1];
    const minPos = start + Math.floor((windowEnd - start) * MIN_FILL);
    let best = j - 1;
    let bestRank: Rank | -1 = -1;
    for (let c = j - 1; c >= k; c--) {
      const pos = ends[c];
      const rank = rankAt(text, pos, fenceAt(pos));
      if (pos < minPos) {
        // Early in the window: only the nearest real boundary, and only when none lies later.
        if (bestRank <= Rank.Grapheme && rank > Rank.Grapheme) {
          best = c;
        }
        if (bestRank > Rank.Grapheme || rank > Rank.Grapheme) {
          break;
        }
        continue;
      }
      if (rank > bestRank) {
        best = c;
        bestRank = rank;
        if (rank === Rank.Paragraph) {
          break;
        }
      }
    }
    parts.push(text.slice(start, ends[best]));
    start = ends[best];
    k = best + 1;
  }
  return parts;
}

/** True when the text has something to show (not only whitespace). */
export function visible(text: string): boolean {
  return /\S/.test(text);
}

/**
 * The end of the last complete paragraph of `text` outside code fences that is followed by more
 * visible text (0 when none): what a surface without edits can send while the answer streams.
 */
export function completedParagraphs(text: string): number {
  if (!text.includes('\n\n')) {
    return 0; // the common case while a paragraph streams: no line scan per delta
  }
  const { starts, fenced } = fencedLines(text);
  for (let li = starts.length - 1; li > 0; li--) {
    const at = starts[li];
    // A blank line before this line, neither inside a fence, and visible text from here on.
    if (at >= 2 && text[at - 1] === '\n' && text[at - 2] === '\n' && !fenced[li] && !fenced[li - 1]) {
      if (visible(text.slice(at))) {
        return at;
      }
    }
  }
  return 0;
}
