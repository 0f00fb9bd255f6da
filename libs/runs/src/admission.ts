/** What `POST /v1/events` answers for one event (docs/api.md#routes). */
export interface Admission {
  event_id: string;
  /**
   * started | steered | queued (docs/conversations-and-steering.md#concurrency-policies); a
   * duplicate answers the original one.
   */
  disposition: string;
  run_id: string | null;
  /** True when this answers a duplicate of an event already accepted. */
  replayed: boolean;
  /** Steered: the item's position in the run's steering queue. */
  position?: number;
  /** Interrupt: the run being cancelled for this event. */
  interrupted_run_id?: string;
}
