import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { epochMs, type JsonObject } from './columns';

/**
 * A follow-up that did not start a run at once (docs/conversations-and-steering.md): `kind` `steer`
 * — queued on an active run (`run_id`, `position`) until the runner pulls it (`injected`) or the
 * run ends (`dropped`, then `redispatched` as a run of its own, `next_run_id`); `queue` — waiting
 * to start as `next_run_id`. `dispatch` is `waiting` while a run of its own is due, then `started`
 * or `failed`. `id` is the arrival order of the conversation.
 */
@Entity('steering_items')
@Index('idx_steering_items_run', ['run_id', 'state', 'position'])
@Index('idx_steering_items_waiting', ['conversation_key', 'dispatch', 'id'])
@Index('idx_steering_items_dispatch', ['dispatch'])
export class SteeringItemEntity {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 800 })
  conversation_key!: string;

  @Column({ type: 'varchar', length: 128 })
  agent_id!: string;

  @Column({ type: 'varchar', length: 200 })
  runner_id!: string;

  @Column({ type: 'varchar', length: 255 })
  conversation_id!: string;

  @Column({ type: 'varchar', length: 255, nullable: true })
  thread_id!: string | null;

  @Column({ type: 'varchar', length: 255, nullable: true })
  workspace_id!: string | null;

  @Column({ type: 'varchar', length: 255, unique: true })
  event_id!: string;

  @Column({ type: 'varchar', length: 16 })
  kind!: 'steer' | 'queue';

  @Column({ type: 'varchar', length: 16 })
  state!: string;

  @Column({ type: 'varchar', length: 64, nullable: true })
  run_id!: string | null;

  @Column({ type: 'integer', nullable: true })
  position!: number | null;

  @Column({ type: 'varchar', length: 64, nullable: true })
  next_run_id!: string | null;

  @Column({ type: 'varchar', length: 16, nullable: true })
  dispatch!: string | null;

  /** The SteeringInputItem a runner pulls. */
  @Column({ type: 'simple-json' })
  item!: JsonObject;

  /** The event as submitted (unredacted: a run of its own needs the whole input). */
  @Column({ type: 'simple-json' })
  submission!: JsonObject;

  @Column({ type: 'varchar', length: 16, nullable: true })
  pull_mode!: string | null;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;

  @Column({ type: 'bigint', nullable: true, transformer: epochMs })
  injected_at!: number | null;

  @Column({ type: 'bigint', nullable: true, transformer: epochMs })
  dropped_at!: number | null;

  @Column({ type: 'bigint', nullable: true, transformer: epochMs })
  redispatched_at!: number | null;

  @Column({ type: 'bigint', nullable: true, transformer: epochMs })
  started_at!: number | null;
}
