import { DomainError } from '@libs/protocol';
import type { RerankCallOutput } from './model-requests';

type RerankItem = RerankCallOutput['results'][number];
import type { JsonObject } from './message-mapping';
import { malformed } from './provider-errors';

/** The reference host scores at most this many documents per call; more are refused, not cut. */
export const MAX_RERANK_DOCUMENTS = 64;

const invalid = (field: string, rule: string, details: JsonObject = {}) =>
  new DomainError('invalid_argument', `${field}: ${rule}`, { field, ...details });

export interface RerankInput {
  query: string;
  documents: string[];
  /** Results kept after sorting; all when absent. */
  topK: number | null;
}

const isStringList = (v: unknown): v is string[] => Array.isArray(v) && v.every((d) => typeof d === 'string');

export function checkRerank(query: unknown, documents: unknown, topK: unknown): RerankInput {
  if (typeof query !== 'string' || query.trim() === '') {
    throw invalid('query', 'must be a non-empty string');
  }
  const docs: unknown = documents ?? [];
  if (!isStringList(docs)) {
    throw invalid('documents', 'must be a list of strings');
  }
  if (docs.length > MAX_RERANK_DOCUMENTS) {
    throw invalid('documents', `at most ${MAX_RERANK_DOCUMENTS} documents per call (got ${docs.length})`, {
      limit: MAX_RERANK_DOCUMENTS,
    });
  }
  if (topK !== undefined && topK !== null && (typeof topK !== 'number' || !Number.isInteger(topK) || topK < 1)) {
    throw invalid('top_k', 'must be an integer of at least 1');
  }
  return { query, documents: docs, topK: typeof topK === 'number' ? topK : null };
}

/**
 * The common `/rerank` answer `{results: [{index, relevance_score}], usage?}` → results sorted by
 * score (highest first), `top_k` kept. Anything else is a malformed response.
 */
export function parseRerank(
  modelId: string,
  raw: unknown,
  input: RerankInput,
): { results: RerankItem[]; usage: JsonObject | null } {
  const body = raw as { results?: unknown; usage?: unknown } | null;
  if (!body || !Array.isArray(body.results)) {
    throw malformed(modelId, 'rerank answer has no results list');
  }
  const seen = new Set<number>();
  const results = body.results.map((r: unknown) => {
    const item = (r ?? {}) as { index?: unknown; relevance_score?: unknown; score?: unknown };
    const score = item.relevance_score ?? item.score;
    if (
      typeof item.index !== 'number' ||
      !Number.isInteger(item.index) ||
      item.index < 0 ||
      item.index >= input.documents.length ||
      seen.has(item.index) ||
      typeof score !== 'number' ||
      !Number.isFinite(score)
    ) {
      throw malformed(modelId, `rerank result ${JSON.stringify(r).slice(0, 200)} is not {index, relevance_score}`);
    }
    seen.add(item.index);
    return { index: item.index, relevance_score: score };
  });
  results.sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index);
  const usage = body.usage && typeof body.usage === 'object' ? (body.usage as JsonObject) : null;
  return { results: input.topK === null ? results : results.slice(0, input.topK), usage };
}
