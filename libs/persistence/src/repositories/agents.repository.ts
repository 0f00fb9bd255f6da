import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { MoreThan, Repository } from 'typeorm';
import { AgentEntity } from '../entities';

@Injectable()
export class AgentsRepository {
  constructor(@InjectRepository(AgentEntity) private readonly repo: Repository<AgentEntity>) {}

  async insert(agent: AgentEntity): Promise<void> {
    await this.repo.insert(agent);
  }

  async get(agentId: string): Promise<AgentEntity | null> {
    return this.repo.findOne({ where: { agent_id: agentId } });
  }

  /** Agents ordered by id, after `afterId`, at most `limit`. */
  async page(afterId: string | null, limit: number): Promise<AgentEntity[]> {
    return this.repo.find({
      where: afterId ? { agent_id: MoreThan(afterId) } : {},
      order: { agent_id: 'ASC' },
      take: limit,
    });
  }

  /** Optimistic update: only when the stored version is `expectedVersion`. */
  async update(agent: AgentEntity, expectedVersion: number): Promise<boolean> {
    const { agent_id, created_at: _created, ...fields } = agent;
    const r = await this.repo.update({ agent_id, version: expectedVersion }, fields);
    return (r.affected ?? 0) > 0;
  }

  async delete(agentId: string): Promise<boolean> {
    const r = await this.repo.delete({ agent_id: agentId });
    return (r.affected ?? 0) > 0;
  }
}
