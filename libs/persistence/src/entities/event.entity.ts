import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { epochMs, type JsonObject } from './columns';

/** Every inbound event, recorded before the answer (redacted: no base64 payloads). */
@Entity('events')
@Index('idx_events_conversation', ['conversation_id', 'received_at'])
// A key names one event: a unique partial index over keyed events the migrations create.
@Index('uq_events_idempotency_key', { synchronize: false })
export class EventEntity {
  @PrimaryColumn({ type: 'varchar', length: 255 })
  event_id!: string;

  @Column({ type: 'varchar', length: 128 })
  agent_id!: string;

  @Column({ type: 'varchar', length: 128 })
  event_type!: string;

  @Column({ type: 'varchar', length: 255, nullable: true })
  conversation_id!: string | null;

  @Column({ type: 'varchar', length: 255, nullable: true })
  thread_id!: string | null;

  @Column({ type: 'varchar', length: 255, nullable: true })
  idempotency_key!: string | null;

  /** SHA-256 of the canonical request body, to tell a replay from a conflicting reuse. */
  @Column({ type: 'varchar', length: 64 })
  body_hash!: string;

  @Column({ type: 'simple-json' })
  payload!: JsonObject;

  @Column({ type: 'varchar', length: 32 })
  disposition!: string;

  @Column({ type: 'varchar', length: 64, nullable: true })
  run_id!: string | null;

  @Column({ type: 'bigint', transformer: epochMs })
  received_at!: number;
}
