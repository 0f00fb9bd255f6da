import type { ConversationSituation, Disposition } from '@libs/persistence';

/** What a follow-up does while its conversation is busy (docs/conversations-and-steering.md#concurrency-policies). */
export const CONCURRENCY_MODES = ['steer', 'queue', 'interrupt', 'reject'] as const;
export type ConcurrencyMode = (typeof CONCURRENCY_MODES)[number];

/**
 * Items queued on one run at most; more overflow into `queue`
 * (docs/conversations-and-steering.md#concurrency-policies).
 */
export const MAX_STEERING_QUEUE = 100;

/**
 * The mode that applies to one event: the event's own override, else the agent's policy, else the
 * default of docs/conversations-and-steering.md — `steer` when the runner declares
 * `capabilities.steering`, `queue` otherwise.
 */
export function effectiveMode(
  override: ConcurrencyMode | undefined,
  agent: ConcurrencyMode | undefined,
  runnerSteers: boolean,
): ConcurrencyMode {
  return override ?? agent ?? (runnerSteers ? 'steer' : 'queue');
}

/**
 * The disposition of an event, given its conversation (read under the conversation's lock):
 * - a free conversation (nothing running, nothing waiting) starts a run, whatever the mode;
 * - `reject` refuses it while the conversation is busy;
 * - `steer` queues it on the running run when that run can take it (its runner pulls steering,
 *   the event is a message, the queue has room) and nothing waits before it — a follow-up never
 *   overtakes an earlier message; otherwise it waits as the next run (`queued`);
 * - `queue` and `interrupt` wait as the next run (an interrupt also cancels the running run,
 *   after the commit).
 */
export function decideDisposition(
  mode: ConcurrencyMode,
  s: ConversationSituation,
  canSteerInto: (runId: string) => boolean,
): Disposition {
  if (s.running_run_id === null && s.waiting === 0) {
    return 'started';
  }
  switch (mode) {
    case 'reject':
      return 'rejected';
    case 'steer':
      return s.running_run_id !== null &&
        s.waiting === 0 &&
        s.queued_on_run < MAX_STEERING_QUEUE &&
        canSteerInto(s.running_run_id)
        ? 'steered'
        : 'queued';
    case 'queue':
    case 'interrupt':
      return 'queued';
  }
}
