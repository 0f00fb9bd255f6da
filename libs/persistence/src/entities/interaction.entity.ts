import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { epochMs, type JsonObject } from './columns';

export type InteractionStatus = 'pending' | 'submitted' | 'expired' | 'superseded';

/**
 * One structured interaction a run requested (docs/interactions.md): `id` is the host's; the
 * runner's `interaction_id` is unique within its run. Only the SHA-256 hash of the one-time
 * callback token is kept. `pending` → `submitted` | `expired` | `superseded`, each once
 * (conditional updates). Waiting holds this row and nothing else.
 */
@Entity('interactions')
@Index('uq_interactions_run_interaction', ['run_id', 'interaction_id'], { unique: true })
@Index('uq_interactions_token', ['callback_token_hash'], { unique: true })
@Index('idx_interactions_status_expiry', ['status', 'expires_at'])
export class InteractionEntity {
  @PrimaryColumn({ type: 'varchar', length: 64 })
  id!: string;

  @Column({ type: 'varchar', length: 255 })
  interaction_id!: string;

  @Column({ type: 'varchar', length: 64 })
  run_id!: string;

  @Column({ type: 'varchar', length: 128 })
  agent_id!: string;

  @Column({ type: 'varchar', length: 200 })
  runner_id!: string;

  @Column({ type: 'varchar', length: 255, nullable: true })
  conversation_id!: string | null;

  @Column({ type: 'varchar', length: 255, nullable: true })
  thread_id!: string | null;

  @Column({ type: 'varchar', length: 255, nullable: true })
  actor_id!: string | null;

  @Column({ type: 'varchar', length: 16 })
  kind!: string;

  @Column({ type: 'varchar', length: 16 })
  status!: InteractionStatus;

  @Column({ type: 'varchar', length: 1000, nullable: true })
  status_reason!: string | null;

  /** The validated InteractionRequest (expires_at filled in). */
  @Column({ type: 'simple-json' })
  request!: JsonObject;

  /** The run's frozen delivery: surface, reply_target, and what to re-submit (actor, bot, workspace). */
  @Column({ type: 'simple-json' })
  delivery_target!: JsonObject;

  @Column({ type: 'varchar', length: 64 })
  callback_token_hash!: string;

  @Column({ type: 'varchar', length: 64, nullable: true })
  replaces_id!: string | null;

  @Column({ type: 'bigint', transformer: epochMs })
  expires_at!: number;

  @Column({ type: 'simple-json', nullable: true })
  submission!: JsonObject | null;

  @Column({ type: 'bigint', nullable: true, transformer: epochMs })
  submitted_at!: number | null;

  /** The event (and run) the submission started. */
  @Column({ type: 'varchar', length: 255, nullable: true })
  submission_event_id!: string | null;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;

  @Column({ type: 'bigint', transformer: epochMs })
  updated_at!: number;
}
