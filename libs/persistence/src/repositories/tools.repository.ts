import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Not, Repository } from 'typeorm';
import { ToolEntity, ToolSourceEntity } from '../entities';
import { Transactions } from '../transactions';

/** Rows per INSERT: far under both dialects' bound-parameter limits (SQLite 32,766, PostgreSQL 65,535). */
const INSERT_CHUNK = 200;

export type NewToolRow = Omit<ToolEntity, 'id'>;

/** Tool sources and the tools each last listed. */
@Injectable()
export class ToolsRepository {
  constructor(
    @InjectRepository(ToolSourceEntity) private readonly sourcesRepo: Repository<ToolSourceEntity>,
    @InjectRepository(ToolEntity) private readonly toolsRepo: Repository<ToolEntity>,
    private readonly tx: Transactions,
  ) {}

  /** Every source, oldest first (registration order decides name collisions). */
  async sources(): Promise<ToolSourceEntity[]> {
    return this.sourcesRepo.find({ order: { created_at: 'ASC', source_id: 'ASC' } });
  }

  async source(sourceId: string): Promise<ToolSourceEntity | null> {
    return this.sourcesRepo.findOne({ where: { source_id: sourceId } });
  }

  async insertSource(row: ToolSourceEntity): Promise<void> {
    await this.sourcesRepo.insert(row);
  }

  async updateSource(
    sourceId: string,
    fields: Partial<Pick<ToolSourceEntity, 'kind' | 'config' | 'enabled' | 'updated_at'>>,
  ): Promise<boolean> {
    const r = await this.sourcesRepo.update({ source_id: sourceId }, fields);
    return (r.affected ?? 0) > 0;
  }

  /** Deletes a source and its tools. */
  async deleteSource(sourceId: string): Promise<boolean> {
    return this.tx.run(async (m) => {
      await m.delete(ToolEntity, { source_id: sourceId });
      const r = await m.delete(ToolSourceEntity, { source_id: sourceId });
      return (r.affected ?? 0) > 0;
    });
  }

  /** Every listed tool, by name. */
  async tools(): Promise<ToolEntity[]> {
    return this.toolsRepo.find({ order: { tool_name: 'ASC' } });
  }

  async tool(toolName: string): Promise<ToolEntity | null> {
    return this.toolsRepo.findOne({ where: { tool_name: toolName } });
  }

  /**
   * Replaces the tools of one source in one transaction. `build` gets the names tools of other
   * sources hold and returns the source's new rows (it picks names that avoid them).
   */
  async replaceTools(sourceId: string, build: (taken: Set<string>) => NewToolRow[]): Promise<ToolEntity[]> {
    return this.tx.run(async (m) => {
      const others = await m.find(ToolEntity, { select: { tool_name: true }, where: { source_id: Not(sourceId) } });
      const rows = build(new Set(others.map((t) => t.tool_name)));
      await m.delete(ToolEntity, { source_id: sourceId });
      // In chunks, and without TypeORM's read-back of generated ids: on SQLite that read-back is
      // one `id = ? OR id = ? …` expression per insert, which fails past ~1,000 rows ("Expression
      // tree is too large"); the rows are read once below anyway.
      for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
        await m
          .createQueryBuilder()
          .insert()
          .into(ToolEntity)
          .values(rows.slice(i, i + INSERT_CHUNK))
          .updateEntity(false)
          .execute();
      }
      return m.find(ToolEntity, { where: { source_id: sourceId }, order: { tool_name: 'ASC' } });
    });
  }
}
