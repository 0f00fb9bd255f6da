import { loadConfig } from '@libs/config';
import { DomainError } from '@libs/protocol';
import { StreamTokensService } from './stream-tokens';

const RUN = '0b6c6c1e-9a43-4d55-9c1c-3c1f3f7a2f10';
const OTHER = '5d0e0f4e-2b8a-4c1d-8f0e-1a2b3c4d5e6f';
const by = { key_id: 'key-1', role: 'platform' as const, workspaces: ['acme'] };

function refusal(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (e) {
    if (e instanceof DomainError) {
      return { code: e.code, message: e.message };
    }
    throw e;
  }
  throw new Error('accepted');
}

describe('StreamTokensService', () => {
  const tokens = new StreamTokensService(loadConfig({ STREAM_TOKEN_TTL_SECONDS: '60' }));
  const now = Date.parse('2026-12-01T10:00:00Z');

  it('mints a token for one run that stands for the minting key until it expires', () => {
    const minted = tokens.mint(RUN, by, now);
    expect(minted.token).toMatch(/^rhst_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(minted.expires_at).toBe('2026-12-01T10:01:00.000Z');
    expect(tokens.verify(minted.token, RUN, now + 59_999)).toEqual(by);
  });

  it('refuses it once expired (401), on another run (403), altered, or from another process (401)', () => {
    const { token } = tokens.mint(RUN, by, now);
    expect(refusal(() => tokens.verify(token, RUN, now + 60_000))).toMatchObject({
      code: 'unauthenticated',
      message: expect.stringContaining('stream_token: expired'),
    });
    expect(refusal(() => tokens.verify(token, OTHER, now))).toMatchObject({ code: 'unauthorized' });
    expect(refusal(() => tokens.verify(token, undefined, now))).toMatchObject({ code: 'unauthorized' });
    // Claims changed (another run) with the old signature.
    const [body, sig] = token.slice(5).split('.');
    const forged = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(body, 'base64url').toString()), r: OTHER }),
    ).toString('base64url');
    expect(refusal(() => tokens.verify(`rhst_${forged}.${sig}`, OTHER, now))).toMatchObject({
      code: 'unauthenticated',
    });
    const elsewhere = new StreamTokensService(loadConfig({}));
    expect(refusal(() => elsewhere.verify(token, RUN, now))).toMatchObject({ code: 'unauthenticated' });
    expect(refusal(() => tokens.verify('rhk_an-api-key', RUN, now))).toMatchObject({ code: 'unauthenticated' });
  });
});
