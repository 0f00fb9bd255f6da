import type { JsonObject, KbDocumentEntity, KbStats, KnowledgeBaseEntity } from '@libs/persistence';

export interface KnowledgeBaseView extends KbStats {
  kb_id: string;
  /** The owning workspace, and whether every workspace's runs may be granted it (docs/tenancy.md#resources). */
  workspace_id: string;
  shared: boolean;
  name: string;
  description: string;
  kb_type: string;
  chunk_size: number;
  chunk_overlap: number;
  created_at: string;
  updated_at: string;
}

export interface DocumentView {
  document_id: string;
  kb_id: string;
  name: string;
  content_type: string;
  metadata: JsonObject;
  size: number;
  chunk_count: number;
  created_at: string;
}

/** Protocol v1 RetrievalResultEntry. */
export interface RetrievalEntry {
  [key: string]: unknown;
  id: string;
  content: Array<{ type: 'text'; text: string }>;
  metadata: JsonObject;
  /** 1 - score: lower is closer. */
  distance: number;
  /** In [0, 1): higher is more relevant. */
  score: number;
}

/** The retrieval behind every knowledge base: full-text search in the host database. */
export const KB_TYPE = 'fulltext';

const iso = (ms: number) => new Date(ms).toISOString();

export function kbView(kb: KnowledgeBaseEntity, stats: KbStats | undefined): KnowledgeBaseView {
  return {
    kb_id: kb.kb_id,
    workspace_id: kb.workspace_id,
    shared: kb.shared,
    name: kb.name,
    description: kb.description,
    kb_type: KB_TYPE,
    chunk_size: kb.chunk_size,
    chunk_overlap: kb.chunk_overlap,
    document_count: stats?.document_count ?? 0,
    chunk_count: stats?.chunk_count ?? 0,
    created_at: iso(kb.created_at),
    updated_at: iso(kb.updated_at),
  };
}

export function documentView(d: KbDocumentEntity): DocumentView {
  return {
    document_id: d.document_id,
    kb_id: d.kb_id,
    name: d.name,
    content_type: d.content_type,
    metadata: d.metadata,
    size: d.size,
    chunk_count: d.chunk_count,
    created_at: iso(d.created_at),
  };
}
