import { Column, Entity, PrimaryColumn } from 'typeorm';
import { epochMs, type JsonObject } from './columns';

/** The last accepted manifest of each plugin runner, kept across disconnects and restarts. */
@Entity('runners')
export class RunnerEntity {
  @PrimaryColumn({ type: 'varchar', length: 200 })
  runner_id!: string;

  @Column({ type: 'varchar', length: 130 })
  plugin_id!: string;

  @Column({ type: 'varchar', length: 64 })
  name!: string;

  @Column({ type: 'simple-json' })
  manifest!: JsonObject;

  @Column({ type: 'bigint', transformer: epochMs })
  last_seen_at!: number;
}
