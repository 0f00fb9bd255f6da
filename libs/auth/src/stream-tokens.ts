import { createHmac, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import type { ApiKeyRole } from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import type { Principal } from './api-keys.service';

/** Recognisable in logs (the logger scrubs it) and in a URL. */
export const STREAM_TOKEN_PREFIX = 'rhst_';
const TOKEN = /^rhst_([A-Za-z0-9_-]{1,512})\.([A-Za-z0-9_-]{43})$/;

interface Claims {
  /** run id */
  r: string;
  /** minting API key id and role: the stream counts against that key, and ends with it */
  k: string;
  o: ApiKeyRole;
  /** the key's workspaces (null: all): the stream is read within them (docs/tenancy.md) */
  w: readonly string[] | null;
  /** expiry, epoch ms */
  e: number;
}

export interface MintedStreamToken {
  token: string;
  expires_at: string;
}

/** The stored hash of an API key's secret, by key id (null: no such key): what a stream token's signing key derives from. */
export abstract class StreamTokenKeys {
  abstract keyHash(keyId: string): Promise<string | null>;
}

/** Signing keys cached per API key id (a key's hash never changes); the cache is bounded. */
const MAX_CACHED_KEYS = 10_000;
const KEY_CONTEXT = 'runner-host stream token v1';

/**
 * Run-scoped stream tokens for clients that cannot send `Authorization` (a browser's EventSource):
 * `rhst_<claims>.<HMAC-SHA256>`, minted with an API key for one run, valid until it expires and
 * only on that run's stream routes. The signing key derives from the minting API key's stored
 * hash (HMAC of a fixed context under it): nothing more is stored, every host process on the
 * database verifies a token any of them minted (docs/scale-out.md#everything-from-anywhere), a
 * restart keeps them, and a key's tokens end with the key (revocation is checked at each use).
 */
@Injectable()
export class StreamTokensService {
  private readonly signingKeys = new Map<string, Buffer>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly keys: StreamTokenKeys,
  ) {}

  async mint(runId: string, by: Principal, now = Date.now()): Promise<MintedStreamToken> {
    const claims: Claims = {
      r: runId,
      k: by.key_id,
      o: by.role,
      w: by.workspaces,
      e: now + this.config.browser.streamTokenTtlMs,
    };
    const key = await this.signingKey(by.key_id);
    if (!key) {
      throw new DomainError('unauthenticated', 'the API key of this request no longer exists');
    }
    const body = Buffer.from(JSON.stringify(claims)).toString('base64url');
    return { token: `${STREAM_TOKEN_PREFIX}${body}.${sign(key, body)}`, expires_at: new Date(claims.e).toISOString() };
  }

  /** The principal a token stands for on `runId`'s streams; 401/403 naming the parameter otherwise. */
  async verify(token: string, runId: string | undefined, now = Date.now()): Promise<Principal> {
    const m = TOKEN.exec(token);
    const claims = m ? claimsOf(m[1]) : null;
    const key = claims ? await this.signingKey(claims.k) : null;
    const given = m ? Buffer.from(m[2]) : null;
    const expected = m && key ? Buffer.from(sign(key, m[1])) : null;
    if (!claims || !given || !expected || given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new DomainError('unauthenticated', 'stream_token: not a valid stream token', {
        field: 'stream_token',
      });
    }
    if (claims.e <= now) {
      throw new DomainError(
        'unauthenticated',
        'stream_token: expired; mint another with POST /v1/runs/{run_id}/stream-tokens and resume with ?after=',
        { field: 'stream_token' },
      );
    }
    if (claims.r !== runId) {
      throw new DomainError('unauthorized', 'stream_token: issued for another run', { field: 'stream_token' });
    }
    return { key_id: claims.k, role: claims.o, workspaces: claims.w ?? null };
  }

  private async signingKey(keyId: string): Promise<Buffer | null> {
    const cached = this.signingKeys.get(keyId);
    if (cached) {
      return cached;
    }
    const hash = await this.keys.keyHash(keyId);
    if (hash === null) {
      return null;
    }
    const key = createHmac('sha256', hash).update(KEY_CONTEXT).digest();
    if (this.signingKeys.size >= MAX_CACHED_KEYS) {
      this.signingKeys.clear();
    }
    this.signingKeys.set(keyId, key);
    return key;
  }
}

function sign(key: Buffer, body: string): string {
  return createHmac('sha256', key).update(body).digest('base64url');
}

/** The claims of a token body, or null when it is not one (read before the signature is checked: only the key id is used then). */
function claimsOf(body: string): Claims | null {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(body, 'base64url').toString());
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null) {
    return null;
  }
  const c = v as Partial<Claims>;
  return typeof c.k === 'string' &&
    c.k.length > 0 &&
    c.k.length <= 128 &&
    typeof c.e === 'number' &&
    typeof c.r === 'string'
    ? (c as Claims)
    : null;
}
