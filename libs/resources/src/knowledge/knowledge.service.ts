import { Injectable } from '@nestjs/common';
import type { CatalogKnowledgeBase } from '@libs/authz';
import { DomainError } from '@libs/protocol';
import type { ResourceCall } from '../resource-call';

export interface RetrieveRequest {
  kb_id: string;
  query_text: string;
  top_k?: number;
  filters?: Record<string, unknown>;
}

/** Knowledge bases: documents chunked on ingestion, retrieval by full-text search. */
@Injectable()
export class KnowledgeService {
  catalog(): Promise<CatalogKnowledgeBase[]> {
    return Promise.resolve([]);
  }

  /** Protocol v1 retrieval entries `{id, content, metadata, distance, score}`, best first. */
  retrieve(_call: ResourceCall, _req: RetrieveRequest): Promise<Record<string, unknown>[]> {
    return Promise.reject(new DomainError('unavailable', 'knowledge retrieval is not available yet'));
  }
}
