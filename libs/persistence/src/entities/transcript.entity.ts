import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { epochMs, type JsonObject } from './columns';

/**
 * The conversation's user and assistant messages. A conversation is agent + workspace +
 * conversation_id + thread_id: every read names all four (see ConversationScope). `seq` is
 * monotonic per `conversation_id` across agents and workspaces (one cursor space, so the admin
 * view can page every agent's rows of a conversation id at once).
 */
@Entity('transcript')
@Index('uq_transcript_conversation_seq', ['conversation_id', 'seq'], { unique: true })
@Index('idx_transcript_scope', ['agent_id', 'conversation_id', 'seq'])
export class TranscriptEntity {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 255 })
  conversation_id!: string;

  @Column({ type: 'varchar', length: 255, nullable: true })
  thread_id!: string | null;

  @Column({ type: 'integer' })
  seq!: number;

  @Column({ type: 'varchar', length: 16 })
  role!: string;

  @Column({ type: 'varchar', length: 16 })
  item_type!: string;

  /** Text summary (≤ 4000 characters). */
  @Column({ type: 'text' })
  content!: string;

  /** The full message, base64 payloads redacted. */
  @Column({ type: 'simple-json' })
  content_json!: JsonObject;

  @Column({ type: 'simple-json' })
  attachment_refs!: JsonObject[];

  @Column({ type: 'varchar', length: 255, nullable: true })
  event_id!: string | null;

  @Column({ type: 'varchar', length: 64, nullable: true })
  run_id!: string | null;

  @Column({ type: 'varchar', length: 128 })
  agent_id!: string;

  /** The event's workspace (null: none given); part of the conversation's key. */
  @Column({ type: 'varchar', length: 255, nullable: true })
  workspace_id!: string | null;

  @Column({ type: 'simple-json' })
  metadata!: JsonObject;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;
}
