import { hashCallbackToken, isCallbackTokenShape, newCallbackToken, tokenMatches } from './tokens';

describe('callback tokens', () => {
  it('are random, prefixed, URL-safe, 18 bytes; the hash is SHA-256 hex of the token', () => {
    const a = newCallbackToken();
    const b = newCallbackToken();
    expect(a.token).not.toBe(b.token);
    expect(a.token).toMatch(/^rhit_[A-Za-z0-9_-]{24}$/);
    expect(Buffer.from(a.token.slice(5), 'base64url')).toHaveLength(18);
    expect(a.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(a.hash).toBe(hashCallbackToken(a.token));
    expect(a.hash).not.toContain(a.token.slice(5));
  });

  it('match only their own hash', () => {
    const a = newCallbackToken();
    const b = newCallbackToken();
    expect(tokenMatches(a.token, a.hash)).toBe(true);
    expect(tokenMatches(b.token, a.hash)).toBe(false);
    expect(tokenMatches(a.token, 'short')).toBe(false);
  });

  it('shape check refuses anything else before a lookup', () => {
    expect(isCallbackTokenShape(newCallbackToken().token)).toBe(true);
    for (const bad of [
      undefined,
      null,
      42,
      '',
      'rhit_',
      'rhit_short',
      `rhst_${'A'.repeat(24)}`,
      `rhit_${'A'.repeat(23)}!`,
    ]) {
      expect(isCallbackTokenShape(bad)).toBe(false);
    }
  });
});
