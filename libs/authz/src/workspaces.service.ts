import { Injectable, type OnApplicationBootstrap } from '@nestjs/common';
import { DEFAULT_WORKSPACE, WorkspacesRepository, type JsonObject, type WorkspaceEntity } from '@libs/persistence';
import { DomainError } from '@libs/protocol';

/** Per-workspace limits (docs/tenancy.md#quotas); an absent one is unlimited. */
export interface WorkspaceQuotas {
  /** Runs admitted per second, sustained, and how many may come at once (`runs_burst`, default = rate). */
  runs_per_second?: number;
  runs_burst?: number;
  /** Runs running at the same time. */
  max_active_runs?: number;
  /** Follow-ups waiting (steered, not yet pulled, or queued) at the same time. */
  max_steering_queue?: number;
  /** Bytes held in storage by the workspace's runs (all areas). */
  max_storage_bytes?: number;
  /** Model tokens metered by the host per UTC day. */
  max_model_tokens_per_day?: number;
}

export const QUOTA_NAMES = [
  'runs_per_second',
  'runs_burst',
  'max_active_runs',
  'max_steering_queue',
  'max_storage_bytes',
  'max_model_tokens_per_day',
] as const satisfies readonly (keyof WorkspaceQuotas)[];

export interface WorkspaceView {
  workspace_id: string;
  name: string;
  quotas: WorkspaceQuotas;
  created_at: string;
  updated_at: string;
}

export interface WorkspaceInput {
  name?: string;
  quotas?: Record<string, unknown>;
}

const ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;

function view(w: WorkspaceEntity): WorkspaceView {
  return {
    workspace_id: w.workspace_id,
    name: w.name,
    quotas: w.quotas,
    created_at: new Date(w.created_at).toISOString(),
    updated_at: new Date(w.updated_at).toISOString(),
  };
}

/** Checks quotas field by field: each a positive integer (or absent / null: unlimited). */
export function parseQuotas(raw: unknown): WorkspaceQuotas {
  if (raw === undefined || raw === null) {
    return {};
  }
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    throw new DomainError('invalid_argument', 'quotas: must be an object', { field: 'quotas' });
  }
  const out: WorkspaceQuotas = {};
  for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
    if (!(QUOTA_NAMES as readonly string[]).includes(k)) {
      throw new DomainError('invalid_argument', `quotas.${k}: unknown quota (one of ${QUOTA_NAMES.join(', ')})`, {
        field: `quotas.${k}`,
      });
    }
    if (v === null) {
      continue;
    }
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
      throw new DomainError('invalid_argument', `quotas.${k}: must be a positive integer or null`, {
        field: `quotas.${k}`,
      });
    }
    out[k as keyof WorkspaceQuotas] = v;
  }
  return out;
}

/**
 * The workspaces (docs/tenancy.md), held in memory: admission and the host API ask whether a
 * workspace exists and what its quotas are on every call, so both answers are map lookups; every
 * write goes through here and refreshes the map.
 */
@Injectable()
export class WorkspacesService implements OnApplicationBootstrap {
  private byId = new Map<string, WorkspaceEntity>();
  private readonly listeners = new Set<(id: string) => void>();

  constructor(private readonly repo: WorkspacesRepository) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.reload();
  }

  private async reload(): Promise<void> {
    this.byId = new Map((await this.repo.all()).map((w) => [w.workspace_id, w]));
  }

  /** Called with a workspace's id when its quotas change or it is deleted. */
  onChange(listener: (id: string) => void): void {
    this.listeners.add(listener);
  }

  exists(id: string): boolean {
    return this.byId.has(id);
  }

  quotas(id: string): WorkspaceQuotas {
    return this.byId.get(id)?.quotas ?? {};
  }

  /** Workspaces in `scope` (null: all). */
  list(scope: readonly string[] | null): WorkspaceView[] {
    return [...this.byId.values()].filter((w) => scope === null || scope.includes(w.workspace_id)).map(view);
  }

  /** The workspace, when in `scope`; 404 otherwise (a foreign id reads like a missing one). */
  get(id: string, scope: readonly string[] | null): WorkspaceView {
    const w = this.byId.get(id);
    if (!w || (scope !== null && !scope.includes(id))) {
      throw new DomainError('not_found', `workspace ${id} not found`, { workspace_id: id });
    }
    return view(w);
  }

  async create(id: string, input: WorkspaceInput): Promise<WorkspaceView> {
    if (typeof id !== 'string' || !ID.test(id)) {
      throw new DomainError(
        'invalid_argument',
        'workspace_id: must be 1-64 lowercase letters, digits, "_" or "-", starting with a letter or digit',
        { field: 'workspace_id' },
      );
    }
    const name = this.name(input.name ?? id);
    const quotas = parseQuotas(input.quotas);
    const now = Date.now();
    const row: WorkspaceEntity = {
      workspace_id: id,
      name,
      quotas: quotas as JsonObject,
      created_at: now,
      updated_at: now,
    };
    if (!(await this.repo.insert(row))) {
      throw new DomainError('conflict', `workspace ${id} already exists`, { workspace_id: id });
    }
    await this.reload();
    return view(row);
  }

  /** Replaces name and quotas (absent: kept). */
  async update(id: string, input: WorkspaceInput, scope: readonly string[] | null): Promise<WorkspaceView> {
    this.get(id, scope);
    const fields: { name?: string; quotas?: JsonObject; updated_at: number } = { updated_at: Date.now() };
    if (input.name !== undefined) {
      fields.name = this.name(input.name);
    }
    if (input.quotas !== undefined) {
      fields.quotas = parseQuotas(input.quotas) as JsonObject;
    }
    await this.repo.update(id, fields);
    await this.reload();
    this.changed(id);
    return this.get(id, scope);
  }

  /** Deletes an empty workspace (not `default`); 409 naming what it still owns. */
  async delete(id: string): Promise<void> {
    this.get(id, null);
    if (id === DEFAULT_WORKSPACE) {
      throw new DomainError('conflict', 'the default workspace cannot be deleted', { workspace_id: id });
    }
    const owned = await this.repo.ownedBy(id);
    if (owned) {
      throw new DomainError('conflict', `workspace ${id} still owns ${owned}; delete them first`, {
        workspace_id: id,
        owns: owned,
      });
    }
    await this.repo.delete(id);
    await this.reload();
    this.changed(id);
  }

  private name(name: unknown): string {
    if (typeof name !== 'string' || name.trim() === '' || name.length > 200) {
      throw new DomainError('invalid_argument', 'name: must be 1-200 characters', { field: 'name' });
    }
    return name;
  }

  private changed(id: string): void {
    for (const l of this.listeners) {
      l(id);
    }
  }
}
