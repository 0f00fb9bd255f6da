import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository } from 'typeorm';
import { EventLogEntity, TranscriptEntity } from '../entities';
import { HotStore } from '../hot/hot-store';
import { SQL } from '../hot/hot-sql';
import { appendTranscriptUnit, eventLogUnit } from '../hot/run-units';
import { one, rows } from '../hot/unit';

export type NewTranscriptRow = Omit<TranscriptEntity, 'id' | 'seq'>;

export interface TranscriptQuery {
  conversation_id: string;
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

  /** Highest transcript seq of a conversation's thread (`thread_id` null: rows without a thread); null when empty. */
  async latestSeq(conversationId: string, threadId: string | null): Promise<number | null> {
    const row = await this.hot.read(
      one<{ max: number | string | null }>(SQL.latestThreadSeq, [conversationId, threadId]),
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
  async transcriptSearch(conversationId: string, threadId: string | null, text: string, limit: number) {
    const pg = this.db.options.type === 'postgres';
    const thread = threadId === null ? 't.thread_id IS NULL' : 't.thread_id = :thread';
    const qb = this.transcript
      .createQueryBuilder('t')
      .where('t.conversation_id = :c', { c: conversationId })
      .andWhere(thread, { thread: threadId });
    if (pg) {
      qb.andWhere(`to_tsvector('simple', t.content) @@ plainto_tsquery('simple', :q)`, { q: text });
    } else {
      qb.andWhere(`t.id IN (SELECT rowid FROM transcript_fts WHERE transcript_fts MATCH :q)`, { q: ftsQuery(text) });
    }
    return qb.orderBy('t.seq', 'DESC').take(limit).getMany();
  }

  async getEvent(eventId: string): Promise<EventLogEntity | null> {
    return this.events.findOne({ where: { event_id: eventId }, order: { id: 'ASC' } });
  }

  async eventPage(
    conversationId: string,
    threadId: string | null,
    eventTypes: string[],
    before: number | undefined,
    limit: number,
  ): Promise<EventLogEntity[]> {
    const qb = this.events
      .createQueryBuilder('e')
      .where('e.conversation_id = :c', { c: conversationId })
      .andWhere(threadId === null ? 'e.thread_id IS NULL' : 'e.thread_id = :th', { th: threadId });
    if (eventTypes.length > 0) {
      qb.andWhere('e.event_type IN (:...types)', { types: eventTypes });
    }
    if (before !== undefined) {
      qb.andWhere('e.id < :before', { before });
    }
    return qb.orderBy('e.id', 'DESC').take(limit).getMany();
  }
}

/** Above every seq either database stores (INTEGER). */
const MAX_SEQ = 2_147_483_647;

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
    metadata: JSON.parse(String(r.metadata)) as TranscriptEntity['metadata'],
    created_at: Number(r.created_at),
  };
}

/** Each word as a quoted FTS5 phrase, AND-ed: user text never becomes FTS5 syntax. */
function ftsQuery(text: string): string {
  const words = text.match(/[\p{L}\p{N}_]+/gu) ?? [];
  return words.length === 0 ? '""' : words.map((w) => `"${w}"`).join(' ');
}
