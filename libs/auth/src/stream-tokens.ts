import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
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

/**
 * Run-scoped stream tokens for clients that cannot send `Authorization` (a browser's EventSource):
 * `rhst_<claims>.<HMAC-SHA256>`, minted with an API key for one run, valid until it expires and
 * only on that run's stream routes. Signed with a key drawn at boot: nothing is stored, and a
 * restart ends the tokens (a page mints another). Not a secret worth keeping longer than a stream.
 */
@Injectable()
export class StreamTokensService {
  private readonly key = randomBytes(32);

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  mint(runId: string, by: Principal, now = Date.now()): MintedStreamToken {
    const claims: Claims = {
      r: runId,
      k: by.key_id,
      o: by.role,
      w: by.workspaces,
      e: now + this.config.browser.streamTokenTtlMs,
    };
    const body = Buffer.from(JSON.stringify(claims)).toString('base64url');
    return { token: `${STREAM_TOKEN_PREFIX}${body}.${this.sign(body)}`, expires_at: new Date(claims.e).toISOString() };
  }

  /** The principal a token stands for on `runId`'s streams; 401/403 naming the parameter otherwise. */
  verify(token: string, runId: string | undefined, now = Date.now()): Principal {
    const m = TOKEN.exec(token);
    const given = m ? Buffer.from(m[2]) : null;
    const expected = m ? Buffer.from(this.sign(m[1])) : null;
    if (!m || !given || !expected || given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new DomainError('unauthenticated', 'stream_token: not a valid stream token (or minted before a restart)', {
        field: 'stream_token',
      });
    }
    const claims = JSON.parse(Buffer.from(m[1], 'base64url').toString()) as Claims;
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

  private sign(body: string): string {
    return createHmac('sha256', this.key).update(body).digest('base64url');
  }
}
