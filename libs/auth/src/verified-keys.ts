import { randomBytes } from 'node:crypto';

/**
 * The API keys verified recently, by the secret presented (docs/security.md#credential-caches), so
 * that a request with a key seen in the last `ttlMs` costs no SHA-256 and no database read.
 *
 * - Bounded: at most `capacity` entries, the longest held goes first. An entry lives `ttlMs`
 *   and is verified again after that, so the order of verification is the order of recent use
 *   within one `ttlMs` (moving an entry on every hit cost more than the hit: a Map delete and
 *   insert, docs/benchmarks.md, "Host CPU per run: the small items the profile names").
 * - Only verified keys are held: a refusal is never cached, so a key created later passes at once
 *   and nothing a refused secret does can evict or shadow another key's entry for longer than one
 *   lookup.
 * - The secret is compared in constant time: entries are found by a seeded 32-bit fingerprint of
 *   the secret (the seed is random per process, so the table's timing tells nothing about the
 *   secrets it holds), and an entry answers only when its secret equals the presented one, compared
 *   without an early exit.
 * - `forgetKey` drops a key's entries (revoked) and bumps `generation`: a lookup that started before
 *   may not store what it read (`remember` with a stale generation is ignored), so a revoked key is
 *   refused on the very next request in this process.
 */
export class VerifiedKeys<P> {
  private readonly entries = new Map<number, { secret: string; keyId: string; principal: P; until: number }>();
  private readonly seed: number;
  private changes = 0;

  constructor(
    private readonly capacity: number,
    private readonly ttlMs: number,
    seed: number = randomBytes(4).readUInt32LE(0),
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new Error('VerifiedKeys: capacity must be a positive integer');
    }
    this.seed = seed >>> 0;
  }

  /** Changes whenever a key is forgotten: taken before a lookup, handed to `remember` after it. */
  get generation(): number {
    return this.changes;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The principal of `secret` when it was verified less than `ttlMs` ago, else undefined. */
  get(secret: string, now: number): P | undefined {
    const fp = this.fingerprint(secret);
    const entry = this.entries.get(fp);
    if (entry === undefined || !sameSecret(entry.secret, secret)) {
      return undefined;
    }
    if (entry.until <= now) {
      this.entries.delete(fp);
      return undefined;
    }
    return entry.principal;
  }

  /** Keeps a verified key's principal, unless a key was forgotten since `generation` was taken. */
  remember(secret: string, keyId: string, principal: P, generation: number, now: number): void {
    if (generation !== this.changes) {
      return;
    }
    const fp = this.fingerprint(secret);
    this.entries.delete(fp);
    this.entries.set(fp, { secret, keyId, principal, until: now + this.ttlMs });
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value as number;
      this.entries.delete(oldest);
    }
  }

  /** A key was revoked (or otherwise changed): its entries go, and lookups in flight store nothing. */
  forgetKey(keyId: string): void {
    this.changes++;
    for (const [fp, entry] of this.entries) {
      if (entry.keyId === keyId) {
        this.entries.delete(fp);
      }
    }
  }

  /** Seeded FNV-1a over the UTF-16 code units, with a final avalanche. */
  private fingerprint(secret: string): number {
    let h = (0x811c9dc5 ^ this.seed) >>> 0;
    for (let i = 0; i < secret.length; i++) {
      h = Math.imul(h ^ secret.charCodeAt(i), 0x01000193);
    }
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    return h >>> 0;
  }
}

/** Equal strings, compared without an early exit (the length is not secret: keys have one shape). */
function sameSecret(a: string, b: string): boolean {
  if (a.length !== b.length) {
    return false;
  }
  let diff = 0;
  for (let i = 0; i < a.length; i++) {
    diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  }
  return diff === 0;
}
