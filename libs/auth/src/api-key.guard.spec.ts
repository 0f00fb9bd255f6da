import 'reflect-metadata';
import type { ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { DomainError } from '@libs/protocol';
import { ApiKeyGuard, Public, Roles } from './api-key.guard';
import type { ApiKeysService, Principal } from './api-keys.service';
import type { StreamTokensService } from './stream-tokens';
import { GlobalAdminOnly } from './tenancy';

/** The key store at the edge: a platform key, an admin key and a workspace-scoped admin key. */
const PRINCIPALS: Record<string, Principal> = {
  platform: { key_id: 'k-p', role: 'platform', workspaces: null },
  admin: { key_id: 'k-a', role: 'admin', workspaces: null },
  scoped: { key_id: 'k-s', role: 'admin', workspaces: ['ws-1'] },
};
const keys = {
  authenticate: (token: string) => Promise.resolve(PRINCIPALS[token] ?? null),
} as unknown as ApiKeysService;

class Base {
  list(this: void): void {}
}
@Roles('platform', 'admin')
class EventsLike extends Base {
  @Public() health(this: void): void {}
  submit(this: void): void {}
  @Roles('admin') cancel(this: void): void {}
}
class AdminLike extends Base {
  @GlobalAdminOnly() plugins(this: void): void {}
}

function ctx(cls: object, handler: () => void, token: string | undefined): ExecutionContext {
  const req = { headers: token ? { authorization: `Bearer ${token}` } : {}, params: {} };
  return {
    getType: () => 'http',
    getHandler: () => handler,
    getClass: () => cls,
    switchToHttp: () => ({ getRequest: () => req }),
  } as unknown as ExecutionContext;
}

async function answer(guard: ApiKeyGuard, c: ExecutionContext): Promise<string> {
  try {
    return String(await guard.canActivate(c));
  } catch (e) {
    return (e as DomainError).code;
  }
}

describe('ApiKeyGuard route rules (read once per controller and handler)', () => {
  const p = EventsLike.prototype;
  const cases: [string, object, () => void, string | undefined, string][] = [
    ['a public route without a key', EventsLike, p.health, undefined, 'true'],
    ['the class roles without a key', EventsLike, p.submit, undefined, 'unauthenticated'],
    ['the class roles for a platform key', EventsLike, p.submit, 'platform', 'true'],
    ['the handler roles over the class roles', EventsLike, p.cancel, 'platform', 'unauthorized'],
    ['an inherited handler with the class roles', EventsLike, Base.prototype.list, 'platform', 'true'],
    [
      'the same handler in a class without roles: admin only',
      AdminLike,
      Base.prototype.list,
      'platform',
      'unauthorized',
    ],
    ['the same handler, admin key', AdminLike, Base.prototype.list, 'admin', 'true'],
    ['a host-wide route for a workspace key', AdminLike, AdminLike.prototype.plugins, 'scoped', 'unauthorized'],
    ['a host-wide route for a global admin key', AdminLike, AdminLike.prototype.plugins, 'admin', 'true'],
  ];

  it('answers each route by its own decorators, the first time and every time after', async () => {
    const guard = new ApiKeyGuard(new Reflector(), keys, {} as StreamTokensService);
    const first = [];
    for (const [, cls, handler, token] of cases) {
      first.push(await answer(guard, ctx(cls, handler, token)));
    }
    // The other order: an inherited handler read first through the other class answers the same.
    const again = [];
    for (const [, cls, handler, token] of [...cases].reverse()) {
      again.unshift(await answer(guard, ctx(cls, handler, token)));
    }
    expect(first).toEqual(cases.map((c) => c[4]));
    expect(again).toEqual(first);
  });
});
