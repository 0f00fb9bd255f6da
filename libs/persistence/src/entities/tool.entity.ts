import { Column, Entity, Index, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import { epochMs, type JsonObject } from './columns';

/** A configured tool source: an MCP server (stdio or streamable HTTP), an HTTP tool or a built-in. */
@Entity('tool_sources')
@Index('idx_tool_sources_workspace', ['workspace_id'])
export class ToolSourceEntity {
  @PrimaryColumn({ type: 'varchar', length: 128 })
  source_id!: string;

  /** The owning workspace (docs/tenancy.md). */
  @Column({ type: 'varchar', length: 64, default: 'default' })
  workspace_id!: string;

  /** Visible to the runs of every workspace, not only its own (docs/tenancy.md#resources). */
  @Column({ type: 'boolean', default: false })
  shared!: boolean;

  /** `mcp_stdio`, `mcp_http`, `http` or `builtin`. */
  @Column({ type: 'varchar', length: 16 })
  kind!: string;

  /** Connection settings; secrets only as environment-variable references. */
  @Column({ type: 'simple-json' })
  config!: JsonObject;

  @Column({ type: 'boolean' })
  enabled!: boolean;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;

  @Column({ type: 'bigint', transformer: epochMs })
  updated_at!: number;
}

/** The tools a source offers, as last listed. `tool_name` is the name runners see. */
@Entity('tools')
@Index('uq_tools_name', ['tool_name'], { unique: true })
export class ToolEntity {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 255 })
  tool_name!: string;

  /** The tool's own name at its source (MCP tool name, HTTP tool name, built-in name). */
  @Column({ type: 'varchar', length: 255 })
  source_tool_name!: string;

  @Column({ type: 'varchar', length: 16 })
  source!: string;

  @Column({ type: 'varchar', length: 128 })
  source_id!: string;

  @Column({ type: 'text' })
  description!: string;

  @Column({ type: 'simple-json' })
  parameters!: JsonObject;

  /** MCP metadata: `{title?, annotations?, output_schema?, task_support?}` (`{}` when none). */
  @Column({ type: 'simple-json', default: '{}' })
  metadata!: JsonObject;

  @Column({ type: 'bigint', transformer: epochMs })
  updated_at!: number;
}
