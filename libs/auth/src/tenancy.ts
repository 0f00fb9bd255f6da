import { SetMetadata } from '@nestjs/common';
import { DEFAULT_WORKSPACE } from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import type { Principal } from './api-keys.service';

/**
 * Route parameters that name something a workspace owns, and the not-found answer of each: a
 * foreign id answers exactly like a missing one (docs/tenancy.md#isolation).
 */
export const OWNED_PARAMS = {
  run_id: (id: string) => new DomainError('not_found', `run ${id} not found`, { run_id: id }),
  agent_id: (id: string) => new DomainError('not_found', `agent ${id} not found`, { agent_id: id }),
  model_id: (id: string) => new DomainError('not_found', `model ${id} not found`, { model_id: id }),
  kb_id: (id: string) => new DomainError('not_found', `knowledge base ${id} not found`, { kb_id: id }),
  source_id: (id: string) => new DomainError('not_found', `tool source ${id} does not exist`, { source_id: id }),
  workspace_id: (id: string) => new DomainError('not_found', `workspace ${id} not found`, { workspace_id: id }),
} as const;
export type OwnedParam = keyof typeof OWNED_PARAMS;

/** The owner of an id: its workspace and whether it is shared; null when it does not exist. */
export interface Owner {
  workspace_id: string;
  shared: boolean;
}

/** Looks up owners for the guard (provided by the host app, backed by in-memory catalogues and caches). */
export interface OwnerLookup {
  ownerOf(param: Exclude<OwnedParam, 'workspace_id'>, id: string): Promise<Owner | null>;
}
export const OWNER_LOOKUP = Symbol('OWNER_LOOKUP');

const GLOBAL_ONLY = 'runnerhost:global-only';
/** Host-wide admin routes (plugins, runners, built-in tools, creating workspaces): global admin keys only. */
export const GlobalAdminOnly = () => SetMetadata(GLOBAL_ONLY, true);
export const GLOBAL_ONLY_KEY = GLOBAL_ONLY;

/** Whether the caller may see `workspace` (a global key sees all). */
export function canSee(p: Pick<Principal, 'workspaces'>, workspace: string | null): boolean {
  return p.workspaces === null || p.workspaces.includes(workspace ?? DEFAULT_WORKSPACE);
}

/**
 * The workspace a write by the caller goes to (docs/tenancy.md#keys): the one named (it must be
 * the caller's: 403 naming `field` otherwise), else the caller's only workspace, else `default`
 * for a global key; a key of several workspaces must name one. `null` names none, as absent does
 * (an admin body's optional `workspace_id: null`: docs/api.md, null in admin bodies).
 */
export function targetWorkspace(
  p: Pick<Principal, 'workspaces'>,
  named: string | null | undefined,
  field = 'workspace_id',
): string {
  if (named !== undefined && named !== null) {
    if (!canSee(p, named)) {
      throw new DomainError('unauthorized', `${field}: ${named} is not a workspace of this API key`, { field });
    }
    return named;
  }
  if (p.workspaces === null) {
    return DEFAULT_WORKSPACE;
  }
  if (p.workspaces.length === 1) {
    return p.workspaces[0];
  }
  throw new DomainError('invalid_argument', `${field}: required, this API key acts in several workspaces`, { field });
}
