import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository } from 'typeorm';
import { EventLogEntity, TranscriptEntity } from '../entities';
import { HotStore } from '../hot/hot-store';
import { SQL } from '../hot/hot-sql';
import { appendTranscriptUnit, eventLogUnit } from '../hot/run-units';
import { one } from '../hot/unit';

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

  async transcriptPage(q: TranscriptQuery): Promise<TranscriptEntity[]> {
    const qb = this.transcript.createQueryBuilder('t').where('t.conversation_id = :c', { c: q.conversation_id });
    if (q.thread_id !== undefined) {
      qb.andWhere(q.thread_id === null ? 't.thread_id IS NULL' : 't.thread_id = :th', { th: q.thread_id });
    }
    if (q.before !== undefined) {
      qb.andWhere('t.seq < :before', { before: q.before });
    }
    if (q.after !== undefined) {
      qb.andWhere('t.seq > :after', { after: q.after });
    }
    return qb
      .orderBy('t.seq', q.direction === 'forward' ? 'ASC' : 'DESC')
      .take(q.limit)
      .getMany();
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

/** Each word as a quoted FTS5 phrase, AND-ed: user text never becomes FTS5 syntax. */
function ftsQuery(text: string): string {
  const words = text.match(/[\p{L}\p{N}_]+/gu) ?? [];
  return words.length === 0 ? '""' : words.map((w) => `"${w}"`).join(' ');
}
