import { hash, randomBytes } from 'node:crypto';

/** A new secret: a recognisable prefix and 256 random bits. */
export function newSecret(prefix: 'rhk' | 'rhp'): string {
  return `${prefix}_${randomBytes(32).toString('base64url')}`;
}

/**
 * Secrets are 256-bit random values, so a plain SHA-256 is a sufficient one-way hash. One-shot
 * (crypto.hash): every host API call hashes its plugin token, and a Hash object per call cost
 * more than the digest (docs/benchmarks.md#host-api).
 */
export function hashSecret(secret: string): string {
  return hash('sha256', secret, 'hex');
}

/** The part of a secret that may be shown in listings. */
export function secretPrefix(secret: string): string {
  return secret.slice(0, 10);
}

/** Reads `Bearer <token>` from an authorization header value. */
export function bearerToken(header: string | string[] | undefined): string | null {
  const value = Array.isArray(header) ? header[0] : header;
  const m = value ? /^Bearer\s+(\S+)\s*$/i.exec(value) : null;
  return m ? m[1] : null;
}
