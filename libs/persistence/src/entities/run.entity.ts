import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import type { RunStatus } from '@libs/protocol';
import { epochMs, type JsonObject } from './columns';

@Entity('runs')
// The runs of a conversation in id order, over runs with a conversation: a partial index the migrations create.
@Index('idx_runs_conversation', { synchronize: false })
@Index('idx_runs_status', ['status'])
@Index('idx_runs_workspace', ['workspace_id', 'id'])
@Index('idx_runs_owner_process', ['owner_process_id'])
// One running run per conversation (agent + workspace + conversation id + thread): a unique partial
// expression index the migrations create.
@Index('uq_runs_running_conversation', { synchronize: false })
// Running runs of a workspace (the max_active_runs count of admission): a partial index the migrations create.
@Index('idx_runs_running_workspace', { synchronize: false })
export class RunEntity {
  /** Internal order key (cursor for listings). */
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 64, unique: true })
  run_id!: string;

  @Column({ type: 'varchar', length: 255 })
  event_id!: string;

  @Column({ type: 'varchar', length: 128 })
  agent_id!: string;

  @Column({ type: 'varchar', length: 200 })
  runner_id!: string;

  @Column({ type: 'varchar', length: 255, nullable: true })
  conversation_id!: string | null;

  @Column({ type: 'varchar', length: 255, nullable: true })
  thread_id!: string | null;

  /** The workspace of the run's conversation (part of its key: docs/conversations-and-steering.md). */
  @Column({ type: 'varchar', length: 255, nullable: true })
  workspace_id!: string | null;

  @Column({ type: 'varchar', length: 16 })
  status!: RunStatus;

  @Column({ type: 'text', nullable: true })
  status_reason!: string | null;

  @Column({ type: 'varchar', length: 64, nullable: true })
  error_code!: string | null;

  @Column({ type: 'boolean', nullable: true })
  retryable!: boolean | null;

  /** The run context as sent to the runner (Runner Protocol v1 JSON). */
  @Column({ type: 'simple-json' })
  context!: JsonObject;

  @Column({ type: 'simple-json', nullable: true })
  usage!: JsonObject | null;

  /**
   * The run's frozen authorization snapshot is stored once per content (hot/snapshot-rows.ts):
   * the key of its shared part in `snapshots`, and the run's own keys as JSON text. The
   * repository reads the whole snapshot back (RunsRepository.authorization).
   */
  @Column({ type: 'varchar', length: 64, nullable: true })
  snapshot_hash!: string | null;

  @Column({ type: 'text', nullable: true })
  authorization_run!: string | null;

  /** The SHA-256 of the canonical JSON of the whole snapshot. */

  @Column({ type: 'varchar', length: 64, nullable: true })
  authorization_hash!: string | null;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;

  @Column({ type: 'bigint', nullable: true, transformer: epochMs })
  started_at!: number | null;

  @Column({ type: 'bigint', nullable: true, transformer: epochMs })
  finished_at!: number | null;

  @Column({ type: 'bigint', nullable: true, transformer: epochMs })
  deadline_at!: number | null;

  @Column({ type: 'bigint', nullable: true, transformer: epochMs })
  cancel_requested_at!: number | null;

  /**
   * The process that owns the running run (a `host_processes.id`; docs/scale-out.md#leases-and-fencing);
   * null while it waits or after it ended at a takeover.
   */
  @Column({ type: 'varchar', length: 64, nullable: true })
  owner_process_id!: string | null;

  /** The fence token: bumped by each claim and each takeover; every write of the run names it. */
  @Column({ type: 'integer', default: 0 })
  attempt!: number;

  /** The database time of the run's last fenced write. */
  @Column({ type: 'bigint', nullable: true, transformer: epochMs })
  last_write_at!: number | null;
}
