import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * One-time callback tokens (docs/interactions.md#tokens): 18 random bytes, URL-safe, behind a
 * recognisable prefix. The host stores only the SHA-256 hash; a submission is looked up by it.
 */
export const CALLBACK_TOKEN_PREFIX = 'rhit_';
const SHAPE = /^rhit_[A-Za-z0-9_-]{24}$/;

export function newCallbackToken(): { token: string; hash: string } {
  const token = `${CALLBACK_TOKEN_PREFIX}${randomBytes(18).toString('base64url')}`;
  return { token, hash: hashCallbackToken(token) };
}

export function hashCallbackToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** Whether a string has the shape of a token (anything else is refused before any lookup). */
export function isCallbackTokenShape(token: unknown): token is string {
  return typeof token === 'string' && SHAPE.test(token);
}

/** Constant-time comparison of a token with a stored hash. */
export function tokenMatches(token: string, hash: string): boolean {
  const a = Buffer.from(hashCallbackToken(token), 'hex');
  const b = Buffer.from(hash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}
