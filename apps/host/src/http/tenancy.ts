import { Inject, Injectable } from '@nestjs/common';
import { canSee, OWNER_LOOKUP, targetWorkspace, type AuthenticatedRequest, type OwnerLookup } from '@libs/auth';
import { WorkspacesService } from '@libs/authz';
import { DomainError } from '@libs/protocol';

/**
 * The caller's workspaces on HTTP routes (docs/tenancy.md#isolation), for the controllers: where a
 * write goes, which workspace a listing reads, which rows of a listing the caller may see. Ids in
 * the route itself are checked by the API key guard.
 */
@Injectable()
export class WriteTenancy {
  constructor(
    private readonly workspaces: WorkspacesService,
    @Inject(OWNER_LOOKUP) private readonly owners: OwnerLookup,
  ) {}

  /** The caller's workspaces (null: all). */
  scope(req: AuthenticatedRequest): readonly string[] | null {
    return req.principal!.workspaces;
  }

  /** The workspace a new row goes to: named (the caller's, existing) or the caller's only one. */
  target(req: AuthenticatedRequest, named: string | null | undefined): string {
    const ws = targetWorkspace(req.principal!, named);
    if (!this.workspaces.exists(ws)) {
      throw new DomainError('invalid_argument', `workspace_id: workspace ${ws} does not exist`, {
        field: 'workspace_id',
      });
    }
    return ws;
  }

  /**
   * The workspace filter of a listing: the one named (the caller's: 403 naming `workspace_id`
   * otherwise), else every workspace for a global key, else the key's only one (a key of several
   * names one).
   */
  read(req: AuthenticatedRequest, named: string | undefined): string | undefined {
    if (named === undefined && req.principal!.workspaces === null) {
      return undefined;
    }
    return targetWorkspace(req.principal!, named);
  }

  /** The rows of runs the caller may see (a listing of run-owned rows). */
  async ofVisibleRuns<T extends { run_id: string | null }>(req: AuthenticatedRequest, rows: T[]): Promise<T[]> {
    const p = req.principal!;
    if (p.workspaces === null) {
      return rows;
    }
    const out: T[] = [];
    for (const r of rows) {
      const owner = r.run_id === null ? null : await this.owners.ownerOf('run_id', r.run_id);
      if (owner && canSee(p, owner.workspace_id)) {
        out.push(r);
      }
    }
    return out;
  }

  /** Whether the caller may see the run (its workspace is one of the caller's). */
  async seesRun(req: AuthenticatedRequest, runId: string): Promise<boolean> {
    const p = req.principal!;
    if (p.workspaces === null) {
      return true;
    }
    const owner = await this.owners.ownerOf('run_id', runId);
    return owner !== null && owner !== undefined && canSee(p, owner.workspace_id);
  }

  /** `shared`: only a global admin key shares a resource with every workspace. */
  shared(req: AuthenticatedRequest, shared: boolean | undefined): boolean {
    if (shared === true && req.principal!.workspaces !== null) {
      throw new DomainError('unauthorized', 'shared: only an admin key of every workspace shares a resource', {
        field: 'shared',
      });
    }
    return shared === true;
  }
}
