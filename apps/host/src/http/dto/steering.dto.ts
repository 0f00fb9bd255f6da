import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional, IsString, MaxLength } from 'class-validator';
import { PageQueryDto } from './admin.dto';

export const ITEM_STATES = ['queued', 'injected', 'redispatched', 'waiting'];

export class SteeringQueryDto extends PageQueryDto {
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(255) conversation_id?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(128) agent_id?: string;
  @ApiPropertyOptional({
    description: "Only this workspace's conversations (with agent_id and conversation_id: one conversation)",
  })
  @IsOptional()
  @IsString()
  @MaxLength(255)
  workspace_id?: string;
  @ApiPropertyOptional({ description: 'Items steered into this run' })
  @IsOptional()
  @IsString()
  @MaxLength(64)
  run_id?: string;
  @ApiPropertyOptional({ enum: ITEM_STATES }) @IsOptional() @IsIn(ITEM_STATES) state?: string;
}

export class TimelineQueryDto {
  @ApiPropertyOptional({ description: 'Only this agent (a conversation id may be shared by agents)' })
  @IsOptional()
  @IsString()
  @MaxLength(128)
  agent_id?: string;
}

export class SteeringItemDto {
  @ApiProperty({ description: 'Arrival order (and cursor)' }) id!: number;
  @ApiProperty() event_id!: string;
  @ApiProperty({ enum: ['steer', 'queue'], description: 'steer: into an active run; queue: waits as a run of its own' })
  kind!: string;
  @ApiProperty({
    enum: ITEM_STATES,
    description:
      'steer: queued (not pulled yet) → injected (pulled) | redispatched (its run ended first: recorded steering.dropped, then run on its own); queue: waiting',
  })
  state!: string;
  @ApiProperty({ nullable: true, type: String, enum: ['waiting', 'started', 'failed'] }) dispatch!: string | null;
  @ApiProperty() agent_id!: string;
  @ApiProperty({ nullable: true, type: String, description: 'Part of the conversation key' }) workspace_id!:
    string | null;
  @ApiProperty() conversation_id!: string;
  @ApiProperty({ nullable: true, type: String }) thread_id!: string | null;
  @ApiProperty({ nullable: true, type: String, description: 'The run it was steered into' }) run_id!: string | null;
  @ApiProperty({ nullable: true, type: Number, description: "Position in that run's queue" }) position!: number | null;
  @ApiProperty({ nullable: true, type: String, description: 'The run it starts (started) as' }) next_run_id!:
    string | null;
  @ApiProperty({ nullable: true, type: String, enum: ['all', 'one'] }) pull_mode!: string | null;
  @ApiProperty({ description: 'The input text (first 200 characters)' }) text!: string;
  @ApiProperty() created_at!: string;
  @ApiProperty({ nullable: true, type: String }) injected_at!: string | null;
  @ApiProperty({ nullable: true, type: String }) dropped_at!: string | null;
  @ApiProperty({ nullable: true, type: String }) redispatched_at!: string | null;
  @ApiProperty({ nullable: true, type: String }) started_at!: string | null;
}

export class ActiveRunQueueDto {
  @ApiProperty() run_id!: string;
  @ApiProperty() agent_id!: string;
  @ApiProperty({ nullable: true, type: String }) workspace_id!: string | null;
  @ApiProperty({ nullable: true, type: String }) conversation_id!: string | null;
  @ApiProperty({ nullable: true, type: String }) thread_id!: string | null;
  @ApiProperty({ description: 'The run may pull steering items' }) steering_pull!: boolean;
  @ApiProperty() started_at!: string;
  @ApiProperty({ type: [SteeringItemDto], description: 'Items not pulled yet, in order' }) queue!: SteeringItemDto[];
}

export class SteeringViewDto {
  @ApiProperty({ type: [ActiveRunQueueDto] }) active_runs!: ActiveRunQueueDto[];
  @ApiProperty({ type: [SteeringItemDto], description: 'Items matching the filter, newest first' })
  items!: SteeringItemDto[];
  @ApiProperty({ nullable: true, type: String }) next_cursor!: string | null;
}

export class TimelineEntryDto {
  @ApiProperty() at!: string;
  @ApiProperty({
    description:
      'event (detail.disposition), run.created, run.started, run.ended (detail.status), steering.injected, steering.dropped, steering.redispatched, interaction.requested (detail.kind, title, expires_at), interaction.submitted (detail.action_id; event_id: the event it started), interaction.expired, interaction.superseded (detail.status_reason)',
  })
  type!: string;
  @ApiProperty({ nullable: true, type: String }) event_id!: string | null;
  @ApiProperty({ nullable: true, type: String }) run_id!: string | null;
  @ApiProperty({ type: 'object', additionalProperties: true }) detail!: Record<string, unknown>;
}

export class TimelineDto {
  @ApiProperty() conversation_id!: string;
  @ApiProperty({ type: [TimelineEntryDto], description: 'Oldest first (up to 500 of each kind)' })
  entries!: TimelineEntryDto[];
}
