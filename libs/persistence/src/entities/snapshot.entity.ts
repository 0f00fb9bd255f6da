import { Column, Entity, PrimaryColumn } from 'typeorm';
import { epochMs } from './columns';

/**
 * The shared part of authorization snapshots, stored once by content (hot/snapshot-rows.ts): many
 * runs name the same row by its `hash` (SHA-256 of `content`). Written insert-if-absent by the
 * run path; never updated.
 */
@Entity('snapshots')
export class SnapshotEntity {
  @PrimaryColumn({ type: 'varchar', length: 64 })
  hash!: string;

  /** JSON text, exactly the text that was hashed. */
  @Column({ type: 'text' })
  content!: string;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;
}
