import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { epochMs } from './columns';

/** Host-owned JSON state; `scope_key` isolates scope × agent × runner × identity. */
@Entity('state_entries')
@Index('uq_state_scope_key', ['scope_key', 'state_key'], { unique: true })
export class StateEntryEntity {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 128 })
  scope_key!: string;

  @Column({ type: 'varchar', length: 255 })
  state_key!: string;

  /** JSON text, at most 256 KiB. */
  @Column({ type: 'text' })
  value!: string;

  @Column({ type: 'bigint', transformer: epochMs })
  updated_at!: number;
}
