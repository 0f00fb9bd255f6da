import { DEFAULT_OWNER, type Owner } from '../owner';
import { Inject, Injectable } from '@nestjs/common';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { ToolsRepository, type ToolSourceEntity } from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import { BUILTINS } from './builtin-tools';
import { McpClientPool } from './mcp-client-pool';
import {
  SOURCE_OF,
  checkSourceEnvRefs,
  isSourceKind,
  parseSource,
  validateSourceId,
  type SourceSpec,
} from './tool-config';
import { catalogMetadata } from './tool-metadata';
import { ToolRegistryService } from './tool-registry.service';

export interface ToolSourceInput {
  kind: string;
  config: Record<string, unknown>;
  enabled?: boolean;
}

/** A source as the admin API shows it: its config holds environment-variable names, never values. */
export interface ToolSourceView {
  source_id: string;
  /** The owning workspace, and whether every workspace's runs may be granted its tools (docs/tenancy.md#resources). */
  workspace_id: string;
  shared: boolean;
  kind: string;
  config: Record<string, unknown>;
  enabled: boolean;
  /** `connected`, `connecting`, `disconnected` or `error` (MCP); `ready` (HTTP); `disabled`. */
  status: string;
  last_error: string | null;
  /** The names runners see for this source's tools. */
  tools: string[];
  /** Tools the source lists that were left out (name problems), with why. */
  skipped_tools: { name: string; reason: string }[];
  created_at: string;
  updated_at: string;
}

export interface ToolView {
  tool_name: string;
  source_tool_name: string;
  description: string;
  parameters: Record<string, unknown> | null;
  source: string;
  source_id: string | null;
  kind: string;
  enabled: boolean;
  /** Its source's workspace (null: a built-in, the host's own) and sharing (docs/tenancy.md#resources). */
  workspace_id: string | null;
  shared: boolean;
  /** MCP metadata, only the keys the server gave. */
  title?: string;
  annotations?: Record<string, unknown>;
  output_schema?: Record<string, unknown>;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** Admin operations on tool sources and the tool list (`/v1/admin/tools`). */
@Injectable()
export class ToolSourcesService {
  private readonly ajv = new AjvJsonSchemaValidator();

  constructor(
    private readonly repo: ToolsRepository,
    private readonly registry: ToolRegistryService,
    private readonly pool: McpClientPool,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Registers a source and lists its tools; a server that cannot be reached still registers (status `error`). */
  async create(sourceId: string, input: ToolSourceInput, owner: Owner = DEFAULT_OWNER): Promise<ToolSourceView> {
    validateSourceId(sourceId);
    const spec = this.parse(input);
    if (await this.repo.source(sourceId)) {
      throw new DomainError('conflict', `tool source ${sourceId} already exists`, { source_id: sourceId });
    }
    const now = Date.now();
    await this.repo.insertSource({
      source_id: sourceId,
      ...owner,
      kind: spec.kind,
      config: spec.config,
      enabled: input.enabled ?? true,
      created_at: now,
      updated_at: now,
    });
    await this.registry.relist(sourceId).catch(() => undefined);
    return this.get(sourceId);
  }

  /** Replaces a source's kind, config and enabled flag; its connection is made again. */
  async replace(sourceId: string, input: ToolSourceInput): Promise<ToolSourceView> {
    await this.row(sourceId);
    const spec = this.parse(input);
    await this.registry.settle(sourceId);
    await this.repo.updateSource(sourceId, {
      kind: spec.kind,
      config: spec.config,
      enabled: input.enabled ?? true,
      updated_at: Date.now(),
    });
    await this.pool.close(sourceId);
    await this.registry.relist(sourceId).catch(() => undefined);
    return this.get(sourceId);
  }

  async remove(sourceId: string): Promise<void> {
    await this.row(sourceId);
    await this.registry.settle(sourceId);
    await this.repo.deleteSource(sourceId);
    await this.registry.clear(sourceId);
    await this.pool.close(sourceId);
  }

  /** Lists the source's tools again (reconnecting an MCP server whose connection is gone). */
  async refresh(sourceId: string): Promise<ToolSourceView> {
    const row = await this.row(sourceId);
    if (!row.enabled) {
      throw new DomainError('conflict', `tool source ${sourceId} is disabled`, { source_id: sourceId });
    }
    await this.registry.relist(sourceId).catch(() => undefined);
    return this.get(sourceId);
  }

  async get(sourceId: string): Promise<ToolSourceView> {
    const row = await this.row(sourceId);
    const names = (await this.repo.tools()).filter((t) => t.source_id === sourceId).map((t) => t.tool_name);
    return this.view(row, names);
  }

  /** Sources of `scope`'s workspaces or shared (null: all: docs/tenancy.md#isolation). */
  async list(scope: readonly string[] | null = null): Promise<ToolSourceView[]> {
    const [rows, tools] = await Promise.all([this.repo.sources(), this.repo.tools()]);
    return rows
      .filter((r) => isSourceKind(r.kind) && (scope === null || r.shared || scope.includes(r.workspace_id)))
      .map((r) =>
        this.view(
          r,
          tools.filter((t) => t.source_id === r.source_id).map((t) => t.tool_name),
        ),
      );
  }

  /** Every tool with its source: the built-ins (on or off) and every listed tool (of `scope`: see list). */
  async tools(scope: readonly string[] | null = null): Promise<ToolView[]> {
    const [rows, sources, builtins] = await Promise.all([
      this.repo.tools(),
      this.repo.sources(),
      this.registry.enabledBuiltins(),
    ]);
    const kindOf = new Map(sources.map((s) => [s.source_id, s.kind]));
    const ownerOf = new Map(sources.map((s) => [s.source_id, s]));
    const visible = (sourceId: string) => {
      const o = ownerOf.get(sourceId);
      return scope === null || (o !== undefined && (o.shared || scope.includes(o.workspace_id)));
    };
    return [
      ...[...BUILTINS.values()].map((b) => ({
        tool_name: b.name,
        source_tool_name: b.name,
        description: b.description,
        parameters: b.parameters,
        source: 'builtin',
        source_id: null,
        kind: 'builtin',
        enabled: builtins.has(b.name),
        workspace_id: null,
        shared: true,
      })),
      ...rows
        .filter((r) => visible(r.source_id))
        .map((r) => ({
          tool_name: r.tool_name,
          source_tool_name: r.source_tool_name,
          description: r.description,
          parameters: r.parameters,
          source: r.source,
          source_id: r.source_id,
          kind: kindOf.get(r.source_id) ?? r.source,
          enabled: true,
          workspace_id: ownerOf.get(r.source_id)?.workspace_id ?? 'default',
          shared: ownerOf.get(r.source_id)?.shared ?? false,
          ...catalogMetadata(r.metadata),
        })),
    ];
  }

  /** Switches a built-in tool on or off. */
  async setBuiltin(name: string, enabled: boolean): Promise<ToolView> {
    await this.registry.setBuiltin(name, enabled);
    return (await this.tools()).find((t) => t.source === 'builtin' && t.tool_name === name)!;
  }

  private parse(input: ToolSourceInput): SourceSpec {
    const spec = parseSource(input.kind, input.config);
    checkSourceEnvRefs(spec, this.config.secretEnv);
    if (spec.kind === 'http') {
      spec.config.tools.forEach((t, i) => {
        try {
          this.ajv.getValidator(t.parameters);
        } catch (e) {
          const field = `config.tools[${i}].parameters`;
          throw new DomainError('invalid_argument', `${field}: not a valid JSON schema: ${(e as Error).message}`, {
            field,
          });
        }
      });
    }
    return spec;
  }

  private async row(sourceId: string): Promise<ToolSourceEntity> {
    const row = await this.repo.source(sourceId);
    if (!row || !isSourceKind(row.kind)) {
      throw new DomainError('not_found', `tool source ${sourceId} does not exist`, { source_id: sourceId });
    }
    return row;
  }

  private view(row: ToolSourceEntity, tools: string[]): ToolSourceView {
    const mcp = SOURCE_OF[row.kind as keyof typeof SOURCE_OF] === 'mcp';
    const state = this.pool.state(row.source_id);
    const lastError = mcp && row.enabled ? this.pool.lastError(row.source_id) : null;
    const status = !row.enabled ? 'disabled' : !mcp ? 'ready' : state === 'disconnected' && lastError ? 'error' : state;
    return {
      source_id: row.source_id,
      workspace_id: row.workspace_id,
      shared: row.shared,
      kind: row.kind,
      config: row.config,
      enabled: row.enabled,
      status,
      last_error: lastError,
      tools,
      skipped_tools: this.registry.skippedTools(row.source_id),
      created_at: iso(row.created_at),
      updated_at: iso(row.updated_at),
    };
  }
}
