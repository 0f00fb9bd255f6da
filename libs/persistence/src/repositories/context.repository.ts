import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository, type ObjectLiteral, type SelectQueryBuilder } from 'typeorm';
import { INT32_MAX } from '@libs/protocol';
import { EventLogEntity, TranscriptEntity } from '../entities';
import { HotStore } from '../hot/hot-store';
import { SQL } from '../hot/hot-sql';
import { appendTranscriptUnit, eventLogUnit } from '../hot/run-units';
import { one, rows } from '../hot/unit';
import type { NewTranscriptRow } from '../hot/transcript-row';

export type { NewTranscriptRow } from '../hot/transcript-row';

/**
 * One conversation: agent + workspace + conversation id + thread (null matches only null). Every
 * read of a run — history, search, events, the latest seq — is scoped by all four, so two agents,
 * or two workspaces of one agent, that happen to use the same conversation id never see each other.
 */
export interface ConversationScope {
  agent_id: string;
  workspace_id: string | null;
  conversation_id: string;
  thread_id: string | null;
}

export interface TranscriptQuery {
  conversation_id: string;
  /** Exact agent; undefined = every agent (the admin view only). */
  agent_id?: string;
  /** Exact workspace (null matches only rows without one); undefined = every workspace (the admin view only). */
  workspace_id?: string | null;
  /** Exact thread (null matches only rows without a thread); undefined = every thread. */
  thread_id?: string | null;
  before?: number;
  after?: number;
  direction: 'backward' | 'forward';
  limit: number;
}

/** Transcript and event log: the conversation facts the host records and runners page through. */
@Injectable()
export class ContextRepository {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(TranscriptEntity) private readonly transcript: Repository<TranscriptEntity>,
    @InjectRepository(EventLogEntity) private readonly events: Repository<EventLogEntity>,
    private readonly hot: HotStore,
  ) {}

  /** Highest transcript seq of one conversation; null when it has none. */
  async lastTranscriptSeq(c: ConversationScope): Promise<number | null> {
    const row = await this.hot.read(
      one<{ max: number | string | null }>(SQL.latestThreadSeq, [
        c.agent_id,
        c.conversation_id,
        c.workspace_id,
        c.thread_id,
      ]),
    );
    return row?.max === null || row?.max === undefined ? null : Number(row.max);
  }

  /** Appends a row with the next seq of its conversation, through the one writer. */
  async appendTranscript(row: NewTranscriptRow): Promise<TranscriptEntity> {
    const seq = await this.hot.write(() => appendTranscriptUnit(row));
    return { ...row, seq } as TranscriptEntity;
  }

  /** Appends an event-log row; resolves to its id (the event's position). */
  appendEvent(row: Omit<EventLogEntity, 'id'>): Promise<number> {
    return this.hot.write(() => eventLogUnit(row));
  }

  /** A page of the transcript, by prepared statement (HistoryPage is on the run path). */
  async transcriptPage(q: TranscriptQuery): Promise<TranscriptEntity[]> {
    const stmt = q.direction === 'forward' ? SQL.transcriptOldest : SQL.transcriptNewest;
    const found = await this.hot.read(
      rows<Record<string, unknown>>(stmt, [
        q.conversation_id,
        q.agent_id === undefined ? 1 : 0,
        q.agent_id ?? null,
        q.workspace_id === undefined ? 1 : 0,
        q.workspace_id ?? null,
        q.thread_id === undefined ? 1 : 0,
        q.thread_id ?? null,
        q.before ?? MAX_SEQ,
        q.after ?? 0,
        q.limit,
      ]),
    );
    return found.map(transcriptFromRow);
  }

  /** Full-text search in one conversation: FTS5 on SQLite, tsvector on PostgreSQL; newest first. */
  async transcriptSearch(c: ConversationScope, text: string, limit: number) {
    const pg = this.db.options.type === 'postgres';
    const qb = this.transcript.createQueryBuilder('t');
    whereConversation(qb, 't', c);
    if (pg) {
      qb.andWhere(`to_tsvector('simple', t.content) @@ plainto_tsquery('simple', :q)`, { q: text });
    } else {
      // Rows are indexed off the admission commit (hot/transcript-index.ts): catch up first.
      await this.hot.indexTranscript();
      qb.andWhere(`t.id IN (SELECT rowid FROM transcript_fts WHERE transcript_fts MATCH :q)`, { q: ftsQuery(text) });
    }
    return qb.orderBy('t.seq', 'DESC').take(limit).getMany();
  }

  async getEvent(eventId: string): Promise<EventLogEntity | null> {
    return this.events.findOne({ where: { event_id: eventId }, order: { id: 'ASC' } });
  }

  /** Event-log rows of one conversation, newest first. */
  async eventPage(
    c: ConversationScope,
    eventTypes: string[],
    before: number | undefined,
    limit: number,
  ): Promise<EventLogEntity[]> {
    const qb = this.events.createQueryBuilder('e');
    whereConversation(qb, 'e', c);
    if (eventTypes.length > 0) {
      qb.andWhere('e.event_type IN (:...types)', { types: eventTypes });
    }
    if (before !== undefined) {
      qb.andWhere('e.id < :before', { before });
    }
    return qb.orderBy('e.id', 'DESC').take(limit).getMany();
  }
}

/** Exactly one conversation's rows (null workspace or thread matches only null). */
function whereConversation<T extends ObjectLiteral>(
  qb: SelectQueryBuilder<T>,
  alias: string,
  c: ConversationScope,
): void {
  qb.where(`${alias}.agent_id = :scope_agent`, { scope_agent: c.agent_id })
    .andWhere(`${alias}.conversation_id = :scope_conversation`, { scope_conversation: c.conversation_id })
    .andWhere(c.workspace_id === null ? `${alias}.workspace_id IS NULL` : `${alias}.workspace_id = :scope_workspace`, {
      scope_workspace: c.workspace_id,
    })
    .andWhere(c.thread_id === null ? `${alias}.thread_id IS NULL` : `${alias}.thread_id = :scope_thread`, {
      scope_thread: c.thread_id,
    });
}

/** Above every seq either database stores (INTEGER). */
const MAX_SEQ = INT32_MAX;

function transcriptFromRow(r: Record<string, unknown>): TranscriptEntity {
  return {
    id: Number(r.id),
    conversation_id: String(r.conversation_id),
    thread_id: (r.thread_id as string | null) ?? null,
    seq: Number(r.seq),
    role: String(r.role),
    item_type: String(r.item_type),
    content: String(r.content),
    content_json: JSON.parse(String(r.content_json)) as TranscriptEntity['content_json'],
    attachment_refs: JSON.parse(String(r.attachment_refs)) as TranscriptEntity['attachment_refs'],
    event_id: (r.event_id as string | null) ?? null,
    run_id: (r.run_id as string | null) ?? null,
    agent_id: String(r.agent_id),
    workspace_id: (r.workspace_id as string | null) ?? null,
    metadata: JSON.parse(String(r.metadata)) as TranscriptEntity['metadata'],
    created_at: Number(r.created_at),
  };
}

/** Each word as a quoted FTS5 phrase, AND-ed: user text never becomes FTS5 syntax. */
function ftsQuery(text: string): string {
  const words = text.match(/[\p{L}\p{N}_]+/gu) ?? [];
  return words.length === 0 ? '""' : words.map((w) => `"${w}"`).join(' ');
}
