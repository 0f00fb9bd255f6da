import { ownedWhere } from './owned-where';
import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { MoreThan, Repository } from 'typeorm';
import { ModelEntity, ModelUsageEntity } from '../entities';
import { HotStore } from '../hot/hot-store';
import { modelUsageUnit, type NewModelUsage } from '../hot/run-units';
import type { RunLease } from '../hot/run-fence';

export type { NewModelUsage };

/** The model registry (`models`) and host-side metering (`model_usage`). */
@Injectable()
export class ModelsRepository {
  constructor(
    @InjectRepository(ModelEntity) private readonly models: Repository<ModelEntity>,
    @InjectRepository(ModelUsageEntity) private readonly usage: Repository<ModelUsageEntity>,
    private readonly hot: HotStore,
  ) {}

  /** Inserts a new model; fails (never overwrites) when the id exists. */
  async insert(model: ModelEntity): Promise<void> {
    await this.models.insert(model);
  }

  async get(modelId: string): Promise<ModelEntity | null> {
    return this.models.findOne({ where: { model_id: modelId } });
  }

  async all(): Promise<ModelEntity[]> {
    return this.models.find({ order: { model_id: 'ASC' } });
  }

  /** Models ordered by id, after `afterId`, at most `limit`; of `scope`'s workspaces or shared (null: all). */
  async page(afterId: string | null, limit: number, scope: readonly string[] | null = null): Promise<ModelEntity[]> {
    return this.models.find({
      where: ownedWhere<ModelEntity>(afterId ? { model_id: MoreThan(afterId) } : {}, scope),
      order: { model_id: 'ASC' },
      take: limit,
    });
  }

  /** Replaces every field but the id and created_at; false when the model does not exist. */
  async update(model: ModelEntity): Promise<boolean> {
    const { model_id, created_at: _created, ...fields } = model;
    const r = await this.models.update({ model_id }, fields);
    return (r.affected ?? 0) > 0;
  }

  async delete(modelId: string): Promise<boolean> {
    const r = await this.models.delete({ model_id: modelId });
    return (r.affected ?? 0) > 0;
  }

  /**
   * Through the one writer: a metered call is a hot-path write like the run's audit rows, fenced
   * by the run's lease when given (FencedError: docs/scale-out.md#fenced-host-api-writes).
   */
  recordUsage(row: NewModelUsage, lease: RunLease | null = null): Promise<void> {
    return this.hot.write(() => modelUsageUnit(row, lease));
  }

  async usageOfRun(runId: string): Promise<ModelUsageEntity[]> {
    return this.usage.find({ where: { run_id: runId }, order: { id: 'ASC' } });
  }
}
