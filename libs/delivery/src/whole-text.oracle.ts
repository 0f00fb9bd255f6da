import { graphemeEnds, measure, type SizeUnit } from './split';

/*
 * The whole-text delivery algorithms that the incremental ones of libs/delivery replaced (they
 * rescanned the whole unsent text at every delta), kept as test oracles: the incremental code must
 * give the same answers for any chunking of any text.
 */

function fencedLines(text: string): { starts: number[]; fenced: boolean[] } {
  const starts: number[] = [];
  const fenced: boolean[] = [];
  let open = false;
  let at = 0;
  for (;;) {
    starts.push(at);
    const nl = text.indexOf('\n', at);
    const line = text.slice(at, nl === -1 ? text.length : nl);
    const isFence = /^\s{0,3}(```|~~~)/.test(line);
    fenced.push(open || isFence);
    if (isFence) {
      open = !open;
    }
    if (nl === -1) {
      break;
    }
    at = nl + 1;
  }
  return { starts, fenced };
}

/**
 * The end of the last complete paragraph outside fences followed by visible text (0: none), by
 * rescanning `text`; with `from`, of `text.slice(from)` (its offset there, its blank line wholly in
 * it), the fences being those of the whole `text`: a fence is the answer's, and a part sent inside
 * one leaves it open (docs/delivery.md#normalisation-rules).
 */
export function wholeTextParagraphs(text: string, from = 0): number {
  if (!text.includes('\n\n', from)) {
    return 0;
  }
  const { starts, fenced } = fencedLines(text);
  for (let li = starts.length - 1; li > 0; li--) {
    const at = starts[li];
    if (at - from >= 2 && text[at - 1] === '\n' && text[at - 2] === '\n' && !fenced[li] && !fenced[li - 1]) {
      if (/\S/.test(text.slice(at))) {
        return at - from;
      }
    }
  }
  return 0;
}

/**
 * The messages parts mode sends for an answer streamed as `deltas` and then completed as it
 * streamed, by the whole-text rule: at each delta the whole text is rescanned (its fences from the
 * start of the answer, sent parts included) and the unsent text split (the whole-text splitter).
 * No message is whitespace only (docs/delivery.md#splitting): whitespace before the first visible
 * character of the unsent text waits for it, and whitespace after the last part sent that the part
 * had no room for stays unsent, to lead the next part.
 */
export function wholeTextParts(deltas: string[], limit: number | null, unit: SizeUnit): string[] {
  const out: string[] = [];
  let text = '';
  let sent = 0;
  for (const delta of deltas) {
    text += delta;
    const unsent = text.slice(sent);
    const before = text.slice(0, sent);
    let ready = wholeTextParagraphs(text, sent);
    if (!/\S/.test(unsent.slice(0, ready))) {
      ready = 0;
    }
    const parts = wholeTextSpans(unsent, limit, unit, before);
    if (parts.length > 1) {
      ready = Math.max(ready, parts[parts.length - 1].start);
    }
    if (ready > 0) {
      const sending = wholeTextSpans(unsent.slice(0, ready), limit, unit, before);
      out.push(...sending.map((p) => unsent.slice(p.start, p.end)));
      sent += sending[sending.length - 1].end;
    }
  }
  const rest = text.slice(sent);
  if (/\S/.test(rest)) {
    out.push(...wholeTextSplit(rest, limit, unit, text.slice(0, sent)));
  }
  return out;
}

/* The splitter as it was: grapheme ends and line fences of the whole text computed up front. */

/** Boundary ranks: higher is better. */
enum Rank {
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
function fencedLinesWithCloses(text: string): { starts: number[]; fenced: boolean[]; closes: boolean[] } {
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
 * one part. `before`: the answer's text before `text` (already sent), whose fences `text`
 * continues; boundaries are ranked on `text` alone. No part is whitespace only: a text without
 * visible characters has none, a part ends after its first visible character, a whitespace run
 * filling a whole window is dropped up to the next visible character, a whitespace-only rest too.
 */
export function wholeTextSplit(text: string, limit: number | null, unit: SizeUnit = 'chars', before = ''): string[] {
  return wholeTextSpans(text, limit, unit, before).map((p) => text.slice(p.start, p.end));
}

/** wholeTextSplit as [start, end) spans of `text`. */
export function wholeTextSpans(
  text: string,
  limit: number | null,
  unit: SizeUnit = 'chars',
  before = '',
): { start: number; end: number }[] {
  if (!/\S/.test(text)) {
    return [];
  }
  if (limit === null || measure(text, unit) <= limit) {
    return [{ start: 0, end: text.length }];
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
  const { starts, fenced, closes } = fencedLinesWithCloses(before + text);
  const fenceAt = (at: number): boolean => {
    const pos = before.length + at;
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

  const parts: { start: number; end: number }[] = [];
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
      if (/\S/.test(text.slice(start))) {
        parts.push({ start, end: text.length });
      } else if (measure(text.slice(parts[parts.length - 1].start), unit) <= limit) {
        parts[parts.length - 1] = { start: parts[parts.length - 1].start, end: text.length };
      }
      break;
    }
    // Candidate ends are ends[k..j-1]; choose the best-ranked one past MIN_FILL of the window.
    const windowEnd = ends[j - 1];
    const firstVisible = text.slice(start, windowEnd).search(/\S/);
    if (firstVisible === -1) {
      const next = text.slice(windowEnd).search(/\S/);
      if (next === -1) {
        const last = parts[parts.length - 1];
        if (measure(text.slice(last.start), unit) <= limit) {
          parts[parts.length - 1] = { start: last.start, end: text.length };
        }
        break;
      }
      start = windowEnd + next;
      k = ends.findIndex((e) => e > start);
      continue;
    }
    const minPos = start + Math.floor((windowEnd - start) * MIN_FILL);
    let best = j - 1;
    let bestRank: Rank | -1 = -1;
    for (let c = j - 1; c >= k; c--) {
      const pos = ends[c];
      if (pos <= start + firstVisible) {
        break;
      }
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
    parts.push({ start, end: ends[best] });
    start = ends[best];
    k = best + 1;
  }
  return parts;
}
