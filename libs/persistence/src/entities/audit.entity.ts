import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { epochMs } from './columns';

/** One row per host API call, allowed or denied. Never holds payloads or secrets. */
@Entity('audit_log')
@Index('idx_audit_run', ['run_id', 'id'])
export class AuditEntity {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 64 })
  run_id!: string;

  @Column({ type: 'varchar', length: 200, nullable: true })
  runner_id!: string | null;

  @Column({ type: 'varchar', length: 130, nullable: true })
  plugin_id!: string | null;

  @Column({ type: 'varchar', length: 64 })
  action!: string;

  @Column({ type: 'varchar', length: 300, nullable: true })
  resource!: string | null;

  @Column({ type: 'varchar', length: 300, nullable: true })
  scope!: string | null;

  @Column({ type: 'varchar', length: 16 })
  outcome!: 'allowed' | 'denied' | 'failed';

  @Column({ type: 'varchar', length: 64, nullable: true })
  error_code!: string | null;

  @Column({ type: 'integer' })
  duration_us!: number;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;
}
