import { Column, Entity, PrimaryColumn } from 'typeorm';
import { epochMs } from './columns';

/** What a live host process is doing: serving, or draining before it stops (docs/scale-out.md). */
export type HostProcessState = 'running' | 'draining';

/**
 * One host process on the shared database (docs/scale-out.md#process-registry): registered at
 * boot, heartbeated every PROCESS_HEARTBEAT_MS, deleted at shutdown or by the sweep of another
 * process once its heartbeat is older than the lease. The row's deletion is the death certificate:
 * a process that finds its row gone was declared dead and was replaced.
 */
@Entity('host_processes')
export class HostProcessEntity {
  /** A fresh id per process start (a restarted process never inherits its dead predecessor's row). */
  @PrimaryColumn({ type: 'varchar', length: 64 })
  id!: string;

  /** HOST_INSTANCE_ID (default hostname:pid): the name in logs and metrics. */
  @Column({ type: 'varchar', length: 128 })
  instance!: string;

  @Column({ type: 'varchar', length: 255 })
  http_address!: string;

  @Column({ type: 'varchar', length: 255 })
  grpc_address!: string;

  @Column({ type: 'varchar', length: 16 })
  state!: HostProcessState;

  /** The database's clock (never the process's): leases compare times of one clock. */
  @Column({ type: 'bigint', transformer: epochMs })
  started_at!: number;

  @Column({ type: 'bigint', transformer: epochMs })
  heartbeat_at!: number;
}
