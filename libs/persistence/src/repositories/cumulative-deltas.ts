/**
 * Cumulative deltas stored linearly (docs/durability.md#cumulative-deltas). A `message.delta`
 * may carry `all_content`, the whole text of its message so far (docs/protocol.md#results):
 * stored whole on every delta, a message of L characters sent in small deltas would store
 * O(L²). So the one rule below decides, at ingest, which deltas are stored without their
 * `all_content` — replaced by a compact marker — and rebuilds it, on read, from the rows before.
 *
 * The chain: a delta whose `all_content` is a string is stored whole (a *full* row) and starts a
 * chain at its sequence. The next results continue the chain only while they arrive with
 * consecutive sequences (sequence = the previous one + 1: so every sequence between the chain's
 * full row and any later row of it is taken, and no result arriving later can land in between);
 * a `message.completed` or a delta without a string `all_content` ends it; other results (tool
 * calls, state, ...) continue it. A delta continuing a chain whose `all_content` equals the
 * chain's text + its own string `content` is *marked*: stored without `all_content`, with
 * `"~a": [full row's sequence, position of all_content among the chunk's keys]` beside `chunk`
 * (a runner cannot send that key: `message.delta` data is `{chunk}` only). Unless it is a
 * checkpoint: when the chain's marked rows (their contents, and MARKED_ROW_CHARS each for the
 * row) would exceed the larger of CHECKPOINT_CHARS and the chain's full text, the delta is stored
 * whole and starts a new chain. So the full rows stored are at most about the marked rows before
 * them plus CHECKPOINT_CHARS each (storage linear in what was sent as content), and rebuilding a
 * row reads at most its full row and that much again: about twice the text the row answers with,
 * or CHECKPOINT_CHARS.
 *
 * The rebuild follows the same rule on the stored rows in sequence order: from the marked row's
 * full row, every sequence present, the text grows by each marked delta's content. A marked row
 * whose chain is not all there (retention deleting a run's rows, a row that failed to persist)
 * reads without `all_content` — never with a wrong one.
 */

/** The stored marker's key, beside `chunk` in a marked delta's data. */
export const CUMULATIVE_MARKER = '~a';

/** Characters of marked rows after which a delta is stored whole again (at least). */
export const CHECKPOINT_CHARS = 64 * 1024;

/** What a marked row counts for beyond its content (its columns, keys and marker, about). */
export const MARKED_ROW_CHARS = 64;

type Data = Record<string, unknown>;

interface Chain {
  /** Sequence of the chain's full row. */
  base: number;
  /** Sequence of the last result that continued it. */
  tip: number;
  /** The message's text through the tip (the last delta's all_content). */
  text: string;
  /** Characters of the full row's all_content. */
  baseChars: number;
  /** Characters of marked rows since the full row (contents, MARKED_ROW_CHARS each). */
  since: number;
}

function chunkOf(type: string, data: Data): Data | null {
  if (type !== 'message.delta') {
    return null;
  }
  const chunk = data.chunk;
  return typeof chunk === 'object' && chunk !== null && !Array.isArray(chunk) ? (chunk as Data) : null;
}

/**
 * One run's ingest side of the rule: results in, in arrival order, with the sequence they keep;
 * out, the data to store (the same object when stored as sent). Owned by the run's state machine.
 */
export class CumulativeDeltas {
  private chain: Chain | null = null;

  /** The data to store for an accepted result. */
  store(sequence: number, type: string, data: Data): Data {
    const chain = this.chain !== null && sequence === this.chain.tip + 1 ? this.chain : null;
    this.chain = chain;
    if (type === 'message.completed') {
      this.chain = null;
      return data;
    }
    const chunk = chunkOf(type, data);
    if (chunk === null) {
      if (chain !== null) {
        chain.tip = sequence;
      }
      return data;
    }
    const all = chunk.all_content;
    const content = chunk.content;
    if (typeof all !== 'string') {
      this.chain = null;
      return data;
    }
    if (
      chain !== null &&
      typeof content === 'string' &&
      chain.since + content.length + MARKED_ROW_CHARS <= Math.max(CHECKPOINT_CHARS, chain.baseChars) &&
      all.length === chain.text.length + content.length &&
      all.startsWith(chain.text) &&
      all.endsWith(content)
    ) {
      chain.tip = sequence;
      chain.text = all;
      chain.since += content.length + MARKED_ROW_CHARS;
      const at = Object.keys(chunk).indexOf('all_content');
      const rest: Data = {};
      for (const [k, v] of Object.entries(chunk)) {
        if (k !== 'all_content') {
          rest[k] = v;
        }
      }
      return { ...data, chunk: rest, [CUMULATIVE_MARKER]: [chain.base, at] };
    }
    this.chain = { base: sequence, tip: sequence, text: all, baseChars: all.length, since: 0 };
    return data;
  }

  /** A result of the run was not stored (its write failed): no later delta may rest on the chain. */
  broken(): void {
    this.chain = null;
  }
}

/** The marker of a stored row's data: its full row's sequence and all_content's key position. */
export function markerOf(type: string, data: Data): [number, number] | null {
  if (type !== 'message.delta') {
    return null;
  }
  const m = data[CUMULATIVE_MARKER];
  return Array.isArray(m) && m.length === 2 && Number.isInteger(m[0]) && Number.isInteger(m[1])
    ? [m[0] as number, m[1] as number]
    : null;
}

/** A chain as read through its last row `tip` (the message's text through it): where the next page starts. */
export interface ChainTip {
  base: number;
  tip: number;
  text: string;
}

/** Per row, its data as sent (null: stored as sent); and the chain after the last row (null: none). */
export interface Rebuilt {
  data: (Data | null)[];
  tip: ChainTip | null;
}

/** What the rebuild needs of a stored row. */
export interface StoredRow {
  sequence: number;
  type: string;
  data: Data;
}

/**
 * The data as sent for stored rows in sequence order: `rows` (to answer) after `before` (the
 * rows just before them, from the earliest full row a marked row of `rows` rests on; only read
 * for the text). Returns, per row of `rows`, null when it is stored as sent, else its data as
 * sent (all_content rebuilt; or left out, when its chain is not all there). `seed`: the chain
 * through the row just before the first of `before` and `rows` (from an earlier page). Throws nothing.
 */
export function rebuildCumulative(
  before: readonly StoredRow[],
  rows: readonly StoredRow[],
  seed: ChainTip | null = null,
): Rebuilt {
  let chain: ChainTip | null = seed === null ? null : { ...seed };
  const out: (Data | null)[] = [];
  const all = [...before, ...rows];
  for (let i = 0; i < all.length; i++) {
    const r = all[i];
    const answering = i >= before.length;
    const continues: boolean = chain !== null && r.sequence === chain.tip + 1;
    if (!continues) {
      chain = null;
    }
    const marker = markerOf(r.type, r.data);
    let rebuilt: Data | null = null;
    if (marker !== null) {
      const chunk = chunkOf(r.type, r.data) ?? {};
      const content = chunk.content;
      const [base, at] = marker;
      const { [CUMULATIVE_MARKER]: _marker, ...rest } = r.data;
      const entries = Object.entries(chunk);
      if (chain !== null && chain.base === base && typeof content === 'string') {
        chain.tip = r.sequence;
        chain.text += content;
        entries.splice(Math.max(0, Math.min(at, entries.length)), 0, ['all_content', chain.text]);
      } else {
        chain = null;
      }
      rebuilt = { ...rest, chunk: Object.fromEntries(entries) };
    } else if (r.type === 'message.completed') {
      chain = null;
    } else {
      const chunk = chunkOf(r.type, r.data);
      if (chunk !== null) {
        chain =
          typeof chunk.all_content === 'string' ? { base: r.sequence, tip: r.sequence, text: chunk.all_content } : null;
      } else if (chain !== null) {
        chain.tip = r.sequence;
      }
    }
    if (answering) {
      out.push(rebuilt);
    }
  }
  return { data: out, tip: chain };
}

/** The earliest full row's sequence a marked row of `rows` rests on, when before the first of them. */
export function rebuildFrom(rows: readonly StoredRow[]): number | null {
  if (rows.length === 0) {
    return null;
  }
  let from: number | null = null;
  for (const r of rows) {
    const m = markerOf(r.type, r.data);
    if (m !== null && m[0] < rows[0].sequence && (from === null || m[0] < from)) {
      from = m[0];
    }
  }
  return from;
}

/**
 * The data as sent for one page of stored rows in sequence order (null: stored as sent), and the
 * chain after it. A marked row of the page resting on rows before it is rebuilt from `seed` when
 * that is the chain through the row just before the page (an earlier page's tip: a reader
 * following a run reads no row twice), else from the rows read by `readBefore(from, count)`
 * (the stored rows with sequences from `from` on, at most `count`).
 */
export async function answerPage(
  rows: readonly StoredRow[],
  readBefore: (from: number, count: number) => Promise<readonly StoredRow[]>,
  seed: ChainTip | null = null,
): Promise<Rebuilt> {
  if (rows.length === 0) {
    return { data: [], tip: seed };
  }
  if (seed !== null && seed.tip === rows[0].sequence - 1) {
    return rebuildCumulative([], rows, seed);
  }
  const from = rebuildFrom(rows);
  const first = rows[0].sequence;
  // With rows missing before the page, the read may reach into it: only the rows before it count.
  const before = from === null ? [] : (await readBefore(from, first - from)).filter((r) => r.sequence < first);
  return rebuildCumulative(before, rows);
}

/**
 * The chain tips of runs' last pages read, for the next page (answerPage's seed): at most
 * `maxChars` characters of text, least recently set first out. A tip is exact — the rows it
 * rests on are committed and never change — so it is only an optimisation.
 */
export class ChainTips {
  private readonly tips = new Map<string, ChainTip>();
  private chars = 0;

  /** `entryChars`: the memory of a kept tip beyond its text (its objects), counted with it. */
  constructor(
    private readonly maxChars: number,
    private readonly entryChars = 0,
  ) {}

  get(runId: string): ChainTip | null {
    return this.tips.get(runId) ?? null;
  }

  set(runId: string, tip: ChainTip | null): void {
    const old = this.tips.get(runId);
    if (old !== undefined) {
      this.tips.delete(runId);
      this.chars -= this.sizeOf(old);
    }
    if (tip === null || this.sizeOf(tip) > this.maxChars / 8) {
      return;
    }
    this.tips.set(runId, tip);
    this.chars += this.sizeOf(tip);
    for (const [k, t] of this.tips) {
      if (this.chars <= this.maxChars) {
        break;
      }
      this.tips.delete(k);
      this.chars -= this.sizeOf(t);
    }
  }

  /** Tips kept (for tests). */
  get size(): number {
    return this.tips.size;
  }

  private sizeOf(tip: ChainTip): number {
    return tip.text.length + this.entryChars;
  }
}
