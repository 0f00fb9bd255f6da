import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { RUN_STATUSES } from '@libs/protocol';
import { INT32_MAX, IsIntCursor } from './rules';

export class RunErrorDto {
  @ApiProperty() code!: string;
  @ApiProperty() retryable!: boolean;
}

export class HostMeteredDto {
  @ApiProperty({ description: 'Model calls the host proxied for the run' }) calls!: number;
  @ApiProperty({ nullable: true, type: Number, description: 'null: some call reported none' }) prompt_tokens!:
    number | null;
  @ApiProperty({ nullable: true, type: Number }) completion_tokens!: number | null;
  @ApiProperty({ nullable: true, type: Number }) total_tokens!: number | null;
  @ApiProperty({ description: 'false when any call had no usage' }) complete!: boolean;
}

export class RunUsageDto {
  @ApiProperty({ nullable: true, type: Number, description: "The runner's report (terminal result); null = unknown" })
  prompt_tokens!: number | null;
  @ApiProperty({ nullable: true, type: Number }) completion_tokens!: number | null;
  @ApiProperty({ nullable: true, type: Number }) total_tokens!: number | null;
  @ApiProperty({ description: "false when the runner's report is missing or lacks a count" }) complete!: boolean;
  @ApiPropertyOptional({
    type: HostMeteredDto,
    description: "The host's own metering of proxied model calls (GET /v1/runs/{id} only)",
  })
  host_metered?: HostMeteredDto;
  [counter: string]: unknown;
}

export class RunDto {
  @ApiProperty() run_id!: string;
  @ApiProperty() event_id!: string;
  @ApiProperty() agent_id!: string;
  @ApiProperty() runner_id!: string;
  @ApiProperty({ nullable: true, type: String }) conversation_id!: string | null;
  @ApiProperty({ nullable: true, type: String }) thread_id!: string | null;
  @ApiProperty({ enum: RUN_STATUSES }) status!: string;
  @ApiProperty({ nullable: true, type: String }) status_reason!: string | null;
  @ApiProperty({ nullable: true, type: RunErrorDto }) error!: RunErrorDto | null;
  @ApiProperty({
    type: RunUsageDto,
    description: "Token usage: the runner's report (provider counters kept) and the host's metering, independently",
  })
  usage!: RunUsageDto;
  @ApiProperty() created_at!: string;
  @ApiProperty({ nullable: true, type: String }) started_at!: string | null;
  @ApiProperty({ nullable: true, type: String }) finished_at!: string | null;
  @ApiProperty({ nullable: true, type: String }) deadline_at!: string | null;
  @ApiProperty({ nullable: true, type: String }) cancel_requested_at!: string | null;
  @ApiProperty({ nullable: true, type: Number }) duration_ms!: number | null;
}

export class RunPageDto {
  @ApiProperty({ type: [RunDto] }) items!: RunDto[];
  @ApiProperty({ nullable: true, type: String }) next_cursor!: string | null;
}

const toInt = ({ value }: { value: unknown }) =>
  typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;

export class ListRunsQueryDto {
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) conversation_id?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(128) agent_id?: string;
  @ApiPropertyOptional({ enum: RUN_STATUSES, description: 'One status, or several separated by commas' })
  @IsOptional()
  @Transform(({ value }: { value: unknown }) => (typeof value === 'string' ? value.split(',') : value))
  @IsIn(RUN_STATUSES, { each: true })
  status?: string[];
  @ApiPropertyOptional({ description: 'next_cursor of the previous page' })
  @IsOptional()
  @IsIntCursor()
  cursor?: string;
  @ApiPropertyOptional({ default: 50, maximum: 100 })
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(100)
  limit?: number;
}

export class RunEventsQueryDto {
  @ApiPropertyOptional({ description: 'Resume after this sequence (same as the Last-Event-ID header)' })
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(INT32_MAX)
  after?: number;
}

export class CancelRunDto {
  @ApiPropertyOptional({ maxLength: 500 }) @IsOptional() @IsString() @MaxLength(500) reason?: string;
}
