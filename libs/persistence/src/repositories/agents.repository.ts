import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, MoreThan, Repository, type FindOptionsWhere } from 'typeorm';
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

  /** Agents ordered by id, after `afterId`, at most `limit`, of the workspaces in `scope` (null: all). */
  async page(afterId: string | null, limit: number, scope: readonly string[] | null = null): Promise<AgentEntity[]> {
    const where: FindOptionsWhere<AgentEntity> = {};
    if (afterId) {
      where.agent_id = MoreThan(afterId);
    }
    if (scope !== null) {
      where.workspace_id = In([...scope]);
    }
    return this.repo.find({
      where,
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
