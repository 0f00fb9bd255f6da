import { Column, Entity, PrimaryColumn } from 'typeorm';
import { epochMs, type JsonObject } from './columns';

/** A tenant: it owns agents, resources, keys and their data (docs/tenancy.md). */
@Entity('workspaces')
export class WorkspaceEntity {
  @PrimaryColumn({ type: 'varchar', length: 64 })
  workspace_id!: string;

  @Column({ type: 'varchar', length: 200 })
  name!: string;

  /** Per-workspace quotas (docs/tenancy.md#quotas); an absent quota is unlimited. */
  @Column({ type: 'simple-json' })
  quotas!: JsonObject;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;

  @Column({ type: 'bigint', transformer: epochMs })
  updated_at!: number;
}
