import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
  ValidateIf,
} from 'class-validator';
import { ACTION_STYLES, FIELD_TYPES, MAX_SUBMISSION_BYTES } from '@libs/interactions';
import { IsJsonMap } from './rules';
import { PageQueryDto } from './admin.dto';

const VALUES = {
  type: 'object',
  additionalProperties: true,
  description:
    "Values by field id: text/textarea a string, select one option value, multiselect a list of option values, number a number, boolean true/false, file a file reference string. Required fields must be present; unknown field ids are refused. At most 256 KiB.",
} as const;

/** `POST /v1/interactions/{id}/submit`. */
export class SubmitInteractionDto {
  @ApiProperty({ description: 'The one-time token of the interaction.request op (`rhit_…`)' })
  @IsString()
  @MaxLength(64)
  callback_token!: string;
  @ApiPropertyOptional({ nullable: true, type: String, description: "One of the request's action ids" })
  @IsOptional()
  @ValidateIf((_o, v) => v !== null)
  @IsString()
  @MaxLength(128)
  action_id?: string | null;
  @ApiPropertyOptional(VALUES) @IsOptional() @IsJsonMap(MAX_SUBMISSION_BYTES) values?: Record<string, unknown>;
}

/** `input.interaction` of a POST /v1/events `interaction.submitted` event: the same as the submit route. */
export class InteractionInputDto extends SubmitInteractionDto {}

/** `delivery.interactions`: what the surface can render of an interaction. */
export class InteractionCapabilitiesDto {
  @ApiPropertyOptional({ enum: FIELD_TYPES, isArray: true, description: 'Field types it renders (default all)' })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(FIELD_TYPES.length)
  @IsIn(FIELD_TYPES, { each: true })
  field_types?: string[];
  @ApiPropertyOptional({ enum: ACTION_STYLES, isArray: true, description: 'Action styles it renders (default all)' })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(ACTION_STYLES.length)
  @IsIn(ACTION_STYLES, { each: true })
  action_styles?: string[];
  @ApiPropertyOptional({ description: 'It can update a shown interaction (read-only after the outcome)' })
  @IsOptional()
  @IsBoolean()
  supports_updates?: boolean;
  @ApiPropertyOptional({ minimum: 0, maximum: 50, description: 'Most fields it renders in one interaction' })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(50)
  max_fields?: number;
}

export class SubmitInteractionResultDto {
  @ApiProperty({ description: "The host's interaction id" }) id!: string;
  @ApiProperty({ description: "The runner's interaction_id" }) interaction_id!: string;
  @ApiProperty({ enum: ['submitted'] }) status!: string;
  @ApiProperty({ description: 'The interaction.submitted event the submission became' }) event_id!: string;
  @ApiProperty({
    enum: ['started', 'steered', 'queued', 'failed', 'delivered'],
    description:
      'What admission did with that event: a new run, steered into the active run of the conversation, queued, or failed (e.g. runner not connected; the submission stands); delivered: an MCP elicitation answered inside the tool call that asked',
  })
  disposition!: string;
  @ApiProperty({ nullable: true, type: String }) run_id!: string | null;
  @ApiPropertyOptional() error?: string;
}

export const INTERACTION_STATUSES = ['pending', 'submitted', 'expired', 'superseded'] as const;

export class InteractionsQueryDto extends PageQueryDto {
  @ApiPropertyOptional({ enum: INTERACTION_STATUSES, default: 'pending' })
  @IsOptional()
  @IsIn(INTERACTION_STATUSES)
  status?: (typeof INTERACTION_STATUSES)[number];
}

export class InteractionViewDto {
  @ApiProperty() id!: string;
  @ApiProperty() interaction_id!: string;
  @ApiProperty({ description: 'The run that requested it' }) run_id!: string;
  @ApiProperty() agent_id!: string;
  @ApiProperty({ nullable: true, type: String }) conversation_id!: string | null;
  @ApiProperty({ nullable: true, type: String }) thread_id!: string | null;
  @ApiProperty({ enum: ['form', 'confirmation', 'choice'] }) kind!: string;
  @ApiProperty() title!: string;
  @ApiProperty({ enum: INTERACTION_STATUSES }) status!: string;
  @ApiProperty({ nullable: true, type: String }) status_reason!: string | null;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty({ format: 'date-time' }) expires_at!: string;
  @ApiProperty({ description: 'Milliseconds since it was requested' }) age_ms!: number;
  @ApiProperty({ nullable: true, type: String, format: 'date-time' }) submitted_at!: string | null;
  @ApiProperty({ nullable: true, type: String }) submission_event_id!: string | null;
}

export class InteractionListDto {
  @ApiProperty({ type: [InteractionViewDto] }) items!: InteractionViewDto[];
}
