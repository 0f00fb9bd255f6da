import { SharedOfRow, SharedOfWrite, WorkspaceOfRow, WorkspaceOfWrite } from './owner.dto';
import { ApiProperty, ApiPropertyOptional, type ApiPropertyOptions } from '@nestjs/swagger';
import { IsBoolean, IsIn, IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import { httpSourceConfig, mcpHttpConfig, mcpStdioConfig } from '@libs/resources';
import { openApiSchemaOf } from './zod-schema';
import { IsJsonMap } from './rules';

const obj = { type: 'object', additionalProperties: true } as const;
const KINDS = ['mcp_stdio', 'mcp_http', 'http'];

const CONFIG_DOC = [
  'By kind (secrets only as references {env: "HOST_VAR", prefix?: "Bearer "} to host environment variables):',
  'mcp_stdio {command, args?, env?: {NAME: ref}, cwd?, timeout_ms?};',
  'mcp_http {url, headers?: {Name: ref}, timeout_ms?};',
  'http {tools: [{name, description?, method?, url, parameters? (JSON schema), parameters_in?: query|body}], headers?, timeout_ms?}',
].join(' ');

/** The config of each kind, from the schemas that validate it (input: defaults may be left out; output: filled in). */
function configSchema(io: 'input' | 'output', description: string): ApiPropertyOptions {
  const of = (kind: string, schema: Parameters<typeof openApiSchemaOf>[0]) => ({
    title: kind,
    ...openApiSchemaOf(schema, io),
  });
  return {
    oneOf: [of('mcp_stdio', mcpStdioConfig), of('mcp_http', mcpHttpConfig), of('http', httpSourceConfig)],
    description,
  };
}

export class ToolSourceBodyDto {
  @ApiProperty({ enum: KINDS }) @IsIn(KINDS) kind!: string;
  @ApiProperty(configSchema('input', CONFIG_DOC)) @IsJsonMap() config!: Record<string, unknown>;
  @ApiPropertyOptional({ default: true }) @IsOptional() @IsBoolean() enabled?: boolean;
}

export class CreateToolSourceDto extends ToolSourceBodyDto {
  @ApiProperty({ example: 'github' }) @IsString() @IsNotEmpty() @MaxLength(64) source_id!: string;
  @WorkspaceOfWrite() workspace_id?: string;
  @SharedOfWrite() shared?: boolean;
}

export class SkippedToolDto {
  @ApiProperty() name!: string;
  @ApiProperty() reason!: string;
}

export class ToolSourceDto {
  @ApiProperty() source_id!: string;
  @WorkspaceOfRow() workspace_id!: string;
  @SharedOfRow() shared!: boolean;
  @ApiProperty({ enum: KINDS }) kind!: string;
  @ApiProperty(configSchema('output', 'As registered (by kind): environment-variable references, never their values'))
  config!: Record<string, unknown>;
  @ApiProperty() enabled!: boolean;
  @ApiProperty({ enum: ['connected', 'connecting', 'disconnected', 'error', 'ready', 'disabled'] }) status!: string;
  @ApiProperty({ nullable: true, type: String }) last_error!: string | null;
  @ApiProperty({ type: [String], description: 'The names runners see for its tools' }) tools!: string[];
  @ApiProperty({ type: [SkippedToolDto] }) skipped_tools!: SkippedToolDto[];
  @ApiProperty() created_at!: string;
  @ApiProperty() updated_at!: string;
}

export class ToolDto {
  @ApiProperty({ description: 'The name runners see (and agents grant)' }) tool_name!: string;
  @ApiProperty({ description: 'The name at its source' }) source_tool_name!: string;
  @ApiProperty({
    type: String,
    nullable: true,
    description: "Its source's workspace; null for a built-in (the host's own)",
  })
  workspace_id!: string | null;
  @SharedOfRow() shared!: boolean;
  @ApiProperty() description!: string;
  @ApiProperty({ ...obj, nullable: true, description: 'JSON schema of the parameters' })
  parameters!: Record<string, unknown> | null;
  @ApiProperty({ enum: ['builtin', 'mcp', 'http'] }) source!: string;
  @ApiProperty({ nullable: true, type: String, description: 'null for built-ins' }) source_id!: string | null;
  @ApiProperty({ enum: ['builtin', ...KINDS] }) kind!: string;
  @ApiProperty({ description: 'Built-ins can be off; listed tools are always on' }) enabled!: boolean;
  @ApiPropertyOptional({ description: "The MCP tool's display title, when the server gave one" }) title?: string;
  @ApiPropertyOptional({
    ...obj,
    description:
      'MCP tool annotations as the server gave them: readOnlyHint, destructiveHint, idempotentHint, openWorldHint',
  })
  annotations?: Record<string, unknown>;
  @ApiPropertyOptional({ ...obj, description: "JSON schema of the MCP tool's structured_content" })
  output_schema?: Record<string, unknown>;
}

export class SetBuiltinToolDto {
  @ApiProperty() @IsBoolean() enabled!: boolean;
}
