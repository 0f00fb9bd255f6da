import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository, type EntityManager } from 'typeorm';
import { EventLogEntity, TranscriptEntity } from '../entities';
import { Transactions } from '../transactions';

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
    private readonly tx: Transactions,
  ) {}

  /** Highest transcript seq of a conversation (null when empty). */
  async latestSeq(conversationId: string, m: EntityManager = this.db.manager): Promise<number | null> {
    const row = await m
      .createQueryBuilder(TranscriptEntity, 't')
      .select('MAX(t.seq)', 'max')
      .where('t.conversation_id = :conversationId', { conversationId })
      .getRawOne<{ max: number | string | null }>();
    return row?.max === null || row?.max === undefined ? null : Number(row.max);
  }

  /** Appends a row with the next seq of its conversation (inside the caller's transaction if given). */
  async appendTranscript(row: NewTranscriptRow, m?: EntityManager): Promise<TranscriptEntity> {
    const write = async (tx: EntityManager) => {
      if (this.db.options.type === 'postgres') {
        // Concurrent appends to one conversation would read the same MAX(seq) and collide on the
        // unique (conversation_id, seq): take the conversation's lock until the transaction ends.
        await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`transcript:${row.conversation_id}`]);
      }
      const seq = ((await this.latestSeq(row.conversation_id, tx)) ?? 0) + 1;
      const entity = { ...row, seq } as TranscriptEntity;
      await tx.insert(TranscriptEntity, entity);
      return entity;
    };
    return m ? write(m) : this.tx.run(write);
  }

  async appendEvent(row: Omit<EventLogEntity, 'id'>, m: EntityManager = this.db.manager): Promise<void> {
    await m.insert(EventLogEntity, row);
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
