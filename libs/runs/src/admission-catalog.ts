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
 * catalogue version moved — a database row bumped in the same transaction as every admin write,
 * read once per admission (CatalogVersions, docs/scale-out.md#admin-writes), so a cache older than a
 * committed write is never used, whichever process made the write. A cache is tagged with the
 * version read before it was loaded: its content is at least that new.
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
  ) {
    // The wake-up of an admin write (here or at another process): drop the caches early. Only
    // memory is saved by it: every call reads the version row anyway.
    versions.onWritten(() => {
      this.agentCache.clear();
      this.resources = null;
    });
  }

  /** `since`: the `performance.now()` instant the caller's admission began (one version read per admission). */
  async agent(agentId: string, since?: number): Promise<AgentEntity> {
    const version = await this.versions.current(since);
    if (version > this.agentsAt) {
      this.agentCache.clear();
      this.agentsAt = version;
    }
    // A cache at a newer version than this call read is as good: it was loaded after that read.
    const hit = this.agentCache.get(agentId);
    if (hit) {
      return hit;
    }
    const found = await this.agents.getEntity(agentId);
    if (this.agentsAt === version) {
      this.agentCache.set(agentId, found);
    }
    return found;
  }

  /**
   * The agent as cached here, without reading the version: not confirmed (an admin write at any
   * process may have changed it). Only for reads started ahead of `agent()`'s answer, which the
   * caller takes only if `agent()` confirms the same entity (AdmissionService.readAhead).
   */
  cached(agentId: string): AgentEntity | undefined {
    return this.agentCache.get(agentId);
  }

  /** A read of the version row made by another statement, sent at or after `startedAt` (CatalogVersions.seed). */
  versionRead(startedAt: number, version: Promise<number>): void {
    this.versions.seed(startedAt, version);
  }

  async resourceCatalog(since?: number): Promise<Catalog> {
    const version = await this.versions.current(since);
    const now = Date.now();
    const r = this.resources;
    if (r && r.version >= version && now - r.at < RESOURCES_TTL_MS) {
      return r.value;
    }
    const value = Promise.all([this.catalog.models(), this.catalog.tools(), this.catalog.knowledgeBases()]).then(
      ([models, tools, knowledge_bases]) => ({ models, tools, knowledge_bases }),
    );
    if (!this.resources || this.resources.version <= version) {
      this.resources = { version, at: now, value };
    }
    // A failed load is not kept.
    value.catch(() => {
      if (this.resources?.value === value) {
        this.resources = null;
      }
    });
    return value;
  }
}
