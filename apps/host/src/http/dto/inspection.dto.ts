import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { IsIntCursor } from './rules';

export class AuthorizationDto {
  @ApiProperty() run_id!: string;
  @ApiProperty({
    nullable: true,
    type: 'object',
    additionalProperties: true,
    description:
      'scope, resources (with operations), available_apis, state scopes, storage areas, prompt, limits, deadline',
  })
  authorization!: object | null;
  @ApiProperty({ nullable: true, type: String, description: 'SHA-256 of the canonical JSON of the snapshot' })
  authorization_hash!: string | null;
  @ApiProperty({ description: 'The stored snapshot still hashes to authorization_hash' }) hash_verified!: boolean;
}

export class AuditEntryDto {
  @ApiProperty() id!: number;
  @ApiProperty() run_id!: string;
  @ApiProperty({ nullable: true, type: String }) runner_id!: string | null;
  @ApiProperty({ nullable: true, type: String, description: 'The calling plugin, from its connection' }) plugin_id!:
    string | null;
  @ApiProperty({ example: 'state.get' }) action!: string;
  @ApiProperty({ nullable: true, type: String, example: 'model:gpt' }) resource!: string | null;
  @ApiProperty({ nullable: true, type: String }) scope!: string | null;
  @ApiProperty({ enum: ['allowed', 'denied', 'failed'] }) outcome!: string;
  @ApiProperty({ nullable: true, type: String }) error_code!: string | null;
  @ApiProperty() duration_us!: number;
  @ApiProperty() created_at!: string;
}

export class AuditPageDto {
  @ApiProperty({ type: [AuditEntryDto] }) items!: AuditEntryDto[];
  @ApiProperty({ nullable: true, type: String }) next_cursor!: string | null;
}

const toInt = ({ value }: { value: unknown }) =>
  typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;

export class TranscriptQueryDto {
  @ApiPropertyOptional({ description: 'Only this thread' })
  @IsOptional()
  @IsString()
  @MaxLength(255)
  thread_id?: string;
  @ApiPropertyOptional({
    description: "Only this agent's conversation (agents sharing a conversation id are separate conversations)",
  })
  @IsOptional()
  @IsString()
  @MaxLength(128)
  agent_id?: string;
  @ApiPropertyOptional({
    description: 'Only rows of this workspace (workspaces sharing a conversation id are separate conversations)',
  })
  @IsOptional()
  @IsString()
  @MaxLength(255)
  workspace_id?: string;
  @ApiPropertyOptional({ description: 'Items with seq < before (newest first)' })
  @IsOptional()
  @IsIntCursor()
  before?: string;
  @ApiPropertyOptional({ description: 'Items with seq > after (oldest first)' })
  @IsOptional()
  @IsIntCursor()
  after?: string;
  @ApiPropertyOptional({ enum: ['newest', 'oldest'], default: 'newest' })
  @IsOptional()
  @IsIn(['newest', 'oldest'])
  order?: 'newest' | 'oldest';
  @ApiPropertyOptional({ default: 50, maximum: 100 })
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(100)
  limit?: number;
}

/** An attachment of a user message as recorded: inline contents are never kept (`content: null`, `content_redacted`). */
export class TranscriptAttachmentDto {
  @ApiProperty({ enum: ['image', 'file', 'voice'] }) type!: string;
  @ApiPropertyOptional() mime_type?: string;
  @ApiPropertyOptional() size?: number;
  @ApiPropertyOptional() name?: string;
  @ApiPropertyOptional({ enum: ['url', 'base64', 'message_chain'] }) source?: string;
  @ApiPropertyOptional() url?: string;
  @ApiPropertyOptional() path?: string;
  @ApiPropertyOptional({ nullable: true, type: String, description: 'null: the inline content was not kept' })
  content?: string | null;
  @ApiPropertyOptional({ description: 'true when an inline content was dropped' }) content_redacted?: boolean;
  @ApiPropertyOptional() id?: string;
}

/** Who wrote a transcript item: the actor for user messages, the run and runner for assistant ones. */
export class TranscriptMetadataDto {
  @ApiPropertyOptional({ nullable: true, type: String, description: 'User messages' }) actor_type?: string | null;
  @ApiPropertyOptional({ nullable: true, type: String, description: 'User messages' }) actor_id?: string | null;
  @ApiPropertyOptional({ description: 'Assistant messages' }) run_id?: string;
  @ApiPropertyOptional({ description: 'Assistant messages' }) runner_id?: string;
}

export class TranscriptItemDto {
  @ApiProperty() transcript_id!: string;
  @ApiProperty({ nullable: true, type: String }) event_id!: string | null;
  @ApiProperty() conversation_id!: string;
  @ApiProperty({ nullable: true, type: String }) thread_id!: string | null;
  @ApiProperty({ description: 'The agent whose conversation this row belongs to' }) agent_id!: string;
  @ApiProperty({ nullable: true, type: String, description: "The event's workspace (null: none)" })
  workspace_id!: string | null;
  @ApiProperty({ enum: ['user', 'assistant'] }) role!: string;
  @ApiProperty() item_type!: string;
  @ApiProperty({ description: 'Text, at most 4000 characters' }) content!: string;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'The message as the runner sees it ({role, content}); base64 payloads replaced by null',
  })
  content_json!: object;
  @ApiProperty({ type: [TranscriptAttachmentDto] }) attachment_refs!: TranscriptAttachmentDto[];
  @ApiProperty({ type: TranscriptMetadataDto }) metadata!: TranscriptMetadataDto;
  @ApiProperty() seq!: number;
  @ApiProperty() cursor!: string;
  @ApiProperty({ description: 'Epoch seconds' }) created_at!: number;
  @ApiProperty({ nullable: true, type: String }) run_id!: string | null;
}

export class TranscriptPageDto {
  @ApiProperty({ type: [TranscriptItemDto] }) items!: TranscriptItemDto[];
  @ApiProperty({ nullable: true, type: String }) next_cursor!: string | null;
  @ApiProperty({ nullable: true, type: String }) prev_cursor!: string | null;
  @ApiProperty() has_more!: boolean;
}
