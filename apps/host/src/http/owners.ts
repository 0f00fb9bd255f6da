import { Injectable } from '@nestjs/common';
import type { Owner, OwnerLookup } from '@libs/auth';
import {
  DEFAULT_WORKSPACE,
  KnowledgeRepository,
  ModelsRepository,
  RunsRepository,
  ToolsRepository,
} from '@libs/persistence';
import { AdmissionCatalog } from '@libs/runs';
import { DomainError } from '@libs/protocol';

/** Run workspaces remembered at most (a run's workspace never changes; past this the map starts over). */
const RUN_CACHE_MAX = 100_000;

/**
 * Who owns an id named in a route (docs/tenancy.md#isolation), for the API key guard. Runs and
 * agents — the stream and admission paths — are answered from memory (a run's workspace is fixed
 * at admission; agents come from the admission catalogue); resources, on admin routes only, from
 * the database.
 */
@Injectable()
export class RouteOwners implements OwnerLookup {
  private readonly runs = new Map<string, string>();

  constructor(
    private readonly runRows: RunsRepository,
    private readonly catalog: AdmissionCatalog,
    private readonly models: ModelsRepository,
    private readonly knowledge: KnowledgeRepository,
    private readonly tools: ToolsRepository,
  ) {}

  async ownerOf(param: 'run_id' | 'agent_id' | 'model_id' | 'kb_id' | 'source_id', id: string): Promise<Owner | null> {
    switch (param) {
      case 'run_id':
        return this.run(id);
      case 'agent_id': {
        const agent = await this.catalog.agent(id).catch((e: unknown) => {
          if (e instanceof DomainError && e.code === 'not_found') {
            return null;
          }
          throw e;
        });
        return agent ? { workspace_id: agent.workspace_id, shared: false } : null;
      }
      case 'model_id':
        return this.owner(await this.models.get(id));
      case 'kb_id':
        return this.owner(await this.knowledge.getKnowledgeBase(id));
      case 'source_id':
        return this.owner(await this.tools.source(id));
    }
  }

  private async run(runId: string): Promise<Owner | null> {
    let ws = this.runs.get(runId);
    if (ws === undefined) {
      const row = await this.runRows.get(runId);
      if (!row) {
        return null;
      }
      ws = row.workspace_id ?? DEFAULT_WORKSPACE;
      if (this.runs.size >= RUN_CACHE_MAX) {
        this.runs.clear();
      }
      this.runs.set(runId, ws);
    }
    return { workspace_id: ws, shared: false };
  }

  private owner(row: { workspace_id: string; shared: boolean } | null): Owner | null {
    return row ? { workspace_id: row.workspace_id, shared: row.shared } : null;
  }
}
