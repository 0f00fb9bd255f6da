import { loadConfig } from '@libs/config';
import { DomainError } from '@libs/protocol';
import { StreamTokenKeys, StreamTokensService } from './stream-tokens';

const RUN = '0b6c6c1e-9a43-4d55-9c1c-3c1f3f7a2f10';
const OTHER = '5d0e0f4e-2b8a-4c1d-8f0e-1a2b3c4d5e6f';
const by = { key_id: 'key-1', role: 'platform' as const, workspaces: ['acme'] };

/** The stored key hashes, as the api_keys table holds them (every process reads the same rows). */
class StoredKeys extends StreamTokenKeys {
  constructor(private readonly hashes: Record<string, string>) {
    super();
  }
  keyHash(keyId: string): Promise<string | null> {
    return Promise.resolve(this.hashes[keyId] ?? null);
  }
}

async function refusal(fn: () => Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof DomainError) {
      return { code: e.code, message: e.message };
    }
    throw e;
  }
  throw new Error('accepted');
}

describe('StreamTokensService', () => {
  const config = loadConfig({ STREAM_TOKEN_TTL_SECONDS: '60' });
  const keys = new StoredKeys({ 'key-1': 'a'.repeat(64), 'key-2': 'b'.repeat(64) });
  const tokens = new StreamTokensService(config, keys);
  const now = Date.parse('2026-12-01T10:00:00Z');

  it('mints a token for one run that stands for the minting key until it expires', async () => {
    const minted = await tokens.mint(RUN, by, now);
    expect(minted.token).toMatch(/^rhst_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(minted.expires_at).toBe('2026-12-01T10:01:00.000Z');
    expect(await tokens.verify(minted.token, RUN, now + 59_999)).toEqual(by);
  });

  it('is verified by another process on the same database (its keys), and survives a restart', async () => {
    const { token } = await tokens.mint(RUN, by, now);
    const elsewhere = new StreamTokensService(config, new StoredKeys({ 'key-1': 'a'.repeat(64) }));
    expect(await elsewhere.verify(token, RUN, now)).toEqual(by);
  });

  it('refuses it once expired (401), on another run (403), altered, signed for another key, or its key gone (401)', async () => {
    const { token } = await tokens.mint(RUN, by, now);
    expect(await refusal(() => tokens.verify(token, RUN, now + 60_000))).toMatchObject({
      code: 'unauthenticated',
      message: expect.stringContaining('stream_token: expired'),
    });
    expect(await refusal(() => tokens.verify(token, OTHER, now))).toMatchObject({ code: 'unauthorized' });
    expect(await refusal(() => tokens.verify(token, undefined, now))).toMatchObject({ code: 'unauthorized' });
    const [body, sig] = token.slice(5).split('.');
    const claims = JSON.parse(Buffer.from(body, 'base64url').toString()) as Record<string, unknown>;
    const reclaim = (c: Record<string, unknown>) => Buffer.from(JSON.stringify(c)).toString('base64url');
    // Claims changed (another run; another key) with the old signature.
    for (const forged of [reclaim({ ...claims, r: OTHER }), reclaim({ ...claims, k: 'key-2' })]) {
      expect(await refusal(() => tokens.verify(`rhst_${forged}.${sig}`, OTHER, now))).toMatchObject({
        code: 'unauthenticated',
        message: expect.stringContaining('stream_token'),
      });
    }
    // The key's stored hash differs (another database, or the key row is gone).
    const other = new StreamTokensService(config, new StoredKeys({ 'key-1': 'c'.repeat(64) }));
    expect(await refusal(() => other.verify(token, RUN, now))).toMatchObject({ code: 'unauthenticated' });
    const gone = new StreamTokensService(config, new StoredKeys({}));
    expect(await refusal(() => gone.verify(token, RUN, now))).toMatchObject({ code: 'unauthenticated' });
    expect(await refusal(() => tokens.verify('rhk_an-api-key', RUN, now))).toMatchObject({ code: 'unauthenticated' });
    expect(await refusal(() => tokens.verify(`rhst_${reclaim({ k: 7 })}.${sig}`, RUN, now))).toMatchObject({
      code: 'unauthenticated',
    });
  });
});
