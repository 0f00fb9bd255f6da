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
const FENCE_LINE = /^\s{0,3}(```|~~~)/;
/** A line's fence status is known from its first characters: `\s{0,3}` and three fence characters. */
const FENCE_HEAD = 6;
const CJK_SENTENCE_END = /[。！？；]$/;

/**
 * The code-fence state where a text starts inside a longer one (docs/delivery.md#splitting): a
 * fence is a property of the whole answer, so a message boundary does not close one. What the
 * text before tells the rest: whether a fence is open before the line the text starts in, and the
 * first characters (at most FENCE_HEAD) that line has before the text's start ('' at a line start).
 */
export interface FenceContext {
  readonly open: boolean;
  readonly head: string;
}

/** The start of an answer: no fence open, at a line start. */
export const NO_FENCE: FenceContext = { open: false, head: '' };

/**
 * The fence state after `text`, which follows a text whose state was `ctx`: O(text) (only line
 * starts are read), for the text of a part just sent.
 */
export function advanceFence(ctx: FenceContext, text: string): FenceContext {
  let { open, head } = ctx;
  let at = 0;
  for (;;) {
    const nl = text.indexOf('\n', at);
    if (nl === -1) {
      if (head.length < FENCE_HEAD) {
        head += text.slice(at, at + FENCE_HEAD - head.length);
      }
      return { open, head };
    }
    if (FENCE_LINE.test(head + text.slice(at, Math.min(nl, at + FENCE_HEAD)))) {
      open = !open;
    }
    head = '';
    at = nl + 1;
  }
}

/**
 * Which lines are inside a code fence (the fence lines included), found line by line as far as
 * asked: a line whose trimmed start is ``` (or ~~~) opens or closes a fence. `ctx`: the state
 * where the text starts (a part of a longer answer).
 */
class FenceIndex {
  private readonly starts: number[] = [];
  private readonly fenced: boolean[] = [];
  private readonly closes: boolean[] = [];
  private open: boolean;
  /** Start of the next line to index; -1 once the last line is indexed. */
  private next = 0;

  constructor(
    private readonly text: string,
    private readonly ctx: FenceContext = NO_FENCE,
  ) {
    this.open = ctx.open;
  }

  /** Whether a split before `text[pos]` falls inside a fence. */
  at(pos: number): boolean {
    while (this.next !== -1 && this.next <= pos) {
      this.indexLine();
    }
    // The line containing pos (binary search over line starts).
    const { starts } = this;
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
      return this.fenced[lo - 1] && !this.closes[lo - 1];
    }
    return this.fenced[lo];
  }

  private indexLine(): void {
    const at = this.next;
    const nl = this.text.indexOf('\n', at);
    const end = nl === -1 ? this.text.length : nl;
    // The first line may have begun before the text (the context's head).
    const head = at === 0 ? this.ctx.head : '';
    const isFence = FENCE_LINE.test(head + this.text.slice(at, Math.min(end, at + FENCE_HEAD)));
    this.starts.push(at);
    this.fenced.push(this.open || isFence);
    this.closes.push(isFence && this.open);
    if (isFence) {
      this.open = !this.open;
    }
    this.next = nl === -1 ? -1 : nl + 1;
  }
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
  const code = prev.charCodeAt(0);
  // ASCII letters, digits and punctuation (the common case) need no regular expression.
  if (code > 0x20 && code < 0x7f) {
    return Rank.Grapheme;
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

/** Units (graphemes, or code points of a grapheme larger than the limit) from a position on. */
interface Units {
  ends: number[];
  sizes: number[];
  /** Per unit: the end of the grapheme larger than the limit it is a code point of, else 0. */
  big: number[];
  /** The units reach the end of the text. */
  complete: boolean;
}

/**
 * The units from `start` until their sizes add up to more than `limit` (or the text ends): only
 * this window is segmented, so a part costs O(limit), not O(text). The window's last grapheme may
 * be cut by the window's end, so it is left out (and the window widened when what is left is
 * not enough). Inside a grapheme larger than the limit (`bigEnd`, a split left off within it)
 * units are code points.
 */
function unitsFrom(text: string, start: number, limit: number, unit: SizeUnit, bigEnd: number): Units {
  for (let width = limit + 64; ; width *= 2) {
    let end = Math.min(text.length, start + width);
    const high = text.charCodeAt(end - 1);
    if (end < text.length && high >= 0xd800 && high <= 0xdbff) {
      end++; // never cut a surrogate pair
    }
    const complete = end === text.length;
    const ends: number[] = [];
    const sizes: number[] = [];
    const big: number[] = [];
    let total = 0;
    let prevEnd = start;
    const push = (e: number, inBig: number) => {
      // One ASCII character measures 1 in both units: no slice for the common case.
      const size = e === prevEnd + 1 && text.charCodeAt(prevEnd) < 0x80 ? 1 : measure(text.slice(prevEnd, e), unit);
      ends.push(e);
      sizes.push(size);
      big.push(inBig);
      total += size;
      prevEnd = e;
    };
    if (bigEnd > start) {
      for (const e of codePointEnds(text.slice(start, Math.min(bigEnd, end)), start)) {
        push(e, bigEnd);
      }
    }
    const from = prevEnd;
    const graphemes = from < end ? graphemeEnds(text.slice(from, end)) : [];
    const kept = complete ? graphemes.length : graphemes.length - 1;
    for (let g = 0; g < kept; g++) {
      const gEnd = from + graphemes[g];
      if (gEnd - prevEnd > 1 && measure(text.slice(prevEnd, gEnd), unit) > limit) {
        for (const e of codePointEnds(text.slice(prevEnd, gEnd), prevEnd)) {
          push(e, gEnd);
        }
      } else {
        push(gEnd, 0);
      }
    }
    if (complete || total > limit) {
      return { ends, sizes, big, complete };
    }
  }
}

/** One part of a split text: `text.slice(start, end)`. */
export interface Span {
  readonly start: number;
  readonly end: number;
}

/**
 * Splits `text` into parts of at most `limit` (in `unit`); `null` or a text within the limit is
 * one part. A text without visible characters has no parts, and no part is whitespace only
 * (docs/delivery.md#splitting): a part ends only after its first visible character (leading
 * whitespace joins the next part), a whitespace run that fills a whole part's window at a cut is
 * dropped, and so is whitespace after the last part when that part has no room for it. Else the
 * parts join to the text exactly. Each part costs O(limit): only its window is examined.
 * `ctx`: the fence state where `text` starts, when it is the rest of a longer answer.
 */
export function splitText(
  text: string,
  limit: number | null,
  unit: SizeUnit = 'chars',
  ctx: FenceContext = NO_FENCE,
): string[] {
  return splitSpans(text, limit, unit, ctx).map((s) => text.slice(s.start, s.end));
}

/** splitText as spans of `text`: what lies between them (and after the last) is dropped whitespace. */
export function splitSpans(
  text: string,
  limit: number | null,
  unit: SizeUnit = 'chars',
  ctx: FenceContext = NO_FENCE,
): Span[] {
  if (!visible(text)) {
    return [];
  }
  if (limit === null || measure(text, unit) <= limit) {
    return [{ start: 0, end: text.length }];
  }
  checkLimit(limit, unit);
  const spans: Span[] = [];
  const blank = splitFrom(text, { start: 0, bigEnd: 0 }, limit, unit, new FenceIndex(text, ctx), (start, end) =>
    spans.push({ start, end }),
  );
  const last = spans[spans.length - 1];
  if (blank < text.length && measure(text.slice(last.start), unit) <= limit) {
    spans[spans.length - 1] = { start: last.start, end: text.length }; // trailing whitespace joins the last part
  }
  return spans;
}

/**
 * The parts of `text` from `at` to its end (each to `push`), the text being complete. Returns where
 * the whitespace after the last part starts when it is left over (no part of its own), else the
 * text's length: the caller joins it to the last part when that one has room.
 */
function splitFrom(
  text: string,
  from: SplitPosition,
  limit: number,
  unit: SizeUnit,
  fences: FenceIndex,
  push: (start: number, end: number) => void,
): number {
  let at = from;
  while (at.start < text.length) {
    const next = splitStep(text, at, limit, unit, fences, true);
    if (next === null) {
      if (VISIBLE.test(text.slice(at.start))) {
        push(at.start, text.length);
        return text.length;
      }
      return at.start; // whitespace after the last part
    }
    if (next === undefined || next === BLANK_WINDOW) {
      throw new Error('unreachable: a complete text has no undecided step');
    }
    if (!next.skip) {
      push(at.start, next.start);
    }
    at = next;
  }
  return text.length;
}

function checkLimit(limit: number, unit: SizeUnit): void {
  if (!Number.isInteger(limit) || limit < MIN_LIMIT[unit]) {
    throw new RangeError(`limit: must be an integer ≥ ${MIN_LIMIT[unit]} ${unit}`);
  }
}

/** Where the next part starts, and the end of a grapheme larger than the limit the last part ended inside (else 0). */
interface SplitPosition {
  start: number;
  bigEnd: number;
  /** The text from the previous position to this one is dropped whitespace, not a part. */
  skip?: boolean;
}

/** splitStep of a growing text: the window holds only whitespace (where it ends is not known yet). */
const BLANK_WINDOW = 'blank window';

/**
 * One part of splitText from `at`: where the next one starts, or null when the rest is the last
 * part. With `atEnd` false the text may still grow: a step whose window reaches the end of the
 * text is not taken (undefined), so that a part chosen now is the part chosen on the whole text.
 */
function splitStep(
  text: string,
  at: SplitPosition,
  limit: number,
  unit: SizeUnit,
  fences: FenceIndex,
  atEnd: boolean,
): SplitPosition | null | undefined | typeof BLANK_WINDOW {
  const { start } = at;
  const { ends, sizes, big, complete } = unitsFrom(text, start, limit, unit, at.bigEnd);
  if (complete && !atEnd) {
    return undefined;
  }
  let size = 0;
  let j = 0;
  while (j < ends.length && size + sizes[j] <= limit) {
    size += sizes[j];
    j++;
  }
  if (j === ends.length) {
    return null;
  }
  // Candidate ends are ends[0..j-1]; choose the best-ranked one past MIN_FILL of the window.
  const windowEnd = ends[j - 1];
  // A part is never whitespace only: it ends after its first visible character.
  const lead = text.slice(start, windowEnd).search(VISIBLE);
  if (lead === -1) {
    // Whitespace fills the whole window: dropped up to the next visible character (else to the end).
    if (!atEnd) {
      return BLANK_WINDOW;
    }
    const v = text.slice(windowEnd).search(VISIBLE);
    return v === -1 ? null : { start: windowEnd + v, bigEnd: 0, skip: true };
  }
  const firstVisible = start + lead;
  const minPos = start + Math.floor((windowEnd - start) * MIN_FILL);
  let best = j - 1;
  let bestRank: Rank | -1 = -1;
  for (let c = j - 1; c >= 0; c--) {
    const pos = ends[c];
    if (pos <= firstVisible) {
      break; // the part would be whitespace only
    }
    const rank = rankAt(text, pos, fences.at(pos));
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
  const next = ends[best];
  // Still inside a grapheme cut into code points: the next window goes on cutting it so.
  return { start: next, bigEnd: big[best] > next ? big[best] : 0 };
}

/** Characters before a part's start that rankAt may read (it looks at most 8 back). */
const RANK_CONTEXT = 8;

/**
 * splitText of a text that grows, done as it grows (docs/delivery.md#long-answers): parts whose
 * window lies wholly in the text so far are cut at once, so that splitting a huge answer at its
 * end costs only its last parts. `parts` is a persistent list (newest first), so a state stays
 * unchanged when a later one grows. Only for text without a code fence line marker (a fence
 * changes where parts may end, from the text's start on): once one appears, `off` — the whole
 * text is split at the end, as splitText.
 */
export interface GrowingSplit {
  /** The text from the next part's start (minus up to RANK_CONTEXT characters before it). */
  readonly buf: string;
  /** Where in `buf` the next part starts, and a big grapheme's end there (0: none). */
  readonly at: SplitPosition;
  /** Parts cut so far, newest first. */
  readonly parts: PartList | null;
  /** Characters of the text the cut parts hold. */
  readonly cut: number;
  /** A fence marker was seen: nothing more is cut. */
  readonly off: boolean;
}

export interface PartList {
  readonly part: string;
  readonly rest: PartList | null;
}

export const EMPTY_GROWING_SPLIT: GrowingSplit = {
  buf: '',
  at: { start: 0, bigEnd: 0 },
  parts: null,
  cut: 0,
  off: false,
};

/** `chunk` appended to the text: the parts now certain are cut (O(chunk + limit) per part). */
export function growSplit(s: GrowingSplit, chunk: string, limit: number, unit: SizeUnit): GrowingSplit {
  if (s.off) {
    return s;
  }
  const tail = s.buf.slice(-2);
  if (/```|~~~/.test(tail + chunk)) {
    return { ...s, off: true };
  }
  checkLimit(limit, unit);
  let buf = s.buf + chunk;
  let at = s.at;
  let parts = s.parts;
  let cut = s.cut;
  const fences = new FenceIndex(buf); // no fence marker in the text: never inside one
  for (;;) {
    const next = splitStep(buf, at, limit, unit, fences, false);
    if (next === BLANK_WINDOW) {
      // A whitespace run as long as a part: the whole text is split at the end (rare).
      return { buf, at, parts, cut, off: true };
    }
    if (!next) {
      break;
    }
    parts = { part: buf.slice(at.start, next.start), rest: parts };
    cut += next.start - at.start;
    at = next;
  }
  if (at.start > RANK_CONTEXT) {
    const drop = at.start - RANK_CONTEXT;
    buf = buf.slice(drop);
    at = { start: at.start - drop, bigEnd: at.bigEnd > 0 ? at.bigEnd - drop : 0 };
  }
  return { buf, at, parts, cut, off: s.off };
}

/**
 * The parts of the whole text (the text `s` grew to): the parts already cut, then the rest split
 * to the end — splitText(text) exactly, or null when nothing was cut (split the text itself).
 */
export function finishSplit(s: GrowingSplit, limit: number, unit: SizeUnit): string[] | null {
  if (s.off || s.parts === null) {
    return null;
  }
  const cut: string[] = [];
  for (let l: PartList | null = s.parts; l !== null; l = l.rest) {
    cut.push(l.part);
  }
  cut.reverse();
  const { buf } = s;
  const blank = splitFrom(buf, s.at, limit, unit, new FenceIndex(buf), (start, end) => cut.push(buf.slice(start, end)));
  const joined = cut[cut.length - 1] + buf.slice(blank);
  if (blank < buf.length && measure(joined, unit) <= limit) {
    cut[cut.length - 1] = joined; // trailing whitespace joins the last part
  }
  return cut;
}

/** True when the text has something to show (not only whitespace). */
export function visible(text: string): boolean {
  return VISIBLE.test(text);
}

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

/**
 * An empty scan of a text that starts where `ctx` stands (the rest of an answer after a part was
 * sent): a fence opened before stays open, and a line begun before keeps its fence status. A
 * paragraph start needs its blank line in the scanned text.
 */
export function scanFrom(ctx: FenceContext): ParagraphScan {
  if (ctx.head === '') {
    return ctx.open ? { ...EMPTY_SCAN, open: true } : EMPTY_SCAN;
  }
  const isFence = FENCE_LINE.test(ctx.head);
  const decided = isFence || ctx.head.length >= FENCE_HEAD;
  return {
    ...EMPTY_SCAN,
    open: ctx.open,
    head: decided ? '' : ctx.head,
    lineIsFence: decided ? isFence : null,
    // The line began before the scanned text: never a paragraph start here.
    lineVisible: VISIBLE.test(ctx.head),
  };
}

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
