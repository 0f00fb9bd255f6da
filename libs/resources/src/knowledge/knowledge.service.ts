import { DEFAULT_OWNER, type Owner } from '../owner';
import { randomBytes } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import type { CatalogKnowledgeBase } from '@libs/authz';
import { KnowledgeRepository, type KbDocumentEntity, type KnowledgeBaseEntity } from '@libs/persistence';
import { DomainError, readPage } from '@libs/protocol';
import type { ResourceCall } from '../resource-call';
import { documentChunks } from './chunker';
import { KnowledgeUploads } from './knowledge-uploads';
import {
  chunkSettings,
  CONTENT_TYPES,
  documentMetadata,
  KB_ID_PATTERN,
  KB_LIMITS,
  metadataFilters,
  queryWords,
  topK,
  type DocumentContentType,
} from './knowledge.limits';
import {
  documentView,
  kbView,
  KB_TYPE,
  type DocumentView,
  type KnowledgeBaseView,
  type RetrievalEntry,
} from './knowledge.views';

export interface RetrieveRequest {
  kb_id: string;
  query_text: string;
  top_k?: number;
  filters?: Record<string, unknown>;
}

export interface KnowledgeBaseInput {
  name: string;
  description?: string;
  chunk_size?: number;
  chunk_overlap?: number;
}

export interface DocumentInput {
  name: string;
  content_type: string;
  content: string;
  metadata?: Record<string, unknown>;
}

const notFound = (kbId: string) => new DomainError('not_found', `knowledge base ${kbId} not found`, { kb_id: kbId });

/** Time-ordered document ids: listing by id lists in upload order. */
function newDocumentId(): string {
  return `doc_${Date.now().toString(36).padStart(10, '0')}${randomBytes(8).toString('hex')}`;
}

/** Knowledge bases: documents chunked on ingestion, retrieval by full-text search. */
@Injectable()
export class KnowledgeService {
  constructor(
    private readonly repo: KnowledgeRepository,
    private readonly uploads: KnowledgeUploads,
  ) {}

  async catalog(): Promise<CatalogKnowledgeBase[]> {
    return (await this.repo.knowledgeBases()).map((kb) => ({
      kb_id: kb.kb_id,
      kb_name: kb.name,
      kb_type: KB_TYPE,
      workspace_id: kb.workspace_id,
      shared: kb.shared,
    }));
  }

  async create(kbId: string, input: KnowledgeBaseInput, owner: Owner = DEFAULT_OWNER): Promise<KnowledgeBaseView> {
    if (!KB_ID_PATTERN.test(kbId)) {
      throw new DomainError('invalid_argument', 'kb_id must be 1-128 letters, digits, ".", "_", ":" or "-"', {
        field: 'kb_id',
      });
    }
    if (typeof input.name !== 'string' || input.name.trim() === '' || input.name.length > 255) {
      throw new DomainError('invalid_argument', 'name: must be 1-255 characters', { field: 'name' });
    }
    const now = Date.now();
    const kb: KnowledgeBaseEntity = {
      kb_id: kbId,
      ...owner,
      name: input.name,
      description: input.description ?? '',
      ...chunkSettings(input.chunk_size, input.chunk_overlap),
      created_at: now,
      updated_at: now,
    };
    if (!(await this.repo.insertKnowledgeBase(kb))) {
      throw new DomainError('conflict', `knowledge base ${kbId} already exists`, { kb_id: kbId });
    }
    return kbView(kb, undefined);
  }

  async get(kbId: string): Promise<KnowledgeBaseView> {
    const kb = await this.entity(kbId);
    return kbView(kb, (await this.repo.stats([kbId])).get(kbId));
  }

  async page(
    after: string | null,
    limit: number,
    scope: readonly string[] | null = null,
  ): Promise<{ items: KnowledgeBaseView[]; next_cursor: string | null }> {
    const { rows: page, next_cursor } = await readPage(
      limit,
      (n) => this.repo.knowledgeBases(after, n, scope),
      (kb) => kb.kb_id,
    );
    const stats = await this.repo.stats(page.map((kb) => kb.kb_id));
    return {
      items: page.map((kb) => kbView(kb, stats.get(kb.kb_id))),
      next_cursor,
    };
  }

  /**
   * Deletes a knowledge base with its documents and chunks. Refused (conflict) while an agent's
   * resource_policy.allowed_kb_ids names it: remove it from those agents first. Runs already
   * started with it get not_found from retrieve afterwards. Its documents are invisible at once;
   * their chunks are removed in batches before this resolves (docs/models-tools-knowledge.md#uploads-in-batches).
   */
  async remove(kbId: string): Promise<void> {
    await this.entity(kbId);
    const agents = await this.repo.agentsUsing(kbId);
    if (agents.length > 0) {
      throw new DomainError(
        'conflict',
        `knowledge base ${kbId} is used by agents ${agents.slice(0, 10).join(', ')}${agents.length > 10 ? ', …' : ''}; remove it from their resource_policy.allowed_kb_ids first`,
        { kb_id: kbId, agent_ids: agents.slice(0, 100) },
      );
    }
    if (!(await this.repo.deleteKnowledgeBase(kbId))) {
      throw notFound(kbId);
    }
    await this.uploads.sweep();
  }

  /**
   * Validates, chunks and stores a document with its chunks, in batches; searches and listings
   * see it only once all of it is stored (docs/models-tools-knowledge.md#uploads-in-batches).
   */
  async addDocument(kbId: string, input: DocumentInput): Promise<DocumentView> {
    const kb = await this.entity(kbId);
    if (typeof input.name !== 'string' || input.name.trim() === '' || input.name.length > 255) {
      throw new DomainError('invalid_argument', 'name: must be 1-255 characters', { field: 'name' });
    }
    if (!CONTENT_TYPES.includes(input.content_type as DocumentContentType)) {
      throw new DomainError('invalid_argument', `content_type: must be one of ${CONTENT_TYPES.join(', ')}`, {
        field: 'content_type',
      });
    }
    if (typeof input.content !== 'string' || input.content.trim() === '') {
      throw new DomainError('invalid_argument', 'content: must not be empty', { field: 'content' });
    }
    const size = Buffer.byteLength(input.content, 'utf8');
    if (size > KB_LIMITS.max_document_bytes) {
      throw new DomainError(
        'payload_too_large',
        `content is ${size} bytes; the limit is ${KB_LIMITS.max_document_bytes}`,
        {
          limit: KB_LIMITS.max_document_bytes,
        },
      );
    }
    if (input.content.includes('\u0000')) {
      throw new DomainError('invalid_argument', 'content: must not contain NUL characters', { field: 'content' });
    }
    const metadata = documentMetadata(input.metadata);
    const document_id = newDocumentId();
    const chunks = documentChunks(input.content, {
      chunk_size: kb.chunk_size,
      chunk_overlap: kb.chunk_overlap,
      markdown: input.content_type === 'text/markdown',
    });
    const name = input.name;
    const rows = (function* () {
      let position = 0;
      for (const c of chunks) {
        const chunkMetadata = {
          ...metadata,
          document_id,
          document_name: name,
          position,
          ...(c.heading !== null ? { heading: c.heading } : {}),
        };
        yield { position: position++, content: c.content, metadata: chunkMetadata };
      }
    })();
    const now = Date.now();
    const doc: KbDocumentEntity = {
      document_id,
      kb_id: kbId,
      name: input.name,
      content_type: input.content_type,
      metadata,
      size,
      chunk_count: 0,
      created_at: now,
      status: 'writing',
      updated_at: now,
    };
    doc.chunk_count = await this.uploads.write(doc, rows);
    doc.status = 'ready';
    return documentView(doc);
  }

  async documents(
    kbId: string,
    after: string | null,
    limit: number,
  ): Promise<{ items: DocumentView[]; next_cursor: string | null }> {
    await this.entity(kbId);
    const { rows, next_cursor } = await readPage(
      limit,
      (n) => this.repo.documents(kbId, after, n),
      (d) => d.document_id,
    );
    return { items: rows.map(documentView), next_cursor };
  }

  async document(kbId: string, documentId: string): Promise<DocumentView> {
    await this.entity(kbId);
    const doc = await this.repo.getDocument(kbId, documentId);
    if (!doc) {
      throw new DomainError('not_found', `document ${documentId} not found in knowledge base ${kbId}`, {
        kb_id: kbId,
        document_id: documentId,
      });
    }
    return documentView(doc);
  }

  /** The document is invisible at once; its chunks are removed in batches before this resolves. */
  async removeDocument(kbId: string, documentId: string): Promise<void> {
    await this.document(kbId, documentId);
    if (await this.repo.deleteDocument(kbId, documentId)) {
      await this.uploads.purge(documentId);
    }
  }

  /** Best chunks first; the same search serves runners (retrieve) and the admin API. */
  async search(kbId: string, req: Omit<RetrieveRequest, 'kb_id'>): Promise<RetrievalEntry[]> {
    const words = queryWords(req.query_text);
    const limit = topK(req.top_k);
    const filters = metadataFilters(req.filters);
    await this.entity(kbId);
    const hits = await this.repo.search(kbId, words, filters, limit);
    return hits.map((h) => ({
      id: String(h.id),
      content: [{ type: 'text', text: h.content }],
      metadata: h.metadata,
      distance: 1 - h.score,
      score: h.score,
    }));
  }

  /** Protocol v1 retrieval entries `{id, content, metadata, distance, score}`, best first. */
  async retrieve(call: ResourceCall, req: RetrieveRequest): Promise<RetrievalEntry[]> {
    if (call.signal.aborted) {
      throw new DomainError('unavailable', `run ${call.run_id} has ended`);
    }
    return this.search(req.kb_id, req);
  }

  private async entity(kbId: string): Promise<KnowledgeBaseEntity> {
    const kb = await this.repo.getKnowledgeBase(kbId);
    if (!kb) {
      throw notFound(kbId);
    }
    return kb;
  }
}
