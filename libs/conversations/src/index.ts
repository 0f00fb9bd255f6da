export { ConversationsModule } from './conversations.module';
export {
  TranscriptService,
  messageText,
  redactMessage,
  truncate,
  pageLimit,
  parseCursor,
  TRANSCRIPT_CONTENT_LIMIT,
  type HistoryPage,
  type PageRequest,
  type TranscriptItem,
} from './transcript.service';
export { EventLogService, eventRecord, type EventRecord } from './event-log.service';
export { StateService, STATE_VALUE_LIMIT, type ScopeKeys } from './state.service';
