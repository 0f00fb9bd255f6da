import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import {
  ContextRepository,
  type ConversationScope,
  type JsonObject,
  type NewTranscriptRow,
  type TranscriptEntity,
  type TranscriptQuery,
} from '@libs/persistence';
import { DomainError, cutPage } from '@libs/protocol';

export const TRANSCRIPT_CONTENT_LIMIT = 4000;
export const PAGE_LIMIT = 100;

export interface TranscriptItem {
  transcript_id: string;
  event_id: string | null;
  conversation_id: string;
  thread_id: string | null;
  agent_id: string;
  workspace_id: string | null;
  role: string;
  item_type: string;
  content: string;
  content_json: Record<string, unknown>;
  attachment_refs: Record<string, unknown>[];
  seq: number;
  cursor: string;
  created_at: number;
  metadata: Record<string, unknown>;
  run_id: string | null;
}

export interface HistoryPage {
  items: TranscriptItem[];
  next_cursor: string | null;
  prev_cursor: string | null;
  has_more: boolean;
}

export interface PageRequest {
  before_cursor?: string;
  after_cursor?: string;
  direction?: string;
  limit?: number;
  include_attachments?: boolean;
}

/**
 * The conversation a run (or an event) is about — agent + workspace + conversation id + thread —
 * or null when it names no conversation. The one key of every transcript and event-log read.
 */
export function conversationOf(scope: {
  agent_id: string;
  workspace_id: string | null;
  conversation_id: string | null;
  thread_id: string | null;
}): ConversationScope | null {
  const { agent_id, workspace_id, conversation_id, thread_id } = scope;
  return conversation_id === null ? null : { agent_id, workspace_id, conversation_id, thread_id };
}

const BASE64_KEYS = ['image_base64', 'file_base64'];

/** Removes base64 payloads (content elements, inline attachment contents) from a stored message. */
export function redactMessage(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(redactMessage);
  }
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    let redacted = false;
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      if (
        (BASE64_KEYS.includes(k) && typeof v === 'string') ||
        (k === 'content' && typeof v === 'string' && /^data:[^;]+;base64,/.test(v))
      ) {
        out[k] = null;
        redacted = true;
      } else {
        out[k] = redactMessage(v);
      }
    }
    return redacted ? { ...out, content_redacted: true } : out;
  }
  return value;
}

/** Text of a message: its string content, or its text parts joined with a space. */
export function messageText(content: unknown): string {
  if (typeof content === 'string') {
    return content;
  }
  if (Array.isArray(content)) {
    return content
      .filter(
        (p): p is { type: string; text: string } =>
          !!p && typeof p === 'object' && (p as { type?: unknown }).type === 'text',
      )
      .map((p) => p.text)
      .join(' ');
  }
  return '';
}

export function truncate(text: string, limit = TRANSCRIPT_CONTENT_LIMIT): string {
  return text.length <= limit ? text : `${text.slice(0, limit - 3)}...`;
}

export function parseCursor(value: string | undefined, field: string): number | undefined {
  if (value === undefined || value === '') {
    return undefined;
  }
  if (!/^\d{1,15}$/.test(value)) {
    throw new DomainError('invalid_argument', `${field}: must be a cursor returned by the host`, { field });
  }
  return Number(value);
}

/** A page size: 0/absent → the fallback; a positive integer, clamped to 100 (docs/protocol.md#page-and-list-limits). */
export function pageLimit(limit: number | undefined, fallback = 50, field = 'limit'): number {
  if (limit === undefined || limit === 0) {
    return fallback;
  }
  if (!Number.isInteger(limit) || limit < 1) {
    throw new DomainError('invalid_argument', `${field}: must be a positive integer (values above 100 count as 100)`, {
      field,
    });
  }
  return Math.min(limit, PAGE_LIMIT);
}

function item(row: TranscriptEntity, includeAttachments: boolean): TranscriptItem {
  return {
    transcript_id: String(row.id),
    event_id: row.event_id,
    conversation_id: row.conversation_id,
    thread_id: row.thread_id,
    agent_id: row.agent_id,
    workspace_id: row.workspace_id,
    role: row.role,
    item_type: row.item_type,
    content: row.content,
    content_json: row.content_json,
    attachment_refs: includeAttachments ? row.attachment_refs : [],
    seq: row.seq,
    cursor: String(row.seq),
    created_at: Math.floor(row.created_at / 1000),
    metadata: row.metadata,
    run_id: row.run_id,
  };
}

/**
 * The conversation transcript (docs/conversations-and-steering.md#transcript-event-log-and-state):
 * rows written by the host, pages and search for readers.
 */
@Injectable()
export class TranscriptService {
  constructor(private readonly repo: ContextRepository) {}

  /** Highest seq of one conversation (agent, workspace, conversation id, thread). */
  async latestSeq(conversation: ConversationScope): Promise<number | null> {
    return this.repo.lastTranscriptSeq(conversation);
  }

  /** The assistant row of a run (written once per run, with the run's end), keyed like every row. */
  assistantRow(
    scope: ConversationScope & { run_id: string; runner_id: string },
    message: Record<string, unknown>,
  ): NewTranscriptRow {
    return {
      conversation_id: scope.conversation_id,
      thread_id: scope.thread_id,
      workspace_id: scope.workspace_id,
      role: 'assistant',
      item_type: 'message',
      content: truncate(messageText(message.content)),
      content_json: redactMessage(message) as JsonObject,
      attachment_refs: [],
      event_id: randomUUID(),
      run_id: scope.run_id,
      agent_id: scope.agent_id,
      metadata: { run_id: scope.run_id, runner_id: scope.runner_id },
      created_at: Date.now(),
    };
  }

  /**
   * A page of one conversation (a run's HistoryPage): agent, workspace and thread all matched.
   * No conversation (null): the request is still checked, and the page is empty.
   */
  page(conversation: ConversationScope | null, req: PageRequest): Promise<HistoryPage> {
    return this.pageOf(conversation, req);
  }

  /**
   * The admin view: rows of a conversation id, optionally narrowed to an agent, a workspace and a
   * thread (each undefined: not filtered). Never for a run's reads.
   */
  browse(filter: Omit<TranscriptQuery, 'before' | 'after' | 'direction' | 'limit'>, req: PageRequest) {
    return this.pageOf(filter, req);
  }

  /** backward (default): newest first, `before_cursor`; forward: oldest first, `after_cursor`. */
  private async pageOf(
    filter: Omit<TranscriptQuery, 'before' | 'after' | 'direction' | 'limit'> | null,
    req: PageRequest,
  ): Promise<HistoryPage> {
    const direction = req.direction ?? 'backward';
    if (direction !== 'backward' && direction !== 'forward') {
      throw new DomainError('invalid_argument', 'direction: must be "backward" or "forward"', { field: 'direction' });
    }
    const limit = pageLimit(req.limit);
    const before = parseCursor(req.before_cursor, 'before_cursor');
    const after = parseCursor(req.after_cursor, 'after_cursor');
    const rows = filter
      ? await this.repo.transcriptPage({ ...filter, before, after, direction, limit: limit + 1 })
      : [];
    const { rows: page, has_more, next_cursor } = cutPage(rows, limit, (r) => r.seq);
    const items = page.map((r) => item(r, req.include_attachments ?? false));
    return {
      items,
      has_more,
      next_cursor,
      prev_cursor: items.length > 0 ? items[0].cursor : null,
    };
  }

  /** Full-text search in one conversation (a run's HistorySearch), newest first. */
  async search(conversation: ConversationScope | null, query: string, topK: number | undefined) {
    if (query.trim() === '') {
      throw new DomainError('invalid_argument', 'query: must not be empty', { field: 'query' });
    }
    if (query.length > 1000) {
      throw new DomainError('invalid_argument', 'query: at most 1000 characters', { field: 'query' });
    }
    const limit = pageLimit(topK, 10, 'top_k');
    const rows = conversation ? await this.repo.transcriptSearch(conversation, query, limit) : [];
    return { items: rows.map((r) => item(r, false)), total_count: rows.length, query };
  }
}

export type { NewTranscriptRow };
