import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { epochMs } from './columns';

/** Byte values per storage area and owner (plugin, workspace or agent binding). */
@Entity('storage_entries')
@Index('uq_storage_owner_key', ['owner_key', 'key'], { unique: true })
export class StorageEntryEntity {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 400 })
  owner_key!: string;

  @Column({ type: 'varchar', length: 255 })
  key!: string;

  /** Base64 of the bytes (one portable column type for SQLite and PostgreSQL). */
  @Column({ type: 'text' })
  value_base64!: string;

  @Column({ type: 'integer' })
  size!: number;

  @Column({ type: 'bigint', transformer: epochMs })
  updated_at!: number;
}
