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

/** Bearer API key check for every HTTP route (gRPC authenticates plugins itself). */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly keys: ApiKeysService,
    private readonly streamTokens: StreamTokensService,
    @Optional() @Inject(OWNER_LOOKUP) private readonly owners?: OwnerLookup,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    if (ctx.getType() !== 'http') {
      return true;
    }
    const targets = [ctx.getHandler(), ctx.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC, targets)) {
      return true;
    }
    const req = ctx.switchToHttp().getRequest<AuthenticatedRequest>();
    const token = bearerToken(req.headers.authorization);
    const streamToken = (req.query as Record<string, unknown> | undefined)?.stream_token;
    let principal: Principal | null;
    if (!token && typeof streamToken === 'string' && this.reflector.getAllAndOverride<boolean>(STREAM_TOKEN, targets)) {
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
    const roles = this.reflector.getAllAndOverride<ApiKeyRole[] | undefined>(ROLES, targets) ?? ['admin'];
    if (!roles.includes(principal.role)) {
      throw new DomainError('unauthorized', `this route requires the ${roles.join(' or ')} role`);
    }
    req.principal = principal;
    if (principal.workspaces !== null) {
      await this.checkTenancy(principal.workspaces, req, targets, ctx);
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
    targets: Parameters<Reflector['getAllAndOverride']>[1],
    ctx: ExecutionContext,
  ): Promise<void> {
    if (this.reflector.getAllAndOverride<boolean>(GLOBAL_ONLY_KEY, targets)) {
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
