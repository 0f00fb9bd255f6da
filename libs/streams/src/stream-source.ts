import type { Observable } from 'rxjs';

/** What a run's stream carries: anything with a per-run sequence (results, delivery ops). */
export interface StreamItem {
  sequence: number;
  /** Live-only telemetry (tool progress): no id, never persisted, dropped for readers behind. */
  ephemeral?: true;
}

/** One event of a stream as a transport sends it (an SSE frame: `id:`, `event:`, `data:`). */
export interface StreamEvent {
  /** The resumption point (`Last-Event-ID`); null for live-only items. */
  id: number | null;
  event: string;
  data: unknown;
  /** `data` as JSON text when it was serialised already (a huge op's, docs/delivery.md#long-answers); else absent. */
  json?: string;
}

/**
 * A run's stream as the domain offers it (docs/api.md#streams): the live items and the
 * committed ones, paged; the transport (apps/host) pipes it to a reader with backpressure.
 */
export interface StreamSource<T extends StreamItem> {
  /** Live items of the run from now on; null when the run is not active in this process. */
  follow(): Observable<T> | null;
  /** Committed items with sequence > after, in sequence order, at most `limit`. */
  page(after: number, limit: number): Promise<T[]>;
  /** The event an item is sent as. */
  event(item: T): StreamEvent;
  /** Whether an item is the stream's last (a terminal result). */
  isLast(item: T): boolean;
}

/** How a reader's stream ended: after its last item, by the reader, cut for its backlog, or failed. */
export type StreamEnd = 'completed' | 'closed' | 'cut' | 'failed';
