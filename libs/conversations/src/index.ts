export { ConversationsModule } from './conversations.module';
export {
  TranscriptService,
  conversationOf,
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
export type { ConversationScope } from '@libs/persistence';
export { EventLogService, eventRecord, type EventRecord } from './event-log.service';
export { StateService, STATE_LIST_LIMIT, STATE_VALUE_LIMIT, stateSnapshotOf, type ScopeKeys } from './state.service';
