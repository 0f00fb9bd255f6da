/**
 * The admission decision table (docs/conversations-and-steering.md#concurrency-policies): what an
 * event does, given its conversation as read under the conversation's lock. Data, built by the
 * runs' policy before the commit (see `decisionTable` in libs/runs), applied here inside it — no
 * policy code runs in the transaction.
 */
import type { ConversationSituation, Disposition } from './steering-rows';

export interface DecisionTable {
  /** A busy conversation: the event waits as the next run, or is refused. */
  busy: 'queued' | 'rejected';
  /**
   * The running run the event may be steered into (its runner pulls steering, the event is a
   * message, the policy steers); null: none.
   */
  steer_into: string | null;
  /** Items queued on one run at most; more wait as runs of their own. */
  max_queue: number;
  /**
   * A free conversation: the run starts here (default), or waits as the next run for the process
   * holding its runner (docs/scale-out.md#routing: the runner is connected to another process).
   */
  free?: 'started' | 'queued';
}

/** An event without a conversation is a conversation of one: always free. */
export const FREE: ConversationSituation = { running_run_id: null, queued_on_run: 0, waiting: 0 };

/**
 * - free (nothing running, nothing waiting) → the table's `free` (`started` unless the run is
 *   routed to another process);
 * - the running run is `steer_into`, nothing waits before the event (a follow-up never overtakes
 *   an earlier message) and its queue has room → `steered`;
 * - otherwise → the table's `busy`.
 */
export function decide(t: DecisionTable, s: ConversationSituation): Disposition {
  if (s.running_run_id === null && s.waiting === 0) {
    return t.free ?? 'started';
  }
  if (t.steer_into !== null && s.running_run_id === t.steer_into && s.waiting === 0 && s.queued_on_run < t.max_queue) {
    return 'steered';
  }
  return t.busy;
}
