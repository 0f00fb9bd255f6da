import { Inject, Injectable } from '@nestjs/common';
import { AgentsService } from '@libs/agents';
import {
  CatalogVersions,
  RESOURCE_CATALOG,
  type CatalogKnowledgeBase,
  type CatalogModel,
  type CatalogTool,
  type ResourceCatalog,
} from '@libs/authz';
import type { AgentEntity } from '@libs/persistence';

export interface Catalog {
  models: CatalogModel[];
  tools: CatalogTool[];
  knowledge_bases: CatalogKnowledgeBase[];
}

/**
 * Tools also change without an admin call (an MCP server's `tools/list_changed`, a reconnect):
 * the resource catalogue is reloaded at least this often.
 */
const RESOURCES_TTL_MS = 1000;

/**
 * What admission reads, from memory: agents and the resource catalogue, reloaded when the
 * catalogue version moved (an admin write) — see CatalogVersions.
 */
@Injectable()
export class AdmissionCatalog {
  private agentsAt = -1;
  private readonly agentCache = new Map<string, AgentEntity>();
  private resources: { version: number; at: number; value: Promise<Catalog> } | null = null;

  constructor(
    private readonly agents: AgentsService,
    private readonly versions: CatalogVersions,
    @Inject(RESOURCE_CATALOG) private readonly catalog: ResourceCatalog,
  ) {}

  async agent(agentId: string): Promise<AgentEntity> {
    const version = this.versions.current();
    if (version !== this.agentsAt) {
      this.agentCache.clear();
      this.agentsAt = version;
    }
    const hit = this.agentCache.get(agentId);
    if (hit) {
      return hit;
    }
    const found = await this.agents.getEntity(agentId);
    if (this.versions.current() === version) {
      this.agentCache.set(agentId, found);
    }
    return found;
  }

  resourceCatalog(): Promise<Catalog> {
    const version = this.versions.current();
    const now = Date.now();
    const r = this.resources;
    if (r && r.version === version && now - r.at < RESOURCES_TTL_MS) {
      return r.value;
    }
    const value = Promise.all([this.catalog.models(), this.catalog.tools(), this.catalog.knowledgeBases()]).then(
      ([models, tools, knowledge_bases]) => ({ models, tools, knowledge_bases }),
    );
    this.resources = { version, at: now, value };
    // A failed load is not kept.
    value.catch(() => {
      if (this.resources?.value === value) {
        this.resources = null;
      }
    });
    return value;
  }
}
