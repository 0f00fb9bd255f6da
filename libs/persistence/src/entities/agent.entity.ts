import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { epochMs, type JsonObject } from './columns';

@Entity('agents')
@Index('idx_agents_workspace', ['workspace_id'])
export class AgentEntity {
  @PrimaryColumn({ type: 'varchar', length: 128 })
  agent_id!: string;

  /** The owning workspace (docs/tenancy.md). */
  @Column({ type: 'varchar', length: 64, default: 'default' })
  workspace_id!: string;

  @Column({ type: 'varchar', length: 200 })
  runner_id!: string;

  @Column({ type: 'varchar', length: 1000, default: '' })
  description!: string;

  @Column({ type: 'simple-json' })
  runner_config!: JsonObject;

  @Column({ type: 'simple-json' })
  resource_policy!: JsonObject;

  @Column({ type: 'simple-json' })
  state_policy!: JsonObject;

  @Column({ type: 'simple-json' })
  delivery_policy!: JsonObject;

  @Column({ type: 'simple-json' })
  concurrency_policy!: JsonObject;

  @Column({ type: 'integer', default: 1 })
  version!: number;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;

  @Column({ type: 'bigint', transformer: epochMs })
  updated_at!: number;
}
