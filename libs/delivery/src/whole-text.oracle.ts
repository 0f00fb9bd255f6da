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
    const parts = wholeTextSplit(unsent, limit, unit, before);
    if (parts.length > 1) {
      ready = Math.max(ready, unsent.length - parts[parts.length - 1].length);
    }
    if (ready > 0) {
      out.push(...wholeTextSplit(unsent.slice(0, ready), limit, unit, before));
      sent += ready;
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
 * one part. An empty text has no parts. `before`: the answer's text before `text` (already sent),
 * whose fences `text` continues; boundaries are ranked on `text` alone.
 */
export function wholeTextSplit(text: string, limit: number | null, unit: SizeUnit = 'chars', before = ''): string[] {
  if (text === '') {
    return [];
  }
  if (limit === null || measure(text, unit) <= limit) {
    return [text];
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
