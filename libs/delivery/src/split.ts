/**
 * Boundary-aware splitting of long text into parts a platform accepts (SPEC §11). The parts,
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

const FENCE_LINE = /^\s{0,3}(```|~~~)/;
/** A line's fence status is known from its first characters: `\s{0,3}` and three fence characters. */
const FENCE_HEAD = 6;
const VISIBLE = /\S/;

/**
 * Where `completedParagraphs` stands after the text fed so far, kept so that each piece of a
 * streamed text is examined once: complete lines are settled (fence state, paragraph candidates);
 * only the current line's first few characters are kept to decide whether it opens a fence.
 * Immutable: `scanParagraphs` returns a new scan.
 */
export interface ParagraphScan {
  /** Characters fed. */
  readonly length: number;
  /** A fence is open before the current line. */
  readonly open: boolean;
  readonly lineStart: number;
  /** The current line's first characters, until its fence status is decided. */
  readonly head: string;
  /** null while undecided (fewer than FENCE_HEAD characters, no fence start, no line end yet). */
  readonly lineIsFence: boolean | null;
  /** The current line starts after a blank line outside a fence (a paragraph start if not a fence line). */
  readonly candidate: boolean;
  readonly lineVisible: boolean;
  /** The last paragraph start confirmed (0: none). */
  readonly best: number;
  /** A paragraph start whose line is no fence, waiting for visible text after it (-1: none). */
  readonly waiting: number;
  /** The last character fed ('' before any). */
  readonly last: string;
}

export const EMPTY_SCAN: ParagraphScan = {
  length: 0,
  open: false,
  lineStart: 0,
  head: '',
  lineIsFence: null,
  candidate: false,
  lineVisible: false,
  best: 0,
  waiting: -1,
  last: '',
};

type MutableScan = { -readonly [K in keyof ParagraphScan]: ParagraphScan[K] };

/** The current line's fence status is now known. */
function decideLine(s: MutableScan, isFence: boolean): void {
  s.lineIsFence = isFence;
  s.head = '';
  if (s.candidate && !isFence) {
    if (s.lineVisible) {
      s.best = s.lineStart;
    } else {
      s.waiting = s.lineStart;
    }
  }
}

/** Characters of the current line (no line feed). */
function scanLinePiece(s: MutableScan, piece: string): void {
  if (VISIBLE.test(piece)) {
    if (s.waiting >= 0) {
      s.best = s.waiting;
      s.waiting = -1;
    }
    s.lineVisible = true;
  }
  if (s.lineIsFence === null) {
    s.head += piece.slice(0, FENCE_HEAD - s.head.length);
    if (FENCE_LINE.test(s.head)) {
      decideLine(s, true);
    } else if (s.head.length >= FENCE_HEAD) {
      decideLine(s, false);
    }
  }
}

/** `chunk` appended to the scanned text: O(chunk length), whatever was fed before. */
export function scanParagraphs(scan: ParagraphScan, chunk: string): ParagraphScan {
  if (chunk === '') {
    return scan;
  }
  const s: MutableScan = { ...scan };
  let i = 0;
  for (;;) {
    const nl = chunk.indexOf('\n', i);
    const end = nl === -1 ? chunk.length : nl;
    if (end > i) {
      scanLinePiece(s, chunk.slice(i, end));
      s.last = chunk[end - 1];
    }
    if (nl === -1) {
      break;
    }
    // The line ends at s.length + nl: settle it, then start the next one.
    if (s.lineIsFence === null) {
      decideLine(s, FENCE_LINE.test(s.head));
    }
    if (s.lineIsFence) {
      s.open = !s.open;
    }
    const at = s.length + nl;
    const blankBefore = at >= 1 && s.last === '\n' && s.lineStart === at;
    s.lineStart = at + 1;
    s.head = '';
    s.lineIsFence = null;
    s.lineVisible = false;
    s.candidate = blankBefore && !s.open;
    s.last = '\n';
    i = nl + 1;
  }
  s.length += chunk.length;
  return s;
}

/** What `completedParagraphs` answers for the text fed to this scan. */
export function scannedParagraphs(s: ParagraphScan): number {
  // The current line, still undecided, is taken for what it is now: no fence (as the whole-text scan does).
  return s.candidate && s.lineIsFence === null && s.lineVisible ? s.lineStart : s.best;
}

/**
 * The end of the last complete paragraph of `text` outside code fences that is followed by more
 * visible text (0 when none): what a surface without edits can send while the answer streams.
 * A streamed text is scanned piece by piece with `scanParagraphs` instead.
 */
export function completedParagraphs(text: string): number {
  return scannedParagraphs(scanParagraphs(EMPTY_SCAN, text));
}
