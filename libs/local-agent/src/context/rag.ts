import type { KnowledgeEntry, LocalAgentHostPort } from '../host-port';
import { RunStopped, type RunControls } from '../run/controls';
import type { RagChunk } from './messages';

/*
 * Knowledge retrieval (docs/local-agent.md#knowledge-retrieval): each authorized knowledge base in
 * config order, optional rerank in the reranker's order, then one global cap. No retrieval error
 * fails the run.
 */

export interface RagSettings {
  kbIds: string[];
  topK: number;
  rerankModel: string | null;
  rerankTopK: number;
}

function contentText(content: unknown): string {
  if (typeof content === 'string') {
    return content;
  }
  if (!Array.isArray(content)) {
    return '';
  }
  return content
    .map((p: unknown) => {
      if (typeof p === 'string') {
        return p;
      }
      const o = p as { type?: unknown; text?: unknown } | null;
      return o && typeof o.text === 'string' && (o.type === undefined || o.type === 'text') ? o.text : '';
    })
    .filter((t) => t !== '')
    .join(' ');
}

function toChunk(kbId: string, e: KnowledgeEntry, index: number): RagChunk | null {
  if (!e || typeof e !== 'object') {
    return null;
  }
  const content = contentText(e.content);
  if (content === '') {
    return null;
  }
  const id = e.chunk_id ?? e.id ?? e.document_id ?? null;
  const score = e.score ?? e.similarity ?? null;
  return {
    kb_id: kbId,
    content,
    source_index: index,
    chunk_id: typeof id === 'string' ? id : null,
    score: typeof score === 'number' ? score : null,
    metadata: e.metadata && typeof e.metadata === 'object' ? e.metadata : {},
  };
}

export async function retrieveChunks(
  port: LocalAgentHostPort,
  controls: RunControls,
  query: string,
  s: RagSettings,
  warn: (m: string) => void,
): Promise<RagChunk[]> {
  if (s.kbIds.length === 0 || query.trim() === '') {
    return [];
  }
  let chunks: RagChunk[] = [];
  for (const kb_id of s.kbIds) {
    try {
      const entries = await controls.race(port.retrieveKnowledge({ kb_id, query_text: query, top_k: s.topK }));
      (entries ?? []).forEach((e, i) => {
        const c = toChunk(kb_id, e, i);
        if (c) {
          chunks.push(c);
        }
      });
    } catch (e) {
      if (e instanceof RunStopped) {
        throw e;
      }
      warn(`knowledge base ${kb_id}: retrieval failed; skipped`);
    }
  }
  if (s.rerankModel && chunks.length > 0) {
    chunks = await rerank(port, controls, query, chunks, s.rerankModel, s.rerankTopK);
  }
  return chunks.slice(0, Math.max(1, s.rerankModel ? s.rerankTopK : s.topK));
}

/** Reorders by the reranker's answer order (invalid or repeated indices ignored); on failure keeps the order. */
async function rerank(
  port: LocalAgentHostPort,
  controls: RunControls,
  query: string,
  chunks: RagChunk[],
  model: string,
  topK: number,
): Promise<RagChunk[]> {
  try {
    const items = await controls.race(
      port.rerank({ model_id: model, query, documents: chunks.map((c) => c.content), top_k: topK }),
    );
    const seen = new Set<number>();
    const order: RagChunk[] = [];
    for (const it of items ?? []) {
      const i = it?.index;
      if (typeof i === 'number' && Number.isInteger(i) && i >= 0 && i < chunks.length && !seen.has(i)) {
        seen.add(i);
        order.push(chunks[i]);
      }
    }
    return order.length > 0 ? order : chunks;
  } catch (e) {
    if (e instanceof RunStopped) {
      throw e;
    }
    return chunks;
  }
}
