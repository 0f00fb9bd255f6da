import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { epochMs, type JsonObject } from './columns';

/** Append-only log of inbound events (and later steering transitions), redacted. `id` is the cursor. */
@Entity('event_log')
@Index('idx_event_log_conversation', ['conversation_id', 'id'])
@Index('idx_event_log_scope', ['agent_id', 'conversation_id', 'id'])
@Index('idx_event_log_event', ['event_id'])
@Index('idx_event_log_created', ['created_at'])
export class EventLogEntity {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 255 })
  event_id!: string;

  @Column({ type: 'varchar', length: 128 })
  event_type!: string;

  @Column({ type: 'bigint', nullable: true, transformer: epochMs })
  event_time!: number | null;

  @Column({ type: 'varchar', length: 32 })
  source!: string;

  @Column({ type: 'varchar', length: 128 })
  agent_id!: string;

  @Column({ type: 'varchar', length: 255, nullable: true })
  conversation_id!: string | null;

  @Column({ type: 'varchar', length: 255, nullable: true })
  thread_id!: string | null;

  @Column({ type: 'varchar', length: 255, nullable: true })
  bot_id!: string | null;

  @Column({ type: 'varchar', length: 255, nullable: true })
  workspace_id!: string | null;

  @Column({ type: 'varchar', length: 64, nullable: true })
  actor_type!: string | null;

  @Column({ type: 'varchar', length: 255, nullable: true })
  actor_id!: string | null;

  @Column({ type: 'varchar', length: 255, nullable: true })
  actor_name!: string | null;

  @Column({ type: 'varchar', length: 64, nullable: true })
  subject_type!: string | null;

  @Column({ type: 'varchar', length: 255, nullable: true })
  subject_id!: string | null;

  @Column({ type: 'text' })
  input_summary!: string;

  @Column({ type: 'varchar', length: 64, nullable: true })
  run_id!: string | null;

  @Column({ type: 'varchar', length: 200, nullable: true })
  runner_id!: string | null;

  @Column({ type: 'simple-json' })
  metadata!: JsonObject;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;
}
