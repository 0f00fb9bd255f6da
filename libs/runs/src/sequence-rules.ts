import { INT32_MAX } from '@libs/protocol';

/** Largest sequence either database can store (PostgreSQL INTEGER). */
export const MAX_SEQUENCE = INT32_MAX;

export type SequenceDecision =
  { accept: true; sequence: number; warning?: string } | { accept: false; warning: string };

/**
 * Sequence rules (docs/protocol.md#result-rules): missing or invalid (not a positive integer, or beyond
 * what the database can hold) → last + 1; duplicate → dropped; gaps and reordering → warned.
 */
export function decideSequence(
  raw: number | null | undefined,
  last: number,
  seen: ReadonlySet<number>,
): SequenceDecision {
  if (raw === undefined || raw === null) {
    return { accept: true, sequence: last + 1 };
  }
  if (!Number.isInteger(raw) || raw <= 0 || raw > MAX_SEQUENCE) {
    return { accept: true, sequence: last + 1, warning: `invalid sequence ${raw}; assigned ${last + 1}` };
  }
  if (seen.has(raw)) {
    return { accept: false, warning: `duplicate sequence ${raw}: result dropped` };
  }
  if (raw > last + 1) {
    return { accept: true, sequence: raw, warning: `sequence gap: expected ${last + 1}, got ${raw}` };
  }
  if (raw < last) {
    return { accept: true, sequence: raw, warning: `out-of-order sequence ${raw} after ${last}` };
  }
  return { accept: true, sequence: raw };
}
