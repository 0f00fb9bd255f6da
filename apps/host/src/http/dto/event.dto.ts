import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  MaxLength,
  Min,
  ValidateNested,
} from 'class-validator';
import type { EventSubmission } from '@libs/runs';

export const TRIGGER_SOURCES = ['platform', 'webui', 'api', 'scheduler', 'system', 'host_adapter'];
const ID = /^[^\s].{0,254}$/;

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

  @ApiPropertyOptional({ description: 'Epoch seconds' }) @IsOptional() @IsInt() @Min(0) event_time?: number;

  @ApiProperty({ enum: TRIGGER_SOURCES }) @IsIn(TRIGGER_SOURCES) source!: string;

  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) source_event_type?: string;

  @ApiPropertyOptional({ type: RawEventRefDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => RawEventRefDto)
  raw_ref?: RawEventRefDto;

  @ApiPropertyOptional({ type: 'object', additionalProperties: true }) @IsOptional() @IsObject() data?: Record<
    string,
    unknown
  >;
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
  @ApiPropertyOptional({ type: 'object', additionalProperties: true }) @IsOptional() @IsObject() metadata?: Record<
    string,
    unknown
  >;
}

export class SubjectDto {
  @ApiProperty() @IsString() @IsNotEmpty() @MaxLength(64) subject_type!: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) subject_id?: string;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true }) @IsOptional() @IsObject() data?: Record<
    string,
    unknown
  >;
}

export class ImageUrlDto {
  @ApiProperty() @IsString() @IsNotEmpty() url!: string;
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
  @ApiPropertyOptional() @IsOptional() @IsString() file_url?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() file_base64?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() file_name?: string;
}

export class AttachmentDto {
  @ApiProperty({ enum: ['image', 'file', 'voice'] }) @IsIn(['image', 'file', 'voice']) type!: string;
  @ApiPropertyOptional() @IsOptional() @IsString() mime_type?: string;
  @ApiPropertyOptional() @IsOptional() @IsInt() @Min(0) size?: number;
  @ApiPropertyOptional() @IsOptional() @IsString() name?: string;
  @ApiPropertyOptional({ enum: ['url', 'base64', 'message_chain'] })
  @IsOptional()
  @IsIn(['url', 'base64', 'message_chain'])
  source?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() url?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() path?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() content?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() id?: string;
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
}

export class DeliveryDto {
  @ApiPropertyOptional({ default: 'api' }) @IsOptional() @IsString() @MaxLength(64) surface?: string;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true }) @IsOptional() @IsObject() reply_target?: Record<
    string,
    unknown
  >;
  @ApiPropertyOptional({ default: true }) @IsOptional() @IsBoolean() supports_streaming?: boolean;
  @ApiPropertyOptional({ default: false }) @IsOptional() @IsBoolean() supports_edit?: boolean;
  @ApiPropertyOptional({ default: false }) @IsOptional() @IsBoolean() supports_reaction?: boolean;
  @ApiPropertyOptional() @IsOptional() @IsInt() @Min(1) max_message_size?: number;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true })
  @IsOptional()
  @IsObject()
  platform_capabilities?: Record<string, unknown>;
}

export class SubmitEventDto implements EventSubmission {
  @ApiProperty({ description: 'The agent that handles the event' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(128)
  agent_id!: string;
  @ApiProperty({ type: EventContextDto }) @ValidateNested() @Type(() => EventContextDto) event!: EventContextDto;
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
  @ApiProperty({ type: InputDto }) @ValidateNested() @Type(() => InputDto) input!: InputDto;
  @ApiPropertyOptional({ type: DeliveryDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => DeliveryDto)
  delivery?: DeliveryDto;
  @ApiPropertyOptional({ example: 'en_US' }) @IsOptional() @IsString() @MaxLength(32) locale?: string;
  @ApiPropertyOptional({ example: 'Europe/Berlin' }) @IsOptional() @IsString() @MaxLength(64) timezone?: string;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true }) @IsOptional() @IsObject() metadata?: Record<
    string,
    unknown
  >;
}

export class AdmissionDto {
  @ApiProperty() event_id!: string;
  @ApiProperty({ enum: ['started', 'failed'], description: 'What the host did with the event' }) disposition!: string;
  @ApiProperty({ nullable: true, type: String }) run_id!: string | null;
}
