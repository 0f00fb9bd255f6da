import { Column, Entity, PrimaryColumn } from 'typeorm';
import { epochMs } from './columns';

export type ApiKeyRole = 'admin' | 'platform';

@Entity('api_keys')
export class ApiKeyEntity {
  @PrimaryColumn({ type: 'varchar', length: 64 })
  id!: string;

  @Column({ type: 'varchar', length: 200 })
  name!: string;

  @Column({ type: 'varchar', length: 16 })
  role!: ApiKeyRole;

  /** SHA-256 of the key; keys are 256-bit random, so a fast hash is enough. */
  @Column({ type: 'varchar', length: 64, unique: true })
  key_hash!: string;

  /** First characters of the key, shown in listings to tell keys apart. */
  @Column({ type: 'varchar', length: 16 })
  key_prefix!: string;

  /**
   * The workspaces the key may act in (docs/tenancy.md#keys): a platform key names one or more; an
   * admin key null (every workspace) or a list.
   */
  @Column({ type: 'simple-json', nullable: true })
  workspace_ids!: string[] | null;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;

  @Column({ type: 'bigint', nullable: true, transformer: epochMs })
  revoked_at!: number | null;
}
