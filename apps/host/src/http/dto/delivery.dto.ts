import { ApiProperty } from '@nestjs/swagger';
import { DELIVERY_OP_TYPES } from '@libs/delivery';

export class DeliveryRecordDto {
  @ApiProperty() delivery_id!: string;
  @ApiProperty() run_id!: string;
  @ApiProperty() agent_id!: string;
  @ApiProperty({ description: 'Per run, from 1' }) sequence!: number;
  @ApiProperty({ enum: DELIVERY_OP_TYPES }) op!: string;
  @ApiProperty({ description: '`<run_id>:<sequence>`, the same on every retry' }) idempotency_key!: string;
  @ApiProperty({ nullable: true, type: 'object', additionalProperties: true })
  reply_target!: Record<string, unknown> | null;
  @ApiProperty({ nullable: true, type: String }) target_delivery_id!: string | null;
  @ApiProperty({ nullable: true, type: Number }) result_sequence!: number | null;
  @ApiProperty({ type: 'object', additionalProperties: true }) payload!: Record<string, unknown>;
  @ApiProperty() created_at!: string;
  @ApiProperty({ nullable: true, type: String }) webhook_url!: string | null;
  @ApiProperty({ enum: ['none', 'pending', 'delivered', 'failed'] }) webhook_state!: string;
  @ApiProperty() attempts!: number;
  @ApiProperty({ nullable: true, type: String }) next_attempt_at!: string | null;
  @ApiProperty({ nullable: true, type: String }) last_error!: string | null;
  @ApiProperty({ nullable: true, type: String }) delivered_at!: string | null;
}

export class DeliveryRecordPageDto {
  @ApiProperty({ type: [DeliveryRecordDto] }) items!: DeliveryRecordDto[];
  @ApiProperty({ nullable: true, type: String }) next_cursor!: string | null;
}

export class DeliveryRetryDto {
  @ApiProperty() run_id!: string;
  @ApiProperty({ description: 'How many failed ops of the run are pending again' }) retried!: number;
}
