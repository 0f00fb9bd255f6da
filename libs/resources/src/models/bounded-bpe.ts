import type { Tiktoken } from 'js-tiktoken/lite';

/*
 * Bounded BPE counting. js-tiktoken merges the byte pairs
 * of one pre-tokenizer piece in time quadratic in the piece's length (2k characters of one
 * unbroken word: 0.36 s; 32k: 83 s), and a caller sizes the pieces. Here no piece reaches the
 * BPE longer than MAX_PIECE_CHARS, so a count costs time linear in the text:
 *
 * - the text is split with the encoding's own pre-tokenizer pattern; runs of ordinary pieces are
 *   encoded together (exactly as a whole-text encode would count them), in segments of bounded
 *   work so that a caller can yield between them;
 * - a piece longer than MAX_PIECE_CHARS is cut into MAX_PIECE_CHARS-character chunks (at code
 *   point boundaries) and each chunk counted on its own. The count of such a piece is an estimate
 *   a little above the exact one (a token spanning a cut is counted as two): 'x' × 2000 is exact,
 *   2,000 unbroken CJK characters count ~2 % high;
 * - a text longer than HUGE_TEXT_CHARS is not encoded at all: it counts its UTF-8 bytes, an upper
 *   bound (every token of a byte-level BPE covers at least one byte).
 */

/** Pieces longer than this (UTF-16 code units) are counted in chunks of this length. */
export const MAX_PIECE_CHARS = 16;
/** Texts longer than this (UTF-16 code units) count their UTF-8 byte length instead of BPE tokens. */
export const HUGE_TEXT_CHARS = 256 * 1024;
/** Work (Σ piece bytes²) of one encoded segment: well under 4 ms of BPE on an idle core. */
const SEGMENT_WORK = 4096;
const NON_ASCII = /[\u0080-\uffff]/;

/** The upper estimate of a text: its UTF-8 bytes (≥ its tokens under any byte-level BPE). */
export function upperEstimate(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** `s` cut into chunks of at most `size` code units, never between the halves of a surrogate pair. */
export function* chunks(s: string, size: number): Generator<string> {
  let i = 0;
  while (i < s.length) {
    let end = Math.min(i + size, s.length);
    const last = s.charCodeAt(end - 1);
    if (end < s.length && last >= 0xd800 && last <= 0xdbff) {
      end -= 1; // a high surrogate stays with its low half
    }
    yield s.slice(i, end);
    i = end;
  }
}

/**
 * Token counts of `text`, in units of bounded work (each unit one encode of at most
 * SEGMENT_WORK or one chunk): the sum is the count. A caller yields to the event loop between
 * units (see `driveCount`).
 */
export function* textUnits(enc: Tiktoken, pattern: string, text: string): Generator<number> {
  if (text === '') {
    return;
  }
  if (text.length > HUGE_TEXT_CHARS) {
    yield upperEstimate(text);
    return;
  }
  const encode = (s: string) => enc.encode(s, [], []).length;
  if (text.length <= MAX_PIECE_CHARS) {
    yield encode(text);
    return;
  }
  const re = new RegExp(pattern, 'gu');
  let segStart = 0;
  let work = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    const len = m[0].length;
    if (len === 0) {
      re.lastIndex += 1; // the patterns never match empty; guard anyway
      continue;
    }
    const end = m.index + len;
    if (len > MAX_PIECE_CHARS) {
      if (m.index > segStart) {
        yield encode(text.slice(segStart, m.index));
      }
      for (const c of chunks(m[0], MAX_PIECE_CHARS)) {
        yield encode(c);
      }
      segStart = end;
      work = 0;
      continue;
    }
    // BPE cost grows with the square of a piece's bytes; a non-ASCII character is up to 3.
    const w = NON_ASCII.test(m[0]) ? 3 * len : len;
    work += w * w;
    if (work >= SEGMENT_WORK) {
      yield encode(text.slice(segStart, end));
      segStart = end;
      work = 0;
    }
  }
  if (segStart < text.length) {
    yield encode(text.slice(segStart));
  }
}

export interface DriveOptions {
  /** Run at most this long on the event loop before yielding to it (ms). */
  sliceMs: number;
  /** Past this wall time (ms) the count stops and the fallback answers. */
  budgetMs: number;
}

export const DRIVE_DEFAULTS: DriveOptions = { sliceMs: 4, budgetMs: 1000 };

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Sums `units`, giving the event loop a turn whenever a slice ran `sliceMs`; past `budgetMs` the
 * generator is closed (its pending work dropped) and `fallback()` answers instead.
 */
export async function driveCount(
  units: Generator<number>,
  fallback: () => number,
  opts: DriveOptions = DRIVE_DEFAULTS,
): Promise<{ tokens: number; estimated: boolean }> {
  const start = performance.now();
  let slice = start;
  let n = 0;
  for (const u of units) {
    n += u;
    const now = performance.now();
    if (now - slice >= opts.sliceMs) {
      if (now - start >= opts.budgetMs) {
        units.return(undefined);
        return { tokens: fallback(), estimated: true };
      }
      await yieldToLoop();
      slice = performance.now();
    }
  }
  return { tokens: n, estimated: false };
}

/** A bounded least-recently-used map (counts of unchanged messages). */
export class LruCounts {
  private readonly map = new Map<string, number>();

  constructor(private readonly max: number) {}

  get(key: string): number | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  set(key: string, value: number): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.max) {
      this.map.delete(this.map.keys().next().value!);
    }
  }

  get size(): number {
    return this.map.size;
  }
}
