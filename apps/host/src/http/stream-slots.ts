import { DomainError } from '@libs/protocol';

/** Open SSE streams per API key, bounded: one key cannot hold the host's sockets and memory. */
export class StreamSlots {
  private readonly open = new Map<string, number>();

  constructor(private readonly perKey: number) {}

  /** Takes a slot for the key or refuses with 429 rate_limited; returns its release (idempotent). */
  take(keyId: string): () => void {
    const n = this.open.get(keyId) ?? 0;
    if (n >= this.perKey) {
      throw new DomainError(
        'rate_limited',
        `too many open event streams for this API key (limit ${this.perKey}, SSE_MAX_STREAMS_PER_KEY)`,
        { limit: this.perKey },
        true,
      );
    }
    this.open.set(keyId, n + 1);
    let released = false;
    return () => {
      if (!released) {
        released = true;
        const left = (this.open.get(keyId) ?? 1) - 1;
        if (left > 0) {
          this.open.set(keyId, left);
        } else {
          this.open.delete(keyId);
        }
      }
    };
  }
}
