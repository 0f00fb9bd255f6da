import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { IsNull, Repository } from 'typeorm';
import { ApiKeyEntity } from '../entities';

@Injectable()
export class ApiKeysRepository {
  constructor(@InjectRepository(ApiKeyEntity) private readonly repo: Repository<ApiKeyEntity>) {}

  /** Inserts a new key; fails (never overwrites) when the id or hash exists. */
  async create(key: ApiKeyEntity): Promise<ApiKeyEntity> {
    await this.repo.insert(key);
    return key;
  }

  async findActiveByHash(hash: string): Promise<ApiKeyEntity | null> {
    return this.repo.findOne({ where: { key_hash: hash, revoked_at: IsNull() } });
  }

  async get(id: string): Promise<ApiKeyEntity | null> {
    return this.repo.findOne({ where: { id } });
  }

  async list(): Promise<ApiKeyEntity[]> {
    return this.repo.find({ order: { created_at: 'ASC' } });
  }

  async countActive(role: ApiKeyEntity['role']): Promise<number> {
    return this.repo.count({ where: { role, revoked_at: IsNull() } });
  }

  async revoke(id: string, at: number): Promise<boolean> {
    const r = await this.repo.update({ id, revoked_at: IsNull() }, { revoked_at: at });
    return (r.affected ?? 0) > 0;
  }
}
