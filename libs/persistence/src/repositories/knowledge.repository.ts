import { ownedWhere } from './owned-where';
import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, MoreThan, QueryFailedError, Repository, type EntityManager } from 'typeorm';
import { AgentEntity, KbChunkEntity, KbDocumentEntity, KnowledgeBaseEntity, type JsonObject } from '../entities';
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

/** Knowledge bases, their documents and searchable chunks (FTS5 on SQLite, tsvector on PostgreSQL). */
@Injectable()
export class KnowledgeRepository {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(KnowledgeBaseEntity) private readonly kbs: Repository<KnowledgeBaseEntity>,
    @InjectRepository(KbDocumentEntity) private readonly docs: Repository<KbDocumentEntity>,
    private readonly tx: Transactions,
  ) {}

  private get pg(): boolean {
    return this.db.options.type === 'postgres';
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

  /** Deletes a knowledge base with its documents and chunks, in one transaction; false when absent. */
  async deleteKnowledgeBase(kbId: string): Promise<boolean> {
    return this.tx.run(async (m) => {
      const r = await m.delete(KnowledgeBaseEntity, { kb_id: kbId });
      if ((r.affected ?? 0) === 0) {
        return false;
      }
      // By document: kb_chunks is indexed on (document_id, position). The FTS rows go with them.
      await m.query(
        `DELETE FROM "kb_chunks" WHERE "document_id" IN (SELECT "document_id" FROM "kb_documents" WHERE "kb_id" = ${this.pg ? '$1' : '?'})`,
        [kbId],
      );
      await m.delete(KbDocumentEntity, { kb_id: kbId });
      return true;
    });
  }

  /**
   * Stores a document and all its chunks atomically; false (nothing written) when the knowledge
   * base does not exist. On PostgreSQL the knowledge base row is share-locked, so a concurrent
   * delete either waits for the upload (and deletes it too) or wins before it starts.
   */
  async insertDocument(doc: KbDocumentEntity, chunks: NewKbChunk[]): Promise<boolean> {
    return this.tx.run(async (m) => {
      const lock = this.pg ? ' FOR SHARE' : '';
      const found: unknown[] = await m.query(
        `SELECT "kb_id" FROM "knowledge_bases" WHERE "kb_id" = ${this.pg ? '$1' : '?'}${lock}`,
        [doc.kb_id],
      );
      if (found.length === 0) {
        return false;
      }
      await m.insert(KbDocumentEntity, doc);
      for (let i = 0; i < chunks.length; i += INSERT_BATCH) {
        const rows = chunks
          .slice(i, i + INSERT_BATCH)
          .map((c) => ({ ...c, kb_id: doc.kb_id, document_id: doc.document_id }));
        await m.createQueryBuilder().insert().into(KbChunkEntity).values(rows).updateEntity(false).execute();
      }
      return true;
    });
  }

  async getDocument(kbId: string, documentId: string): Promise<KbDocumentEntity | null> {
    return this.docs.findOne({ where: { kb_id: kbId, document_id: documentId } });
  }

  /** Documents of a knowledge base ordered by id (ids sort by creation time), after `afterId`. */
  async documents(kbId: string, afterId: string | null, limit: number): Promise<KbDocumentEntity[]> {
    return this.docs.find({
      where: afterId ? { kb_id: kbId, document_id: MoreThan(afterId) } : { kb_id: kbId },
      order: { document_id: 'ASC' },
      take: limit,
    });
  }

  /** Deletes a document and its chunks in one transaction; false when absent. */
  async deleteDocument(kbId: string, documentId: string): Promise<boolean> {
    return this.tx.run(async (m: EntityManager) => {
      const r = await m.delete(KbDocumentEntity, { kb_id: kbId, document_id: documentId });
      if ((r.affected ?? 0) === 0) {
        return false;
      }
      await m.delete(KbChunkEntity, { document_id: documentId });
      return true;
    });
  }

  /**
   * Chunks of one knowledge base matching any of `words` and every filter, best first, at most
   * `limit`. Words are plain words (letters, digits, marks): each goes in quoted, so nothing the
   * caller typed is read as full-text syntax. Both sides stem (FTS5 `porter`, PostgreSQL `english`:
   * migration KbStemming), so "erupt" finds "erupts". SQLite ranks by bm25 (negative, lower is
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
    const rows: Array<{ id: number | string; content: string; metadata: string; rank: number | string }> = this.pg
      ? await this.db.query(
          `SELECT c."id", c."content", c."metadata", ts_rank(to_tsvector('english', c."content"), q) AS "rank"
             FROM "kb_chunks" c CROSS JOIN to_tsquery('english', ${p(words.map((w) => `'${w}'`).join(' | '))}) q
            WHERE to_tsvector('english', c."content") @@ q AND c."kb_id" = ${p(kbId)}
              ${filters.map(([k, v]) => `AND (c."metadata"::jsonb -> ${p(k)}::text) = ${p(JSON.stringify(v))}::jsonb`).join(' ')}
            ORDER BY "rank" DESC, c."id" ASC LIMIT ${p(limit)}`,
          params,
        )
      : await this.db.query(
          `SELECT c."id", c."content", c."metadata", bm25("kb_chunks_fts") AS "rank"
             FROM "kb_chunks_fts" JOIN "kb_chunks" c ON c."id" = "kb_chunks_fts"."rowid"
            WHERE "kb_chunks_fts" MATCH ${p(words.map((w) => `"${w}"`).join(' OR '))} AND c."kb_id" = ${p(kbId)}
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
