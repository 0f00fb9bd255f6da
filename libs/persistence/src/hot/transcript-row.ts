import type { TranscriptEntity } from '../entities';

/** A transcript row before the database numbers it (docs/durability.md). */
export type NewTranscriptRow = Omit<TranscriptEntity, 'id' | 'seq'>;
