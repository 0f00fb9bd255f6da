import { type CanActivate, type ExecutionContext, Inject, Injectable, Optional, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { IncomingHttpHeaders } from 'node:http';
import type { ApiKeyRole } from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import { ApiKeysService, type Principal } from './api-keys.service';
import { StreamTokensService } from './stream-tokens';
import { bearerToken } from './secrets';
import { GLOBAL_ONLY_KEY, OWNED_PARAMS, OWNER_LOOKUP, type OwnedParam, type OwnerLookup } from './tenancy';

const ROLES = 'runnerhost:roles';
const PUBLIC = 'runnerhost:public';
const STREAM_TOKEN = 'runnerhost:stream-token';

/** Roles allowed on a route or controller. Routes without it are admin-only. */
export const Roles = (...roles: ApiKeyRole[]) => SetMetadata(ROLES, roles);
/** No authentication (health, OpenAPI). */
export const Public = () => SetMetadata(PUBLIC, true);
/**
 * A run's event stream: without an Authorization header, a stream token for the route's `:run_id`
 * in `?stream_token=` authenticates (EventSource cannot send headers). Nowhere else.
 */
export const AcceptsStreamToken = () => SetMetadata(STREAM_TOKEN, true);

/** The HTTP request as the guard sees it (any adapter): its headers, and the principal once authenticated. */
export interface AuthenticatedRequest {
  headers: IncomingHttpHeaders;
  query?: unknown;
  params?: unknown;
  principal?: Principal;
}

/** What the guard asks of a route's decorators: fixed once the controllers are declared. */
interface RouteRules {
  public: boolean;
  streamToken: boolean;
  roles: ApiKeyRole[];
  globalOnly: boolean;
}

/** Bearer API key check for every HTTP route (gRPC authenticates plugins itself). */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly keys: ApiKeysService,
    private readonly streamTokens: StreamTokensService,
    @Optional() @Inject(OWNER_LOOKUP) private readonly owners?: OwnerLookup,
  ) {}

  /**
   * Each route's rules, read from its metadata on its first request (docs/architecture.md: nothing per
   * request that earns nothing): per controller class, then handler — a handler inherited by two
   * controllers may carry different class-level rules in each.
   */
  private readonly rules = new WeakMap<object, WeakMap<object, RouteRules>>();

  private rulesOf(ctx: ExecutionContext): RouteRules {
    const handler = ctx.getHandler();
    const cls = ctx.getClass();
    let byHandler = this.rules.get(cls);
    if (byHandler === undefined) {
      byHandler = new WeakMap();
      this.rules.set(cls, byHandler);
    }
    let rules = byHandler.get(handler);
    if (rules === undefined) {
      const targets = [handler, cls];
      rules = {
        public: Boolean(this.reflector.getAllAndOverride<boolean>(PUBLIC, targets)),
        streamToken: Boolean(this.reflector.getAllAndOverride<boolean>(STREAM_TOKEN, targets)),
        roles: this.reflector.getAllAndOverride<ApiKeyRole[] | undefined>(ROLES, targets) ?? ['admin'],
        globalOnly: Boolean(this.reflector.getAllAndOverride<boolean>(GLOBAL_ONLY_KEY, targets)),
      };
      byHandler.set(handler, rules);
    }
    return rules;
  }

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    if (ctx.getType() !== 'http') {
      return true;
    }
    const rules = this.rulesOf(ctx);
    if (rules.public) {
      return true;
    }
    const req = ctx.switchToHttp().getRequest<AuthenticatedRequest>();
    const token = bearerToken(req.headers.authorization);
    const streamToken = (req.query as Record<string, unknown> | undefined)?.stream_token;
    let principal: Principal | null;
    if (!token && typeof streamToken === 'string' && rules.streamToken) {
      principal = await this.streamTokens.verify(
        streamToken,
        (req.params as Record<string, string> | undefined)?.run_id,
      );
      if (!(await this.keys.isActive(principal.key_id))) {
        throw new DomainError('unauthenticated', 'stream_token: the API key that minted it was revoked', {
          field: 'stream_token',
        });
      }
    } else {
      if (!token) {
        throw new DomainError('unauthenticated', 'missing bearer API key (Authorization: Bearer <key>)');
      }
      principal = await this.keys.authenticate(token);
      if (!principal) {
        throw new DomainError('unauthenticated', 'invalid or revoked API key');
      }
    }
    const roles = rules.roles;
    if (!roles.includes(principal.role)) {
      throw new DomainError('unauthorized', `this route requires the ${roles.join(' or ')} role`);
    }
    req.principal = principal;
    if (principal.workspaces !== null) {
      await this.checkTenancy(principal.workspaces, req, rules, ctx);
    }
    return true;
  }

  /**
   * A workspace-scoped caller (docs/tenancy.md#isolation): host-wide routes are refused (403), and
   * an id in the route that belongs to another workspace answers the route's own 404. Shared
   * resources are readable by every workspace, writable only by a global key.
   */
  private async checkTenancy(
    workspaces: readonly string[],
    req: AuthenticatedRequest,
    rules: RouteRules,
    ctx: ExecutionContext,
  ): Promise<void> {
    if (rules.globalOnly) {
      throw new DomainError('unauthorized', 'this route is host-wide: it requires an admin key of every workspace');
    }
    const params = (req.params ?? {}) as Record<string, string | undefined>;
    const read = ctx.switchToHttp().getRequest<{ method?: string }>().method === 'GET';
    for (const name of Object.keys(OWNED_PARAMS) as OwnedParam[]) {
      const id = params[name];
      if (id === undefined) {
        continue;
      }
      if (name === 'workspace_id') {
        if (!workspaces.includes(id)) {
          throw OWNED_PARAMS[name](id);
        }
        continue;
      }
      const owner = this.owners ? await this.owners.ownerOf(name, id) : null;
      if (owner && !workspaces.includes(owner.workspace_id) && !(owner.shared && read)) {
        throw OWNED_PARAMS[name](id);
      }
    }
  }
}
