import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { PluginEntity, RunnerEntity } from '../entities';
import { Transactions } from '../transactions';

@Injectable()
export class PluginsRepository {
  constructor(
    @InjectRepository(PluginEntity) private readonly plugins: Repository<PluginEntity>,
    @InjectRepository(RunnerEntity) private readonly runners: Repository<RunnerEntity>,
    private readonly tx: Transactions,
  ) {}

  /** Inserts a new plugin; fails (never overwrites) when it is already registered. */
  async create(plugin: PluginEntity): Promise<PluginEntity> {
    await this.plugins.insert(plugin);
    return plugin;
  }

  async get(pluginId: string): Promise<PluginEntity | null> {
    return this.plugins.findOne({ where: { plugin_id: pluginId } });
  }

  async findByTokenHash(hash: string): Promise<PluginEntity | null> {
    return this.plugins.findOne({ where: { token_hash: hash } });
  }

  async list(): Promise<PluginEntity[]> {
    return this.plugins.find({ order: { plugin_id: 'ASC' } });
  }

  async replaceToken(pluginId: string, hash: string, prefix: string, at: number): Promise<void> {
    await this.plugins.update({ plugin_id: pluginId }, { token_hash: hash, token_prefix: prefix, token_issued_at: at });
  }

  async delete(pluginId: string): Promise<boolean> {
    return this.tx.run(async (m) => {
      await m.delete(RunnerEntity, { plugin_id: pluginId });
      const r = await m.delete(PluginEntity, { plugin_id: pluginId });
      return (r.affected ?? 0) > 0;
    });
  }

  /** Records the runners a plugin announced (its manifests as accepted). */
  async saveRunners(runners: RunnerEntity[]): Promise<void> {
    if (runners.length > 0) {
      await this.runners.save(runners.map((r) => this.runners.create(r)));
    }
  }

  async listRunners(): Promise<RunnerEntity[]> {
    return this.runners.find({ order: { runner_id: 'ASC' } });
  }

  async getRunner(runnerId: string): Promise<RunnerEntity | null> {
    return this.runners.findOne({ where: { runner_id: runnerId } });
  }
}
