import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

/** The answer of `POST /v1/events` (its body: apps/host/src/http/schemas/event.schema.ts). */
export class AdmissionDto {
  @ApiProperty() event_id!: string;
  @ApiProperty({
    enum: ['started', 'steered', 'queued'],
    description:
      'What the host did with the event: started a run; steered it into the active run of its conversation (the runner pulls it); queued it as a run that starts when the conversation is free. A duplicate (HTTP 200) answers the original disposition; rejected events get 409.',
  })
  disposition!: string;
  @ApiProperty({
    nullable: true,
    type: String,
    description: 'The run it concerns: the run started, the run it was steered into, or the run it will start as',
  })
  run_id!: string | null;
  @ApiPropertyOptional({ description: "steered: the item's position in the run's steering queue (1 = first)" })
  position?: number;
  @ApiPropertyOptional({ description: 'interrupt: the active run being cancelled for this event' })
  interrupted_run_id?: string;
}
