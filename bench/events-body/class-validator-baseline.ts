/*
 * The class-validator DTO of POST /v1/events as it stood before the compiled JSON schema
 * (apps/host/src/http/dto/event.schema.ts) replaced it: kept here only as the same-run baseline of
 * bench/events-body. The host does not use it.
 */
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsDefined,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { ACTION_STYLES, FIELD_TYPES, MAX_SUBMISSION_BYTES } from '../../libs/interactions/src';
import { CONCURRENCY_MODES, type ConcurrencyMode } from '../../libs/runs/src/concurrency/concurrency';
import { INT32_MAX, IsJsonMap, MAX_EPOCH_SECONDS, OPEN_MAP_MAX_BYTES } from '../../apps/host/src/http/dto/rules';

const TRIGGER_SOURCES = ['platform', 'webui', 'api', 'scheduler', 'system', 'host_adapter'];
const ID = /^[^\s].{0,254}$/;
const openMap = {
  type: 'object',
  additionalProperties: true,
  description: `Open JSON object: at most ${OPEN_MAP_MAX_BYTES} bytes; the whole body at most 32 levels deep`,
} as const;

const VALUES = {
  type: 'object',
  additionalProperties: true,
  description:
    'Values by field id: text/textarea a string, select one option value, multiselect a list of option values, number a number, boolean true/false, file a file reference string. Required fields must be present; unknown field ids are refused. At most 256 KiB.',
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

export class RawEventRefDto {
  @ApiProperty() @IsString() @IsNotEmpty() @MaxLength(255) ref_id!: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(1024) storage_key?: string;
}

export class EventContextDto {
  @ApiPropertyOptional({
    description: 'Platform event id; generated when absent. Duplicates return the original answer.',
  })
  @IsOptional()
  @IsString()
  @Matches(ID, { message: 'event_id must be 1-255 characters and not start with white space' })
  event_id?: string;

  @ApiProperty({ example: 'message.received' })
  @IsString()
  @Matches(/^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$/, { message: 'event_type must be a dotted name such as message.received' })
  event_type!: string;

  @ApiPropertyOptional({ description: 'Epoch seconds', minimum: 0, maximum: MAX_EPOCH_SECONDS })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(MAX_EPOCH_SECONDS)
  event_time?: number;

  @ApiProperty({ enum: TRIGGER_SOURCES }) @IsIn(TRIGGER_SOURCES) source!: string;

  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) source_event_type?: string;

  @ApiPropertyOptional({ type: RawEventRefDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => RawEventRefDto)
  raw_ref?: RawEventRefDto;

  @ApiPropertyOptional(openMap) @IsOptional() @IsJsonMap() data?: Record<string, unknown>;
}

export class ConversationDto {
  @ApiProperty()
  @IsString()
  @Matches(ID, { message: 'conversation_id must be 1-255 characters' })
  conversation_id!: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) thread_id?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) bot_id?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) workspace_id?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) launcher_type?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) launcher_id?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) sender_id?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) session_id?: string;
}

export class ActorDto {
  @ApiProperty({ example: 'user' }) @IsString() @IsNotEmpty() @MaxLength(64) actor_type!: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) actor_id?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) actor_name?: string;
  @ApiPropertyOptional(openMap) @IsOptional() @IsJsonMap() metadata?: Record<string, unknown>;
}

export class SubjectDto {
  @ApiProperty() @IsString() @IsNotEmpty() @MaxLength(64) subject_type!: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) subject_id?: string;
  @ApiPropertyOptional(openMap) @IsOptional() @IsJsonMap() data?: Record<string, unknown>;
}

export class ImageUrlDto {
  @ApiProperty() @IsString() @IsNotEmpty() @MaxLength(8192) url!: string;
}

export class ContentElementDto {
  @ApiProperty({ enum: ['text', 'image_url', 'image_base64', 'file_url', 'file_base64'] })
  @IsIn(['text', 'image_url', 'image_base64', 'file_url', 'file_base64'])
  type!: string;
  @ApiPropertyOptional() @IsOptional() @IsString() text?: string;
  @ApiPropertyOptional({ type: ImageUrlDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => ImageUrlDto)
  image_url?: ImageUrlDto;
  @ApiPropertyOptional() @IsOptional() @IsString() image_base64?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(8192) file_url?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() file_base64?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(1024) file_name?: string;
}

export class AttachmentDto {
  @ApiProperty({ enum: ['image', 'file', 'voice'] }) @IsIn(['image', 'file', 'voice']) type!: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) mime_type?: string;
  @ApiPropertyOptional({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(Number.MAX_SAFE_INTEGER)
  size?: number;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(1024) name?: string;
  @ApiPropertyOptional({ enum: ['url', 'base64', 'message_chain'] })
  @IsOptional()
  @IsIn(['url', 'base64', 'message_chain'])
  source?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(8192) url?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(8192) path?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() content?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) id?: string;
}

export class InputDto {
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(100_000) text?: string;
  @ApiPropertyOptional({ type: [ContentElementDto] })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(100)
  @ValidateNested({ each: true })
  @Type(() => ContentElementDto)
  contents?: ContentElementDto[];
  @ApiPropertyOptional({ type: [AttachmentDto] })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(100)
  @ValidateNested({ each: true })
  @Type(() => AttachmentDto)
  attachments?: AttachmentDto[];
  @ApiPropertyOptional({
    type: InteractionInputDto,
    description: 'event_type interaction.submitted only: the answer with its one-time token (docs/interactions.md)',
  })
  @IsOptional()
  @ValidateNested()
  @Type(() => InteractionInputDto)
  interaction?: InteractionInputDto;
}

export class DeliveryDto {
  @ApiPropertyOptional({ default: 'api' }) @IsOptional() @IsString() @MaxLength(64) surface?: string;
  @ApiPropertyOptional(openMap) @IsOptional() @IsJsonMap() reply_target?: Record<string, unknown>;
  @ApiPropertyOptional({ default: true }) @IsOptional() @IsBoolean() supports_streaming?: boolean;
  @ApiPropertyOptional({ default: false }) @IsOptional() @IsBoolean() supports_edit?: boolean;
  @ApiPropertyOptional({ default: false }) @IsOptional() @IsBoolean() supports_reaction?: boolean;
  @ApiPropertyOptional({ minimum: 1, maximum: INT32_MAX })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(INT32_MAX)
  max_message_size?: number;
  @ApiPropertyOptional(openMap)
  @IsOptional()
  @IsJsonMap()
  platform_capabilities?: Record<string, unknown>;
  @ApiPropertyOptional({
    type: InteractionCapabilitiesDto,
    description: 'What the surface renders of an interaction; absent: fallback_text only',
  })
  @IsOptional()
  @ValidateNested()
  @Type(() => InteractionCapabilitiesDto)
  interactions?: InteractionCapabilitiesDto;
}

export class SubmitEventDto {
  @ApiProperty({ description: 'The agent that handles the event' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(128)
  agent_id!: string;
  @ApiProperty({ type: EventContextDto })
  @IsDefined()
  @IsObject()
  @ValidateNested()
  @Type(() => EventContextDto)
  event!: EventContextDto;
  @ApiPropertyOptional({ type: ConversationDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => ConversationDto)
  conversation?: ConversationDto;
  @ApiPropertyOptional({ type: ActorDto }) @IsOptional() @ValidateNested() @Type(() => ActorDto) actor?: ActorDto;
  @ApiPropertyOptional({ type: SubjectDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => SubjectDto)
  subject?: SubjectDto;
  @ApiProperty({ type: InputDto })
  @IsDefined()
  @IsObject()
  @ValidateNested()
  @Type(() => InputDto)
  input!: InputDto;
  @ApiPropertyOptional({ type: DeliveryDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => DeliveryDto)
  delivery?: DeliveryDto;
  @ApiPropertyOptional({ example: 'en_US' }) @IsOptional() @IsString() @MaxLength(32) locale?: string;
  @ApiPropertyOptional({ example: 'Europe/Berlin' }) @IsOptional() @IsString() @MaxLength(64) timezone?: string;
  @ApiPropertyOptional(openMap) @IsOptional() @IsJsonMap() metadata?: Record<string, unknown>;
  @ApiPropertyOptional({
    enum: CONCURRENCY_MODES,
    description:
      "Overrides the agent's concurrency policy for this event while its conversation is busy: steer it into the active run, queue it as the next run, interrupt the active run, or reject it (409)",
  })
  @IsOptional()
  @IsIn(CONCURRENCY_MODES)
  concurrency?: ConcurrencyMode;
}
