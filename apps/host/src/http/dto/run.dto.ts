import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { RUN_STATUSES, usageSchema } from '@libs/protocol';
import { openApiSchemaOf } from './zod-schema';
import { INT32_MAX, IsIntCursor } from './rules';

/** Token counts; extra provider fields are kept. */
const USAGE = openApiSchemaOf(usageSchema, 'output');

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
  @ApiPropertyOptional({
    enum: RUN_STATUSES,
    isArray: true,
    description: 'Any of these statuses: the parameter repeated (`status=running&status=queued`) or comma-separated',
  })
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
  @ApiPropertyOptional({
    description:
      'A stream token from POST /v1/runs/{run_id}/stream-tokens, instead of the Authorization header (EventSource ' +
      "cannot send headers). Valid for this run's streams only, until it expires; never logged.",
  })
  @IsOptional()
  @IsString()
  @MaxLength(1024)
  stream_token?: string;
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

/** One result of a run, as the `data:` of an SSE frame. */
export class RunResultDto {
  @ApiProperty() run_id!: string;
  @ApiProperty({ description: 'Position in the run, from 1; the frame `id:`' }) sequence!: number;
  @ApiProperty({
    description:
      'Result type, the frame `event:` (message.delta, message.completed, tool.call.started, …, run.completed, run.failed)',
    example: 'message.delta',
  })
  type!: string;
  @ApiProperty({ type: 'object', additionalProperties: true, description: 'The payload of the result type' })
  data!: Record<string, unknown>;
  @ApiProperty({ ...USAGE, nullable: true, description: 'Usage reported with this result, if any' })
  usage!: Record<string, unknown> | null;
  @ApiProperty({ enum: ['runner', 'host'], description: 'host: a verdict of the host (timeout, cancel, …)' })
  source!: string;
  @ApiProperty({ nullable: true, type: Number, description: 'Epoch milliseconds given by the runner' })
  timestamp!: number | null;
}

/**
 * One SSE frame of GET /v1/runs/{run_id}/events, as its fields: the body is `text/event-stream`
 * (`id: …\nevent: …\ndata: …\n\n`), not JSON.
 */
export class RunEventFrameDto {
  @ApiProperty({ description: 'The result sequence; resume with Last-Event-ID or ?after=' }) id!: number;
  @ApiProperty({ description: 'The result type: frames are named, so EventSource.onmessage never fires' })
  event!: string;
  @ApiProperty({ type: RunResultDto, description: 'The result, one line of JSON' }) data!: RunResultDto;
}

export class StreamTokenDto {
  @ApiProperty({ description: "Pass as ?stream_token= on this run's event stream" }) token!: string;
  @ApiProperty() run_id!: string;
  @ApiProperty({ description: 'After this the token is refused (a stream already open goes on)' })
  expires_at!: string;
  @ApiProperty({ description: "The run's event stream with the token, relative to the API root" })
  events_url!: string;
}
