import { ownedWhere } from './owned-where';
import { Injectable, type OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import type { Database } from 'better-sqlite3';
import { DataSource, In, LessThan, MoreThan, QueryFailedError, Repository } from 'typeorm';
import { AgentEntity, KbChunkEntity, KbDocumentEntity, KnowledgeBaseEntity, type JsonObject } from '../entities';
import type { HostDataSourceOptions } from '../data-source';
import { defaultReadWorkers, SqliteReadWorker } from '../sqlite-read-worker';
import { Transactions } from '../transactions';

export type NewKbChunk = Omit<KbChunkEntity, 'id' | 'kb_id' | 'document_id'>;
/** Equality on one chunk metadata key (the key matches `^[A-Za-z0-9_][A-Za-z0-9_.:-]*$`). */
export type KbMetadataFilter = [key: string, value: string | number | boolean | null];

export interface KbChunkHit {
  id: number;
  content: string;
  metadata: JsonObject;
  /** Relevance relative to the best hit of the same search: 1 for it, in (0, 1] for the others. */
  score: number;
}

export interface KbStats {
  document_count: number;
  chunk_count: number;
}

const INSERT_BATCH = 500;

/**
 * Knowledge bases, their documents and searchable chunks (FTS5 on SQLite, tsvector on PostgreSQL).
 * A document is written in batches, each its own short transaction, and is listed, counted and
 * searched only once `ready`; a deleted one is `deleting` (invisible) while its chunks are removed
 * in batches (docs/models-tools-knowledge.md#uploads-in-batches). On a SQLite file database,
 * searches run in a worker thread (docs/models-tools-knowledge.md#searches-off-the-event-loop).
 */
@Injectable()
export class KnowledgeRepository implements OnModuleDestroy {
  private readonly searches: SqliteReadWorker | undefined;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(KnowledgeBaseEntity) private readonly kbs: Repository<KnowledgeBaseEntity>,
    @InjectRepository(KbDocumentEntity) private readonly docs: Repository<KbDocumentEntity>,
    private readonly tx: Transactions,
  ) {
    const sqlite = this.pg ? undefined : (db.driver as { databaseConnection?: Database }).databaseConnection;
    // `:memory:` has no file another connection could open: its searches stay on the host's connection.
    // A small pool: concurrent searches run side by side (docs/models-tools-knowledge.md#searches-off-the-event-loop).
    const size = (db.options as HostDataSourceOptions).searchWorkers ?? defaultReadWorkers();
    this.searches = sqlite && !sqlite.memory ? new SqliteReadWorker(sqlite.name, size) : undefined;
  }

  async onModuleDestroy(): Promise<void> {
    await this.searches?.close();
  }

  private get pg(): boolean {
    return this.db.options.type === 'postgres';
  }

  private param(n: number): string {
    return this.pg ? `$${n}` : '?';
  }

  /** false when a knowledge base with this id exists. */
  async insertKnowledgeBase(kb: KnowledgeBaseEntity): Promise<boolean> {
    try {
      await this.kbs.insert(kb);
      return true;
    } catch (e) {
      if (isUniqueViolation(e)) {
        return false;
      }
      throw e;
    }
  }

  async getKnowledgeBase(kbId: string): Promise<KnowledgeBaseEntity | null> {
    return this.kbs.findOne({ where: { kb_id: kbId } });
  }

  /** Knowledge bases ordered by id, after `afterId`, at most `limit` (all of them without a limit). */
  /** Of `scope`'s workspaces or shared (null: all: docs/tenancy.md#isolation). */
  async knowledgeBases(
    afterId: string | null = null,
    limit?: number,
    scope: readonly string[] | null = null,
  ): Promise<KnowledgeBaseEntity[]> {
    return this.kbs.find({
      where: ownedWhere<KnowledgeBaseEntity>(afterId ? { kb_id: MoreThan(afterId) } : {}, scope),
      order: { kb_id: 'ASC' },
      take: limit,
    });
  }

  /** Document and chunk counts of the given knowledge bases (absent ones count zero). */
  async stats(kbIds: string[]): Promise<Map<string, KbStats>> {
    const out = new Map<string, KbStats>(kbIds.map((id) => [id, { document_count: 0, chunk_count: 0 }]));
    if (kbIds.length === 0) {
      return out;
    }
    const rows = await this.docs
      .createQueryBuilder('d')
      .select('d.kb_id', 'kb_id')
      .addSelect('COUNT(*)', 'documents')
      .addSelect('COALESCE(SUM(d.chunk_count), 0)', 'chunks')
      .where('d.kb_id IN (:...kbIds)', { kbIds })
      .andWhere(`d.status = 'ready'`)
      .groupBy('d.kb_id')
      .getRawMany<{ kb_id: string; documents: number | string; chunks: number | string }>();
    for (const r of rows) {
      out.set(r.kb_id, { document_count: Number(r.documents), chunk_count: Number(r.chunks) });
    }
    return out;
  }

  /** Ids of the agents whose resource policy names the knowledge base. */
  async agentsUsing(kbId: string): Promise<string[]> {
    const rows = await this.db
      .getRepository(AgentEntity)
      .createQueryBuilder('a')
      .select(['a.agent_id', 'a.resource_policy'])
      .where('a.resource_policy LIKE :pattern', { pattern: `%${kbId}%` })
      .orderBy('a.agent_id', 'ASC')
      .getMany();
    return rows
      .filter((a) => {
        const ids = (a.resource_policy as { allowed_kb_ids?: unknown }).allowed_kb_ids;
        return Array.isArray(ids) && ids.includes(kbId);
      })
      .map((a) => a.agent_id);
  }

  /**
   * Deletes a knowledge base; its documents (uploads in progress included) become `deleting` in the
   * same transaction, invisible at once; `purgeDocument` removes their chunks. False when absent.
   */
  async deleteKnowledgeBase(kbId: string): Promise<boolean> {
    return this.tx.run(async (m) => {
      const r = await m.delete(KnowledgeBaseEntity, { kb_id: kbId });
      if ((r.affected ?? 0) === 0) {
        return false;
      }
      await m.update(KbDocumentEntity, { kb_id: kbId }, { status: 'deleting', updated_at: Date.now() });
      return true;
    });
  }

  /**
   * Starts an upload: the document row, `writing` (invisible), with no chunks yet; false (nothing
   * written) when the knowledge base does not exist. On PostgreSQL the knowledge base row is
   * share-locked, so a concurrent delete either waits for this row (and marks it `deleting`) or
   * wins before it.
   */
  async beginDocument(doc: KbDocumentEntity): Promise<boolean> {
    return this.tx.run(async (m) => {
      const lock = this.pg ? ' FOR SHARE' : '';
      const found: unknown[] = await m.query(
        `SELECT "kb_id" FROM "knowledge_bases" WHERE "kb_id" = ${this.param(1)}${lock}`,
        [doc.kb_id],
      );
      if (found.length === 0) {
        return false;
      }
      await m.insert(KbDocumentEntity, { ...doc, status: 'writing', updated_at: Date.now() });
      return true;
    });
  }

  /**
   * Appends chunks to a document being written, in one short transaction; false (nothing written)
   * when it is no longer `writing` — its knowledge base was deleted, or the upload was given up as
   * abandoned. On PostgreSQL the document row is locked, so neither happens during the batch.
   */
  async appendChunks(doc: Pick<KbDocumentEntity, 'kb_id' | 'document_id'>, chunks: NewKbChunk[]): Promise<boolean> {
    return this.tx.run(async (m) => {
      const lock = this.pg ? ' FOR UPDATE' : '';
      const rows: Array<{ status: string }> = await m.query(
        `SELECT "status" FROM "kb_documents" WHERE "document_id" = ${this.param(1)}${lock}`,
        [doc.document_id],
      );
      if (rows[0]?.status !== 'writing') {
        return false;
      }
      await m.update(KbDocumentEntity, { document_id: doc.document_id }, { updated_at: Date.now() });
      for (let i = 0; i < chunks.length; i += INSERT_BATCH) {
        const values = chunks
          .slice(i, i + INSERT_BATCH)
          .map((c) => ({ ...c, kb_id: doc.kb_id, document_id: doc.document_id }));
        await m.createQueryBuilder().insert().into(KbChunkEntity).values(values).updateEntity(false).execute();
      }
      return true;
    });
  }

  /** Makes a written document visible: `ready`, with its chunk count; false when it is no longer `writing`. */
  async completeDocument(documentId: string, chunkCount: number): Promise<boolean> {
    const r = await this.docs.update(
      { document_id: documentId, status: 'writing' },
      { status: 'ready', chunk_count: chunkCount, updated_at: Date.now() },
    );
    return (r.affected ?? 0) > 0;
  }

  /** Gives an upload up: `writing` → `deleting` (`purgeDocument` then removes what it wrote). */
  async abandonDocument(documentId: string): Promise<void> {
    await this.docs.update(
      { document_id: documentId, status: 'writing' },
      { status: 'deleting', updated_at: Date.now() },
    );
  }

  /**
   * Uploads no batch has touched for `abandonAfterMs`, except `live` ones, become `deleting`: a
   * process died mid-upload. On SQLite, which one process owns (docs/durability.md#one-process-per-sqlite-database),
   * every upload but `live` ones is such a one, whatever its age. On PostgreSQL an upload's batch
   * holds its row's lock: this update waits for it, then sees its new `updated_at` and leaves it.
   */
  async abandonStaleUploads(live: ReadonlySet<string>, abandonAfterMs: number): Promise<number> {
    const before = this.pg ? Date.now() - abandonAfterMs : Number.MAX_SAFE_INTEGER;
    const stale = await this.docs.find({
      select: { document_id: true },
      where: { status: 'writing', updated_at: LessThan(before) },
    });
    let abandoned = 0;
    for (const { document_id } of stale) {
      if (!live.has(document_id)) {
        const r = await this.docs.update(
          { document_id, status: 'writing', updated_at: LessThan(before) },
          { status: 'deleting', updated_at: Date.now() },
        );
        abandoned += r.affected ?? 0;
      }
    }
    return abandoned;
  }

  /** Ids of documents being deleted, at most `limit`. */
  async deletingDocuments(limit: number): Promise<string[]> {
    const rows = await this.docs.find({
      select: { document_id: true },
      where: { status: 'deleting' },
      order: { document_id: 'ASC' },
      take: limit,
    });
    return rows.map((r) => r.document_id);
  }

  /**
   * Removes chunks of a `deleting` document in one short transaction — up to `rows` of them, and
   * no more than about `chars` characters of content (their index entries go with them) — and,
   * once none is left, the document row. True when the document is gone.
   */
  async purgeDocument(documentId: string, rows: number, chars: number): Promise<boolean> {
    return this.tx.run(async (m) => {
      const found: Array<{ id: number | string; size: number | string }> = await m.query(
        `SELECT "id", length("content") AS "size" FROM "kb_chunks" WHERE "document_id" = ${this.param(1)} LIMIT ${this.param(2)}`,
        [documentId, rows],
      );
      if (found.length > 0) {
        const ids: number[] = [];
        let total = 0;
        for (const r of found) {
          ids.push(Number(r.id));
          total += Number(r.size);
          if (total >= chars) {
            break;
          }
        }
        await m.delete(KbChunkEntity, { id: In(ids) });
        return false;
      }
      await m.delete(KbDocumentEntity, { document_id: documentId, status: 'deleting' });
      return true;
    });
  }

  /** A ready document (uploads in progress and deleted documents are not found). */
  async getDocument(kbId: string, documentId: string): Promise<KbDocumentEntity | null> {
    return this.docs.findOne({ where: { kb_id: kbId, document_id: documentId, status: 'ready' } });
  }

  /** Ready documents of a knowledge base ordered by id (ids sort by creation time), after `afterId`. */
  async documents(kbId: string, afterId: string | null, limit: number): Promise<KbDocumentEntity[]> {
    return this.docs.find({
      where: afterId
        ? { kb_id: kbId, status: 'ready', document_id: MoreThan(afterId) }
        : { kb_id: kbId, status: 'ready' },
      order: { document_id: 'ASC' },
      take: limit,
    });
  }

  /** Deletes a ready document: `deleting` at once (invisible); `purgeDocument` removes its chunks. False when absent. */
  async deleteDocument(kbId: string, documentId: string): Promise<boolean> {
    const r = await this.docs.update(
      { kb_id: kbId, document_id: documentId, status: 'ready' },
      { status: 'deleting', updated_at: Date.now() },
    );
    return (r.affected ?? 0) > 0;
  }

  /**
   * Chunks of one knowledge base's ready documents matching any of `words` and every filter, best
   * first, at most `limit`. Words are plain words (letters, digits, marks): each goes in quoted, so nothing the
   * caller typed is read as full-text syntax. Both sides stem (FTS5 `porter`, PostgreSQL `english`:
   * migration KbStemming), so "erupt" finds "erupts". PostgreSQL matches and ranks on the stored
   * vector `content_tsv` (migration KbStoredTsvector), not on the text parsed again. SQLite ranks by bm25 (negative, lower is
   * better), PostgreSQL by ts_rank; either raw figure means little to a reader (bm25 of a few
   * chunks is ~1e-6), so the score is each hit's relevance as a share of the best hit's.
   */
  async search(kbId: string, words: string[], filters: KbMetadataFilter[], limit: number): Promise<KbChunkHit[]> {
    if (words.length === 0) {
      return [];
    }
    const params: unknown[] = [];
    const p = (v: unknown) => {
      params.push(v);
      return this.pg ? `$${params.length}` : '?';
    };
    type Row = { id: number | string; content: string; metadata: string; rank: number | string };
    // Chunks of documents not (or no longer) ready are left out: the few such documents of this
    // knowledge base are read once per search (a partial index), not joined per matching chunk.
    const unready = () =>
      `c."document_id" NOT IN (SELECT "document_id" FROM "kb_documents" WHERE "kb_id" = ${p(kbId)} AND "status" <> 'ready')`;
    const rows: Row[] = this.pg
      ? await this.db.query(
          `SELECT c."id", c."content", c."metadata", ts_rank(c."content_tsv", q) AS "rank"
             FROM "kb_chunks" c CROSS JOIN to_tsquery('english', ${p(words.map((w) => `'${w}'`).join(' | '))}) q
            WHERE c."content_tsv" @@ q AND c."kb_id" = ${p(kbId)} AND ${unready()}
              ${filters.map(([k, v]) => `AND (c."metadata"::jsonb -> ${p(k)}::text) = ${p(JSON.stringify(v))}::jsonb`).join(' ')}
            ORDER BY "rank" DESC, c."id" ASC LIMIT ${p(limit)}`,
          params,
        )
      : await this.sqliteRead<Row>(
          `SELECT c."id", c."content", c."metadata", bm25("kb_chunks_fts") AS "rank"
             FROM "kb_chunks_fts" JOIN "kb_chunks" c ON c."id" = "kb_chunks_fts"."rowid"
            WHERE "kb_chunks_fts" MATCH ${p(words.map((w) => `"${w}"`).join(' OR '))} AND c."kb_id" = ${p(kbId)}
              AND ${unready()}
              ${filters.map((f) => `AND ${sqliteFilter(f, p)}`).join(' ')}
            ORDER BY "rank" ASC, c."id" ASC LIMIT ${p(limit)}`,
          params,
        );
    // Relevance, higher is better: ts_rank as is, bm25 negated.
    const relevance = rows.map((r) => (this.pg ? Number(r.rank) : -Number(r.rank)));
    const best = relevance[0] ?? 0;
    return rows.map((r, i) => ({
      id: Number(r.id),
      content: r.content,
      metadata: JSON.parse(r.metadata) as JsonObject,
      // Rows come best first; a degenerate best (0) makes every hit equally good.
      score: best > 0 ? Math.min(1, Math.max(relevance[i], 0) / best) : 1,
    }));
  }

  /** A SQLite read: in the worker thread on a file database, on the host's connection for `:memory:`. */
  private sqliteRead<T>(sql: string, params: unknown[]): Promise<T[]> {
    return this.searches ? this.searches.all<T>(sql, params) : this.db.query(sql, params);
  }
}

/** Type-exact equality on a JSON key in SQLite (json_extract alone would take true for 1). */
function sqliteFilter([key, value]: KbMetadataFilter, p: (v: unknown) => string): string {
  const path = p(`$."${key}"`);
  const type = `json_type(c."metadata", ${path})`;
  if (value === null) {
    return `${type} = 'null'`;
  }
  if (typeof value === 'boolean') {
    return `${type} = '${value ? 'true' : 'false'}'`;
  }
  const types = typeof value === 'number' ? `IN ('integer', 'real')` : `= 'text'`;
  return `${type} ${types} AND json_extract(c."metadata", ${p(`$."${key}"`)}) = ${p(value)}`;
}

function isUniqueViolation(e: unknown): boolean {
  const code = e instanceof QueryFailedError ? (e.driverError as { code?: string } | undefined)?.code : undefined;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}
