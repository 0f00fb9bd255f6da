import { DomainError } from '@libs/protocol';

/** Knowledge-base limits and the checks shared by the admin API and the retrieve RPC. */
export const KB_LIMITS = {
  chunk_size: { default: 1000, min: 100, max: 10_000 },
  chunk_overlap: { default: 150 },
  /** Bytes of UTF-8 document content. */
  max_document_bytes: 5 * 1024 * 1024,
  /** Bytes of a document's metadata as JSON (every chunk carries a copy). */
  max_metadata_bytes: 8 * 1024,
  max_metadata_keys: 32,
  top_k: { default: 5, max: 50 },
  max_query_chars: 1000,
  max_query_words: 32,
  max_filters: 16,
} as const;

export const KB_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
/** Metadata keys (and filter keys): no quotes or path syntax, so they embed safely in JSON paths. */
const KEY_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}$/;
/** Chunk metadata keys the host sets; a document's own metadata may not use them. */
export const RESERVED_KEYS = ['document_id', 'document_name', 'position', 'heading'];
export const CONTENT_TYPES = ['text/plain', 'text/markdown'] as const;
export type DocumentContentType = (typeof CONTENT_TYPES)[number];

export type Scalar = string | number | boolean | null;

const invalid = (field: string, message: string) =>
  new DomainError('invalid_argument', `${field}: ${message}`, { field });

const isScalar = (v: unknown): v is Scalar =>
  v === null || typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));

/** Chunking settings: defaults applied, 100 ≤ size ≤ 10000, 0 ≤ overlap ≤ size / 2. */
export function chunkSettings(size?: number, overlap?: number): { chunk_size: number; chunk_overlap: number } {
  const { chunk_size: s } = KB_LIMITS;
  const chunk_size = size ?? s.default;
  if (!Number.isInteger(chunk_size) || chunk_size < s.min || chunk_size > s.max) {
    throw invalid('chunk_size', `must be an integer from ${s.min} to ${s.max}`);
  }
  const chunk_overlap = overlap ?? Math.min(KB_LIMITS.chunk_overlap.default, Math.floor(chunk_size / 2));
  // At most half a chunk: every chunk then moves on by at least half its length, which bounds the
  // number of chunks a document makes.
  if (!Number.isInteger(chunk_overlap) || chunk_overlap < 0 || chunk_overlap > Math.floor(chunk_size / 2)) {
    throw invalid('chunk_overlap', `must be an integer from 0 to half of chunk_size (${Math.floor(chunk_size / 2)})`);
  }
  return { chunk_size, chunk_overlap };
}

/** A document's metadata: a flat object of scalars, no reserved keys, small. */
export function documentMetadata(value: unknown): Record<string, Scalar> {
  if (value === undefined || value === null) {
    return {};
  }
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalid('metadata', 'must be an object');
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > KB_LIMITS.max_metadata_keys) {
    throw invalid('metadata', `at most ${KB_LIMITS.max_metadata_keys} keys`);
  }
  for (const [key, v] of entries) {
    if (!KEY_PATTERN.test(key)) {
      throw invalid(`metadata.${key}`, 'keys are 1-64 letters, digits, "_", ".", ":" or "-"');
    }
    if (RESERVED_KEYS.includes(key)) {
      throw invalid(`metadata.${key}`, `is set by the host (reserved: ${RESERVED_KEYS.join(', ')})`);
    }
    if (!isScalar(v)) {
      throw invalid(`metadata.${key}`, 'must be a string, a finite number, a boolean or null');
    }
  }
  if (Buffer.byteLength(JSON.stringify(value)) > KB_LIMITS.max_metadata_bytes) {
    throw invalid('metadata', `at most ${KB_LIMITS.max_metadata_bytes} bytes as JSON`);
  }
  return value as Record<string, Scalar>;
}

/** Retrieval filters: `{key: scalar}`, each an equality on a chunk metadata key. */
export function metadataFilters(value: unknown): Array<[string, Scalar]> {
  if (value === undefined || value === null) {
    return [];
  }
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalid('filters', 'must be an object of metadata key → value');
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > KB_LIMITS.max_filters) {
    throw invalid('filters', `at most ${KB_LIMITS.max_filters} keys`);
  }
  for (const [key, v] of entries) {
    if (!KEY_PATTERN.test(key)) {
      throw invalid(`filters.${key}`, 'keys are 1-64 letters, digits, "_", ".", ":" or "-"');
    }
    if (!isScalar(v)) {
      throw invalid(
        `filters.${key}`,
        'only equality is supported: the value must be a string, number, boolean or null',
      );
    }
  }
  return entries as Array<[string, Scalar]>;
}

/** top_k: default 5, an integer from 1 to 50. */
export function topK(value: number | undefined): number {
  if (value === undefined || value === null) {
    return KB_LIMITS.top_k.default;
  }
  if (!Number.isInteger(value) || value < 1 || value > KB_LIMITS.top_k.max) {
    throw invalid('top_k', `must be an integer from 1 to ${KB_LIMITS.top_k.max}`);
  }
  return value;
}

/** Common English function words: left out of a query when it has other words. */
const STOP_WORDS = new Set(
  (
    'a an and are as at be but by can do does did for from has have had how i if in into is it its me my of on ' +
    'or our so than that the their them then there these they this those to was we were what when where which ' +
    'who whom why will with would you your'
  ).split(' '),
);

/**
 * The searchable words of a query (letters, digits and combining marks; everything else, FTS
 * syntax included, separates words), lower-cased, de-duplicated, stop words dropped unless
 * nothing else is left. Empty when the text has no word at all.
 */
export function queryWords(text: unknown): string[] {
  if (typeof text !== 'string' || text.trim() === '') {
    throw invalid('query_text', 'must not be empty');
  }
  if (text.length > KB_LIMITS.max_query_chars) {
    throw invalid('query_text', `at most ${KB_LIMITS.max_query_chars} characters`);
  }
  const words = [...new Set((text.toLowerCase().match(/[\p{L}\p{N}\p{M}]+/gu) ?? []).map((w) => w.normalize('NFC')))];
  const content = words.filter((w) => !STOP_WORDS.has(w));
  return (content.length > 0 ? content : words).slice(0, KB_LIMITS.max_query_words);
}
