/**
 * Parsed committed rows, shared between the readers that read them (docs/benchmarks.md#streaming):
 * when ten SSE readers of one run replay its results, each reads the rows from the database as
 * before, but a row whose stored JSON text is the one parsed last time is answered with the
 * object parsed then instead of being parsed again — so the readers also share that object, and
 * with it the SSE frame built from it (apps/host sse-writer.ts keeps one frame per object).
 * The database stays the only truth: every read still runs its query, and a key whose text
 * differs from the remembered one is parsed anew. Bounded by the memory kept, counted in characters
 * (least recently used first out): an entry counts its key and texts plus `entryChars`, the
 * memory of its objects beyond the texts (without it, a bound of small rows held ten times its
 * size: docs/benchmarks.md, "Host memory across a soak"); an entry larger than an eighth of the
 * bound is not kept.
 * The objects are frozen (shallow): they are shared, no reader may change them.
 */
export class ParsedRows<T extends object> {
  private readonly rows = new Map<string, { texts: readonly (string | null)[]; value: T; size: number }>();
  private chars = 0;

  constructor(
    private readonly maxChars: number,
    private readonly entryChars = 0,
  ) {}

  /** Entries kept (for tests). */
  get size(): number {
    return this.rows.size;
  }

  /** The row of `key` with these stored texts: remembered if the texts are the same, else `parse()`. */
  get(key: string, texts: readonly (string | null)[], parse: () => T): T {
    const hit = this.rows.get(key);
    if (hit !== undefined) {
      this.rows.delete(key);
      if (sameTexts(hit.texts, texts)) {
        this.rows.set(key, hit); // most recently used last
        return hit.value;
      }
      this.chars -= hit.size;
    }
    const value = Object.freeze(parse());
    const size = texts.reduce((n, t) => n + (t?.length ?? 0), key.length + this.entryChars);
    if (size <= this.maxChars / 8) {
      this.rows.set(key, { texts, value, size });
      this.chars += size;
      for (const [k, old] of this.rows) {
        if (this.chars <= this.maxChars) {
          break;
        }
        this.rows.delete(k);
        this.chars -= old.size;
      }
    }
    return value;
  }
}

function sameTexts(a: readonly (string | null)[], b: readonly (string | null)[]): boolean {
  return a.length === b.length && a.every((t, i) => t === b[i]);
}
