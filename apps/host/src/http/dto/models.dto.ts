import { SharedOfRow, SharedOfWrite, WorkspaceOfRow, WorkspaceOfWrite } from './owner.dto';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  IsBoolean,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsOptional,
  IsString,
  IsUrl,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateNested,
} from 'class-validator';
import {
  ENV_NAME_PATTERN,
  ENV_NAME_RULE,
  MODEL_KINDS,
  MODEL_LIMITS,
  PROVIDER_PATTERN,
  PROVIDER_RULE,
  TOKENIZERS,
  type TokenizerName,
} from '@libs/resources';
import { IsJsonMap } from './rules';

const obj = { type: 'object', additionalProperties: true } as const;

export class ModelAbilitiesDto {
  @ApiPropertyOptional({ default: true }) @IsOptional() @IsBoolean() tool_calling?: boolean;
  @ApiPropertyOptional({ default: false }) @IsOptional() @IsBoolean() vision?: boolean;
  @ApiPropertyOptional({ default: true, description: 'false: stream is served from one completion' })
  @IsOptional()
  @IsBoolean()
  streaming?: boolean;
}

export class ModelBodyDto {
  @ApiProperty({ enum: MODEL_KINDS }) @IsIn(MODEL_KINDS) kind!: (typeof MODEL_KINDS)[number];
  @ApiPropertyOptional({ default: 'openai-compatible', example: 'openai' })
  @IsOptional()
  // The domain's rule (libs/resources model-types.ts); the 400 reads "provider: <rule>".
  @Matches(PROVIDER_PATTERN, { message: PROVIDER_RULE })
  provider?: string;
  @ApiProperty({
    example: 'https://api.openai.com/v1',
    description: 'OpenAI-compatible base URL (…/chat/completions, …/rerank)',
  })
  @IsUrl({ protocols: ['http', 'https'], require_protocol: true, require_tld: false })
  @MaxLength(MODEL_LIMITS.base_url)
  base_url!: string;
  @ApiPropertyOptional({
    nullable: true,
    type: String,
    example: 'OPENAI_API_KEY',
    description: "Name of the host's environment variable holding the API key (read at call time); null: no key",
  })
  @IsOptional()
  @Matches(ENV_NAME_PATTERN, { message: ENV_NAME_RULE })
  api_key_env?: string | null;
  @ApiProperty({ example: 'gpt-4o-mini' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(MODEL_LIMITS.model_name)
  model_name!: string;
  @ApiPropertyOptional({ nullable: true, type: Number })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(MODEL_LIMITS.context_window)
  context_window?: number | null;
  @ApiPropertyOptional({ nullable: true, type: Number })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(MODEL_LIMITS.max_output_tokens)
  max_output_tokens?: number | null;
  @ApiPropertyOptional({ type: ModelAbilitiesDto, description: 'Chat models only' })
  @IsOptional()
  @ValidateNested()
  @Type(() => ModelAbilitiesDto)
  abilities?: ModelAbilitiesDto;
  @ApiPropertyOptional({
    enum: TOKENIZERS,
    nullable: true,
    description:
      'js-tiktoken encoding for count_tokens; null: count_tokens fails with unavailable {reason: no_tokenizer}',
  })
  @IsOptional()
  @IsIn(TOKENIZERS)
  tokenizer?: TokenizerName | null;
  @ApiPropertyOptional({ ...obj, description: 'Request fields sent on every call (a call may override them)' })
  @IsOptional()
  @IsJsonMap()
  extra_args?: Record<string, unknown>;
}

export class CreateModelDto extends ModelBodyDto {
  @ApiProperty({ example: 'gpt-small' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(MODEL_LIMITS.model_id)
  model_id!: string;
  @WorkspaceOfWrite() workspace_id?: string;
  @SharedOfWrite() shared?: boolean;
}

export class ReplaceModelDto extends ModelBodyDto {}

export class ModelDto {
  @ApiProperty() model_id!: string;
  @WorkspaceOfRow() workspace_id!: string;
  @SharedOfRow() shared!: boolean;
  @ApiProperty({ enum: ['chat', 'rerank'] }) kind!: string;
  @ApiProperty({ enum: ['llm', 'rerank'] }) model_type!: string;
  @ApiProperty() provider!: string;
  @ApiProperty() base_url!: string;
  @ApiProperty({ nullable: true, type: String, description: 'The key reference; the key itself is never returned' })
  api_key_env!: string | null;
  @ApiProperty({ description: "Whether the host's environment has the variable api_key_env names" })
  api_key_set!: boolean;
  @ApiProperty() model_name!: string;
  @ApiProperty({ nullable: true, type: Number }) context_window!: number | null;
  @ApiProperty({ nullable: true, type: Number }) max_output_tokens!: number | null;
  @ApiProperty({ nullable: true, type: ModelAbilitiesDto }) abilities!: ModelAbilitiesDto | null;
  @ApiProperty({ nullable: true, type: String }) tokenizer!: string | null;
  @ApiProperty(obj) extra_args!: Record<string, unknown>;
  @ApiProperty() created_at!: string;
  @ApiProperty() updated_at!: string;
}

export class ModelPageDto {
  @ApiProperty({ type: [ModelDto] }) items!: ModelDto[];
  @ApiProperty({ nullable: true, type: String }) next_cursor!: string | null;
}
