import { Column, Entity, Index, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import { epochMs, type JsonObject } from './columns';

/** A registered model: an OpenAI-compatible chat endpoint or a rerank endpoint. */
@Entity('models')
@Index('idx_models_workspace', ['workspace_id'])
export class ModelEntity {
  @PrimaryColumn({ type: 'varchar', length: 128 })
  model_id!: string;

  /** The owning workspace (docs/tenancy.md). */
  @Column({ type: 'varchar', length: 64, default: 'default' })
  workspace_id!: string;

  /** Visible to the runs of every workspace, not only its own (docs/tenancy.md#resources). */
  @Column({ type: 'boolean', default: false })
  shared!: boolean;

  /** `chat` or `rerank`. */
  @Column({ type: 'varchar', length: 16 })
  kind!: string;

  @Column({ type: 'varchar', length: 64 })
  provider!: string;

  @Column({ type: 'varchar', length: 1000 })
  base_url!: string;

  /** Name of the environment variable holding the API key; the key itself is never stored. */
  @Column({ type: 'varchar', length: 128, nullable: true })
  api_key_env!: string | null;

  @Column({ type: 'varchar', length: 255 })
  model_name!: string;

  @Column({ type: 'integer', nullable: true })
  context_window!: number | null;

  @Column({ type: 'integer', nullable: true })
  max_output_tokens!: number | null;

  /** {tool_calling, vision, streaming} */
  @Column({ type: 'simple-json' })
  abilities!: JsonObject;

  /** js-tiktoken encoding name; null = no known tokenizer (count_tokens fails closed). */
  @Column({ type: 'varchar', length: 64, nullable: true })
  tokenizer!: string | null;

  @Column({ type: 'simple-json' })
  extra_args!: JsonObject;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;

  @Column({ type: 'bigint', transformer: epochMs })
  updated_at!: number;
}

/** Host-side metering: one row per proxied model call, whatever the runner reports. */
@Entity('model_usage')
@Index('idx_model_usage_run', ['run_id'])
export class ModelUsageEntity {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 64 })
  run_id!: string;

  @Column({ type: 'varchar', length: 128 })
  model_id!: string;

  @Column({ type: 'varchar', length: 32 })
  operation!: string;

  @Column({ type: 'integer', nullable: true })
  prompt_tokens!: number | null;

  @Column({ type: 'integer', nullable: true })
  completion_tokens!: number | null;

  @Column({ type: 'integer', nullable: true })
  total_tokens!: number | null;

  /** False when the provider reported no usage for the call. */
  @Column({ type: 'boolean' })
  complete!: boolean;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;
}
