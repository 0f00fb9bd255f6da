import { Column, Entity, PrimaryColumn } from 'typeorm';
import { epochMs } from './columns';

@Entity('plugins')
export class PluginEntity {
  /** `author/name` */
  @PrimaryColumn({ type: 'varchar', length: 130 })
  plugin_id!: string;

  @Column({ type: 'varchar', length: 64 })
  author!: string;

  @Column({ type: 'varchar', length: 64 })
  name!: string;

  @Column({ type: 'varchar', length: 64, unique: true })
  token_hash!: string;

  @Column({ type: 'varchar', length: 16 })
  token_prefix!: string;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;

  @Column({ type: 'bigint', transformer: epochMs })
  token_issued_at!: number;
}
