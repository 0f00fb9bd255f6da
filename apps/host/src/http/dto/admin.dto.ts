import { ApiProperty, ApiPropertyOptional, type ApiPropertyOptions } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
} from 'class-validator';
import {
  concurrencyPolicySchema,
  deliveryPolicySchema,
  policyOpenApiSchema,
  resourcePolicySchema,
  statePolicySchema,
} from '@libs/agents';
import { runnerManifestSchema } from '@libs/protocol';
import { openApiSchemaOf } from './zod-schema';
import { WorkspaceOfRow, WorkspaceOfWrite } from './owner.dto';
import { INT32_MAX, IsJsonMap, NullIsAbsent } from './rules';

const obj = { type: 'object', additionalProperties: true } as const;

/** A policy in the OpenAPI document: its grant fields typed and described, generated from the zod schema that validates it. */
function policy(schema: Parameters<typeof policyOpenApiSchema>[0], description: string) {
  return { ...policyOpenApiSchema(schema), description } as ApiPropertyOptions;
}

export class AgentBodyDto {
  @ApiProperty({ example: 'plugin:demo/echo/default' }) @IsString() @IsNotEmpty() @MaxLength(200) runner_id!: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(1000) description?: string;
  @ApiPropertyOptional({
    ...obj,
    description:
      "Validated against the runner's config_schema when the runner is known. `timeout`: seconds until the run's deadline (default 300; 0 or null: none; at most 31536000).",
  })
  @IsOptional()
  @IsJsonMap()
  runner_config?: Record<string, unknown>;
  @ApiPropertyOptional(
    policy(
      resourcePolicySchema,
      'What the runner may use: models, tools, knowledge bases, history, events, storage areas, prompt',
    ),
  )
  @IsOptional()
  @IsJsonMap()
  resource_policy?: Record<string, unknown>;
  @ApiPropertyOptional(policy(statePolicySchema, 'State API grants'))
  @IsOptional()
  @IsJsonMap()
  state_policy?: Record<string, unknown>;
  @ApiPropertyOptional(policy(deliveryPolicySchema, 'How results are delivered to the platform surface'))
  @IsOptional()
  @IsJsonMap()
  delivery_policy?: Record<string, unknown>;
  @ApiPropertyOptional(policy(concurrencyPolicySchema, 'Follow-up events while a run is active'))
  @IsOptional()
  @IsJsonMap()
  concurrency_policy?: Record<string, unknown>;
}

export class CreateAgentDto extends AgentBodyDto {
  @ApiProperty({ example: 'support-bot' }) @IsString() @IsNotEmpty() @MaxLength(128) agent_id!: string;
  @WorkspaceOfWrite() workspace_id?: string;
}

export class ReplaceAgentDto extends AgentBodyDto {
  @ApiPropertyOptional({
    type: Number,
    nullable: true,
    description:
      'Optimistic concurrency: the version you read (409 when the agent is at another). Absent or null: no check',
  })
  @NullIsAbsent()
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(INT32_MAX)
  version?: number;
}

export class AgentDto extends AgentBodyDto {
  @ApiProperty() agent_id!: string;
  @WorkspaceOfRow() workspace_id!: string;
  @ApiProperty() declare description: string;
  @ApiProperty() version!: number;
  @ApiProperty() created_at!: string;
  @ApiProperty() updated_at!: string;
}

export class AgentPageDto {
  @ApiProperty({ type: [AgentDto] }) items!: AgentDto[];
  @ApiProperty({ nullable: true, type: String }) next_cursor!: string | null;
}

export class PageQueryDto {
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) cursor?: string;
  @ApiPropertyOptional({ default: 50, maximum: 100 })
  @IsOptional()
  @Transform(({ value }: { value: unknown }) =>
    typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value,
  )
  @IsInt()
  @Min(1)
  @Max(100)
  limit?: number;
}

export class RegisterPluginDto {
  @ApiProperty({ example: 'demo' }) @IsString() @IsNotEmpty() @MaxLength(64) author!: string;
  @ApiProperty({ example: 'echo' }) @IsString() @IsNotEmpty() @MaxLength(64) name!: string;
}

export class PluginDto {
  @ApiProperty() plugin_id!: string;
  @ApiProperty() author!: string;
  @ApiProperty() name!: string;
  @ApiProperty() token_prefix!: string;
  @ApiProperty() created_at!: string;
  @ApiProperty() token_issued_at!: string;
}

export class PluginWithTokenDto extends PluginDto {
  @ApiProperty({ description: 'Shown once; send as `authorization: Bearer <token>` on the gRPC calls' }) token!: string;
}

export class RunnerDto {
  @ApiProperty() runner_id!: string;
  @ApiProperty({
    enum: ['builtin', 'plugin'],
    description: 'builtin: served in process by the host (always connected); plugin: over a gRPC Connect stream',
  })
  kind!: string;
  @ApiProperty() plugin_id!: string;
  @ApiProperty() name!: string;
  @ApiProperty({ enum: ['connected', 'disconnected'] }) state!: string;
  @ApiProperty({ nullable: true, type: String }) session_id!: string | null;
  @ApiProperty({ nullable: true, type: String }) connected_at!: string | null;
  @ApiProperty() last_seen_at!: string;
  // allOf: the manifest's own `required` list must not be read as this property's required flag.
  @ApiProperty({
    allOf: [openApiSchemaOf(runnerManifestSchema, 'output')],
    description: 'The Runner Protocol v1 manifest the plugin announced (as the host accepted it)',
  })
  manifest!: Record<string, unknown>;
}

export class CreateApiKeyDto {
  @ApiProperty() @IsString() @IsNotEmpty() @MaxLength(200) name!: string;
  @ApiProperty({ enum: ['platform', 'admin'] }) @IsIn(['platform', 'admin']) role!: 'platform' | 'admin';
  @ApiPropertyOptional({
    type: [String],
    nullable: true,
    description:
      'The workspaces the key acts in (docs/tenancy.md#keys). Platform keys: one or more (default: the ' +
      "caller's workspace, `default` for a global caller). Admin keys: null = every workspace (only a global " +
      "admin may create one; the default for a global caller), or a list within the caller's workspaces.",
  })
  @IsOptional()
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(100)
  @IsString({ each: true })
  workspace_ids?: string[] | null;
}

export class ApiKeyDto {
  @ApiProperty() id!: string;
  @ApiProperty() name!: string;
  @ApiProperty({ enum: ['platform', 'admin'] }) role!: string;
  @ApiProperty({
    nullable: true,
    type: String,
    description: 'first characters of a generated key; null for ADMIN_API_KEY (no part of it is shown)',
  })
  key_prefix!: string | null;
  @ApiProperty({ type: [String], nullable: true, description: 'null: every workspace (a global admin key)' })
  workspace_ids!: string[] | null;
  @ApiProperty() created_at!: string;
  @ApiProperty({ nullable: true, type: String }) revoked_at!: string | null;
}

export class ApiKeyWithSecretDto extends ApiKeyDto {
  @ApiProperty({ description: 'Shown once' }) key!: string;
}
