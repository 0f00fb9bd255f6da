import { Module } from '@nestjs/common';
import { EventLogService } from './event-log.service';
import { StateService } from './state.service';
import { TranscriptService } from './transcript.service';

@Module({
  providers: [TranscriptService, EventLogService, StateService],
  exports: [TranscriptService, EventLogService, StateService],
})
export class ConversationsModule {}
