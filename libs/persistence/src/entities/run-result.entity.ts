import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { epochMs, type JsonObject } from './columns';

/** Every accepted result of a run, in sequence order. */
@Entity('run_results')
@Index('uq_run_results_run_sequence', ['run_id', 'sequence'], { unique: true })
@Index('idx_run_results_created', ['created_at'])
export class RunResultEntity {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 64 })
  run_id!: string;

  @Column({ type: 'integer' })
  sequence!: number;

  @Column({ type: 'varchar', length: 128 })
  type!: string;

  @Column({ type: 'simple-json' })
  data!: JsonObject;

  @Column({ type: 'simple-json', nullable: true })
  usage!: JsonObject | null;

  /** `runner` for results the runner sent, `host` for the ones the host wrote (timeouts, cancels, disconnects). */
  @Column({ type: 'varchar', length: 16 })
  source!: 'runner' | 'host';

  @Column({ type: 'bigint', nullable: true, transformer: epochMs })
  timestamp!: number | null;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;
}
