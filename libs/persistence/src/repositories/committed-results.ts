/** A row as a page read returns it, with the characters of its stored texts (the memory it holds). */
export interface SizedRow<T> {
  row: T;
  size: number;
}

interface Prefix<T> {
  /** Every committed row of the run with sequence ≤ upTo, in sequence order. */
  rows: T[];
  upTo: number;
  /** The last row is the run's last (a terminal result): nothing is ever committed after it. */
  complete: boolean;
  chars: number;
  usedAt: number;
}

export interface CommittedResultsOptions<T> {
  /**
   * Characters of stored texts kept over all runs (least recently used run first out); one run's
   * prefix stops growing past an eighth of it (its later rows are read from the database).
   */
  maxChars: number;
  /**
   * The memory of a kept row beyond its stored texts, counted with them (default 0): the row
   * objects a prefix keeps alive (docs/benchmarks.md, "Host memory across a soak").
   */
  rowChars?: number;
  /** A run not read for this long is read from the database again (ms). */
  idleMs: number;
  /** The row after which nothing follows (a terminal result). */
  isLast: (row: T) => boolean;
  now?: () => number;
}

/**
 * The committed results of recently replayed runs, from their first on, shared by every reader
 * of the run (docs/api.md#the-result-stream-sse): when ten SSE readers of a run replay it, the
 * first reads its rows from the database and the nine others are answered from memory — the
 * same frozen objects, so the same SSE frames (apps/host sse-writer.ts builds one per object).
 *
 * Why this is the database's answer and not a second truth: a run's results are committed in
 * sequence order by the one writer and never changed (docs/durability.md#the-one-writer), so a
 * read of "sequence > a" that returned rows up to b proves which rows lie in (a, b] for good.
 * A prefix (0, upTo] grows only by reads that start inside it. A page that the prefix cannot fill
 * reads the rest from the database after `upTo` — every reader's last page asks the database —
 * unless the prefix ends with the run's terminal result, after which nothing is ever written.
 * Retention only deletes results of runs that ended days ago; an entry unused for `idleMs` is
 * dropped.
 */
export class CommittedResults<T extends { sequence: number }> {
  private readonly runs = new Map<string, Prefix<T>>();
  private chars = 0;
  private readonly now: () => number;

  constructor(private readonly options: CommittedResultsOptions<T>) {
    this.now = options.now ?? Date.now;
  }

  /** Runs kept (for tests). */
  get size(): number {
    return this.runs.size;
  }

  /**
   * The run's committed rows with sequence > after, in order, at most `limit`: from memory where
   * the prefix has them, the rest from `load(after', limit')` (the database).
   */
  async page(
    runId: string,
    after: number,
    limit: number,
    load: (after: number, limit: number) => Promise<SizedRow<T>[]>,
  ): Promise<T[]> {
    const kept = this.fresh(runId);
    let out: T[] = [];
    let from = after;
    if (kept?.complete && after >= kept.upTo) {
      return [];
    }
    if (kept !== undefined && after < kept.upTo) {
      const start = firstAfter(kept.rows, after);
      out = kept.rows.slice(start, start + limit);
      if (out.length === limit || kept.complete) {
        return out;
      }
      from = kept.upTo;
    }
    const loaded = await load(from, limit - out.length);
    this.extend(runId, from, loaded);
    return out.length === 0 ? loaded.map((r) => r.row) : out.concat(loaded.map((r) => r.row));
  }

  /** The prefix of the run, if kept and used recently (then it becomes the most recently used). */
  private fresh(runId: string): Prefix<T> | undefined {
    const kept = this.runs.get(runId);
    if (kept === undefined) {
      return undefined;
    }
    this.runs.delete(runId);
    const now = this.now();
    if (now - kept.usedAt > this.options.idleMs) {
      this.chars -= kept.chars;
      return undefined;
    }
    kept.usedAt = now;
    this.runs.set(runId, kept);
    return kept;
  }

  /** Rows read after `from`: every committed row in (from, last read]. Extends a prefix they touch. */
  private extend(runId: string, from: number, loaded: readonly SizedRow<T>[]): void {
    let kept = this.runs.get(runId);
    if (kept === undefined) {
      if (from !== 0 || loaded.length === 0) {
        return;
      }
      kept = { rows: [], upTo: 0, complete: false, chars: 0, usedAt: this.now() };
      this.runs.set(runId, kept);
    }
    if (from > kept.upTo || kept.complete) {
      return; // not contiguous with what is kept
    }
    const perRun = this.options.maxChars / 8;
    const rowChars = this.options.rowChars ?? 0;
    for (const { row, size: texts } of loaded) {
      const size = texts + rowChars;
      if (row.sequence <= kept.upTo) {
        continue;
      }
      if (kept.chars + size > perRun) {
        break; // the rest of a very long run is read from the database
      }
      kept.rows.push(row);
      kept.upTo = row.sequence;
      kept.chars += size;
      this.chars += size;
      if (this.options.isLast(row)) {
        kept.complete = true;
        break;
      }
    }
    for (const [id, old] of this.runs) {
      if (this.chars <= this.options.maxChars) {
        break;
      }
      if (old !== kept) {
        this.runs.delete(id);
        this.chars -= old.chars;
      }
    }
  }
}

/** Index of the first row with sequence > after (rows in sequence order). */
function firstAfter<T extends { sequence: number }>(rows: readonly T[], after: number): number {
  let lo = 0;
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (rows[mid].sequence <= after) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}
