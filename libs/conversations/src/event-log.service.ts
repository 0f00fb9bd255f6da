import { Injectable } from '@nestjs/common';
import { cutPage } from '@libs/protocol';
import { ContextRepository, type ConversationScope, type EventLogEntity } from '@libs/persistence';
import { pageLimit, parseCursor } from './transcript.service';

export interface EventRecord {
  event_id: string;
  event_type: string;
  event_time: number | null;
  source: string;
  bot_id: string | null;
  workspace_id: string | null;
  conversation_id: string | null;
  thread_id: string | null;
  actor_type: string | null;
  actor_id: string | null;
  actor_name: string | null;
  subject_type: string | null;
  subject_id: string | null;
  input_summary: string;
  input_ref: null;
  raw_ref: null;
  seq: number;
  cursor: string;
  created_at: number;
  metadata: Record<string, unknown>;
  run_id: string | null;
}

export function eventRecord(e: EventLogEntity): EventRecord {
  return {
    event_id: e.event_id,
    event_type: e.event_type,
    event_time: e.event_time,
    source: e.source,
    bot_id: e.bot_id,
    workspace_id: e.workspace_id,
    conversation_id: e.conversation_id,
    thread_id: e.thread_id,
    actor_type: e.actor_type,
    actor_id: e.actor_id,
    actor_name: e.actor_name,
    subject_type: e.subject_type,
    subject_id: e.subject_id,
    input_summary: e.input_summary,
    input_ref: null,
    raw_ref: null,
    seq: e.id,
    cursor: String(e.id),
    created_at: Math.floor(e.created_at / 1000),
    metadata: e.metadata,
    run_id: e.run_id,
  };
}

/**
 * The event log (docs/conversations-and-steering.md#transcript-event-log-and-state): every inbound
 * event, redacted; read by event_get / event_page.
 */
@Injectable()
export class EventLogService {
  constructor(private readonly repo: ContextRepository) {}

  async get(eventId: string): Promise<EventLogEntity | null> {
    return this.repo.getEvent(eventId);
  }

  /** Event-log rows of one conversation (agent, workspace, conversation id, thread), newest first. */
  async page(
    conversation: ConversationScope | null,
    types: string[],
    beforeCursor: string | undefined,
    limit: number | undefined,
  ) {
    const n = pageLimit(limit);
    const before = parseCursor(beforeCursor, 'before_cursor');
    const rows = conversation ? await this.repo.eventPage(conversation, types, before, n + 1) : [];
    const items = rows.map(eventRecord);
    const { rows: page, has_more, next_cursor } = cutPage(items, n, (e) => e.cursor);
    return { items: page, has_more, next_cursor };
  }
}
