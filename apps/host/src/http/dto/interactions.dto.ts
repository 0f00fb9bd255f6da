import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional } from 'class-validator';
import { PageQueryDto } from './admin.dto';

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
