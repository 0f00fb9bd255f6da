import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import type { CatalogTool, GrantedTool } from '@libs/authz';
import { ToolsRepository, type JsonObject, type ToolSourceEntity } from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import { BUILTINS } from './builtin-tools';
import { isLostSession } from './mcp-call';
import { MAX_LISTED_TOOLS, McpClientPool } from './mcp-client-pool';
import { SOURCE_OF, parseSource, type HttpToolSpec, type McpSpec } from './tool-config';
import { catalogMetadata, mcpMetadata } from './tool-metadata';
import type { ToolTarget } from './tool-target';
import { nameTools, type ListedTool, type Naming } from './tool-naming';

/** The row of `tool_sources` that holds which built-ins are on (absent: the defaults). */
const BUILTIN_ROW = 'builtin';

export type { ToolTarget } from './tool-target';

/**
 * The tool registry: tool sources, the tools each lists (named by the collision rule, stored in
 * `tools`), the built-ins that are on, the catalogue snapshots are built from, and the lookup of
 * a granted tool's exact implementation.
 */
@Injectable()
export class ToolRegistryService implements OnApplicationBootstrap {
  private readonly logger = new Logger('ToolRegistry');
  private readonly relisting = new Map<string, Promise<void>>();
  private readonly skipped = new Map<string, Naming['skipped']>();
  private builtinCache: Set<string> | null = null;
  private writes: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly repo: ToolsRepository,
    private readonly pool: McpClientPool,
  ) {
    pool.onToolsChanged = (sourceId) =>
      void this.relist(sourceId).catch((e: unknown) => this.logger.warn(`re-listing ${sourceId}: ${String(e)}`));
  }

  /** Connects the enabled MCP sources in the background (their stored listings serve until then). */
  async onApplicationBootstrap(): Promise<void> {
    for (const s of await this.repo.sources()) {
      if (s.enabled && s.kind.startsWith('mcp_')) {
        this.relist(s.source_id).catch((e: unknown) => this.logger.warn(`MCP source ${s.source_id}: ${String(e)}`));
      }
    }
  }

  /** Lists a source's tools again and stores them (one listing at a time per source). */
  relist(sourceId: string): Promise<void> {
    const inflight = this.relisting.get(sourceId);
    if (inflight) {
      return inflight;
    }
    const p = this.listAndStore(sourceId).finally(() => this.relisting.delete(sourceId));
    this.relisting.set(sourceId, p);
    return p;
  }

  /** Waits for a listing in flight (before a change that should not race it). */
  async settle(sourceId: string): Promise<void> {
    await this.relisting.get(sourceId)?.catch(() => undefined);
  }

  skippedTools(sourceId: string): Naming['skipped'] {
    return this.skipped.get(sourceId) ?? [];
  }

  /** Removes a source's tools from the catalogue (source disabled or deleted). */
  async clear(sourceId: string): Promise<void> {
    this.skipped.delete(sourceId);
    await this.store(sourceId, []);
  }

  async enabledBuiltins(): Promise<Set<string>> {
    if (!this.builtinCache) {
      const row = await this.repo.source(BUILTIN_ROW);
      const stored = row?.config.enabled;
      this.builtinCache = Array.isArray(stored)
        ? new Set(stored.filter((n): n is string => typeof n === 'string'))
        : new Set([...BUILTINS.values()].filter((b) => b.enabledByDefault).map((b) => b.name));
    }
    return this.builtinCache;
  }

  async setBuiltin(name: string, enabled: boolean): Promise<void> {
    if (!BUILTINS.has(name)) {
      throw new DomainError('not_found', `built-in tool ${name} does not exist`, { tool_name: name });
    }
    await this.serial(async () => {
      const names = new Set(await this.enabledBuiltins());
      if (enabled) {
        names.add(name);
      } else {
        names.delete(name);
      }
      const config: JsonObject = { enabled: [...names].sort() };
      const now = Date.now();
      if (!(await this.repo.updateSource(BUILTIN_ROW, { config, updated_at: now }))) {
        await this.repo.insertSource({
          // The built-ins are the host's own: every workspace's runs may be granted them.
          workspace_id: 'default',
          shared: true,
          source_id: BUILTIN_ROW,
          kind: 'builtin',
          config,
          enabled: true,
          created_at: now,
          updated_at: now,
        });
      }
      this.builtinCache = names;
    });
  }

  /** The catalogue: enabled built-ins, then every listed tool of the enabled sources. */
  async catalog(): Promise<CatalogTool[]> {
    const [rows, builtins, sources] = await Promise.all([
      this.repo.tools(),
      this.enabledBuiltins(),
      this.repo.sources(),
    ]);
    // docs/tenancy.md#resources: a tool belongs to its source's workspace.
    const owner = new Map(sources.map((s) => [s.source_id, { workspace_id: s.workspace_id, shared: s.shared }]));
    return [
      ...[...BUILTINS.values()]
        .filter((b) => builtins.has(b.name))
        .map((b) => ({
          tool_name: b.name,
          description: b.description,
          parameters: b.parameters,
          source: 'builtin',
          source_id: null,
        })),
      ...rows.map((r) => ({
        tool_name: r.tool_name,
        description: r.description,
        parameters: r.parameters,
        source: r.source,
        source_id: r.source_id,
        ...catalogMetadata(r.metadata),
        ...(owner.get(r.source_id) ?? { workspace_id: 'default', shared: false }),
      })),
    ];
  }

  /**
   * The implementation of a granted tool: the tool of that name must still come from the frozen
   * `{source, source_id}` — removed, disabled or now served by another source is not_found,
   * never another tool.
   */
  async resolve(granted: GrantedTool): Promise<ToolTarget> {
    const gone = (why: string) =>
      new DomainError('not_found', `tool ${granted.tool_name} is not available: ${why}`, {
        tool_name: granted.tool_name,
      });
    if (granted.source === 'builtin') {
      const tool = BUILTINS.get(granted.tool_name);
      if (!tool || !(await this.enabledBuiltins()).has(tool.name)) {
        throw gone('the built-in tool is switched off');
      }
      return { kind: 'builtin', tool };
    }
    const row = await this.repo.tool(granted.tool_name);
    if (!row) {
      throw gone(`it is no longer listed by ${granted.source} source ${granted.source_id}`);
    }
    if (row.source !== granted.source || row.source_id !== granted.source_id) {
      throw gone(`the name now belongs to ${row.source} source ${row.source_id}, not the one granted to this run`);
    }
    const source = await this.repo.source(row.source_id);
    if (!source?.enabled) {
      throw gone(`source ${row.source_id} is disabled or removed`);
    }
    const spec = parseSource(source.kind, source.config);
    if (spec.kind === 'http') {
      const http = spec.config.tools.find((t) => t.name === row.source_tool_name);
      if (!http) {
        throw gone(`source ${row.source_id} no longer defines it`);
      }
      return { kind: 'http', row, sourceId: source.source_id, spec, http };
    }
    return { kind: 'mcp', row, sourceId: source.source_id, spec };
  }

  private async listAndStore(sourceId: string): Promise<void> {
    const source = await this.repo.source(sourceId);
    if (!source || source.kind === 'builtin') {
      return;
    }
    if (!source.enabled) {
      return this.clear(sourceId);
    }
    const spec = parseSource(source.kind, source.config);
    const { listed, overCap } =
      spec.kind === 'http'
        ? { listed: httpListing(spec.config.tools), overCap: [] }
        : await this.mcpListing(source, spec);
    try {
      await this.store(sourceId, listed, SOURCE_OF[spec.kind], overCap);
    } catch (e) {
      // Shown on the source (last_error), not only logged: a source whose tools could not be
      // stored must not look connected with an empty list.
      this.pool.recordError(sourceId, `storing ${listed.length} listed tools failed: ${(e as Error).message}`);
      throw e;
    }
    this.pool.clearError(sourceId);
  }

  /** The server's tools; a listing on an HTTP session the server forgot is made once more on a new one. */
  private async mcpListing(
    source: ToolSourceEntity,
    spec: McpSpec,
  ): Promise<{ listed: ListedTool[]; overCap: Naming['skipped'] }> {
    for (let attempt = 0; ; attempt++) {
      let client: Awaited<ReturnType<McpClientPool['acquire']>>['client'] | undefined;
      try {
        client = (await this.pool.acquire(source.source_id, spec)).client;
        const { tools, beyondCap, unread } = await this.pool.listTools(client);
        const reason = `the source lists more than ${MAX_LISTED_TOOLS} tools; its first ${MAX_LISTED_TOOLS} are kept`;
        return {
          listed: tools.map((t) => ({
            name: t.name,
            description: t.description ?? t.title ?? '',
            parameters: t.inputSchema,
            metadata: mcpMetadata(t),
          })),
          overCap: [
            ...beyondCap.map((name) => ({ name, reason })),
            ...(unread ? [{ name: '', reason: `${reason}; further pages of tools were not read` }] : []),
          ],
        };
      } catch (e) {
        if (client) {
          this.pool.invalidate(source.source_id, client);
          if (attempt === 0 && isLostSession(e, true)) {
            continue;
          }
          this.pool.recordError(source.source_id, `listing tools failed: ${(e as Error).message}`);
        }
        throw e;
      }
    }
  }

  private store(
    sourceId: string,
    listed: ListedTool[],
    source = 'mcp',
    overCap: Naming['skipped'] = [],
  ): Promise<void> {
    return this.serial(async () => {
      let naming: Naming = { named: [], skipped: [] };
      const now = Date.now();
      await this.repo.replaceTools(sourceId, (taken) => {
        naming = nameTools(sourceId, listed, taken, new Set(BUILTINS.keys()));
        return naming.named.map((t) => ({
          tool_name: t.tool_name,
          source_tool_name: t.name,
          source,
          source_id: sourceId,
          description: t.description,
          parameters: t.parameters as JsonObject,
          metadata: (t.metadata ?? {}) as JsonObject,
          updated_at: now,
        }));
      });
      this.skipped.set(sourceId, [...naming.skipped, ...overCap]);
      for (const s of naming.skipped) {
        this.logger.warn(`source ${sourceId}: tool "${s.name}" left out: ${s.reason}`);
      }
      if (overCap.length > 0) {
        this.logger.warn(`source ${sourceId}: ${overCap.length} tools left out: ${overCap[0].reason}`);
      }
    });
  }

  /** Registry writes one at a time, so two listings never pick the same free name. */
  private serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.writes.then(work);
    this.writes = next.catch(() => undefined);
    return next;
  }
}

function httpListing(tools: HttpToolSpec[]): ListedTool[] {
  return tools.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters }));
}
