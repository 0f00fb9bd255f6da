import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository } from 'typeorm';
import { WorkspaceEntity } from '../entities';
import { SQL } from '../hot/hot-sql';

/** What a workspace uses now (docs/tenancy.md#quotas). */
export interface WorkspaceUsageCounts {
  active_runs: number;
  queued_steering_items: number;
  storage_bytes: number;
  model_tokens_today: number;
}

/** The tables whose rows name their workspace directly (a workspace is deleted only when none do). */
const OWNED = ['agents', 'models', 'tool_sources', 'knowledge_bases'] as const;

@Injectable()
export class WorkspacesRepository {
  constructor(
    @InjectRepository(WorkspaceEntity) private readonly repo: Repository<WorkspaceEntity>,
    @InjectDataSource() private readonly db: DataSource,
  ) {}

  private get pg(): boolean {
    return this.db.options.type === 'postgres';
  }

  async all(): Promise<WorkspaceEntity[]> {
    return this.repo.find({ order: { workspace_id: 'ASC' } });
  }

  async get(id: string): Promise<WorkspaceEntity | null> {
    return this.repo.findOne({ where: { workspace_id: id } });
  }

  /** Inserts; false when the id exists. */
  async insert(w: WorkspaceEntity): Promise<boolean> {
    if (await this.get(w.workspace_id)) {
      return false;
    }
    await this.repo.insert(w);
    return true;
  }

  async update(id: string, fields: Partial<Pick<WorkspaceEntity, 'name' | 'quotas' | 'updated_at'>>): Promise<boolean> {
    const r = await this.repo.update({ workspace_id: id }, fields);
    return (r.affected ?? 0) > 0;
  }

  async delete(id: string): Promise<boolean> {
    const r = await this.repo.delete({ workspace_id: id });
    return (r.affected ?? 0) > 0;
  }

  /** The first table that still has rows of the workspace (agents, models, tool sources, knowledge bases), or null. */
  async ownedBy(id: string): Promise<string | null> {
    const p = this.pg ? '$1' : '?';
    for (const table of OWNED) {
      const r = await this.db.query<unknown[]>(`SELECT 1 AS x FROM "${table}" WHERE "workspace_id" = ${p} LIMIT 1`, [
        id,
      ]);
      if (r.length > 0) {
        return table;
      }
    }
    return null;
  }

  /**
   * Current usage: running runs, queued steering items, bytes stored by its runs (its workspace
   * area, its plugin areas, its agents' binding areas: docs/tenancy.md#storage), model tokens
   * metered since `dayStart`. Plugin storage of the default workspace keeps its pre-tenancy owner
   * (the plain plugin id) and is not counted.
   */
  async usage(id: string, dayStart: number): Promise<WorkspaceUsageCounts> {
    const p = (n: number) => (this.pg ? `$${n}` : '?');
    const num = (rows: unknown): number => Number((rows as { n: string | number | null }[])[0]?.n ?? 0);
    const active = num(
      // The admission unit's count of max_active_runs (hot-sql.ts runningOfWorkspace): every process's.
      await this.db.query(SQL.runningOfWorkspace[this.pg ? 'pg' : 'sqlite'], [id, id]),
    );
    const queued = num(
      await this.db.query(
        `SELECT COUNT(*) AS n FROM "steering_items" WHERE "workspace_id" = ${p(1)} AND ("state" = 'queued' OR "dispatch" = 'waiting')`,
        [id],
      ),
    );
    const storage = num(
      await this.db.query(
        `SELECT COALESCE(SUM("size"), 0) AS n FROM "storage_entries"
          WHERE "owner_key" = ${p(1)} OR "owner_key" LIKE ${p(2)}
            OR "owner_key" IN (SELECT 'binding:' || a."agent_id" FROM "agents" a WHERE a."workspace_id" = ${p(3)})`,
        [`workspace:${id}`, `plugin:w/${id}/%`, id],
      ),
    );
    const tokens = num(
      await this.db.query(
        `SELECT COALESCE(SUM(u."total_tokens"), 0) AS n FROM "model_usage" u JOIN "runs" r ON r."run_id" = u."run_id"
          WHERE r."workspace_id" = ${p(1)} AND u."created_at" >= ${p(2)}`,
        [id, dayStart],
      ),
    );
    return { active_runs: active, queued_steering_items: queued, storage_bytes: storage, model_tokens_today: tokens };
  }
}
