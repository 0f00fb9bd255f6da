import type { DecisionTable } from '@libs/persistence';

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
 * The decision table of an event's admission (applied by the admission unit under the
 * conversation's lock, `decide` in libs/persistence):
 * - a free conversation (nothing running, nothing waiting) starts a run, whatever the mode;
 * - `reject` refuses it while the conversation is busy;
 * - `steer` queues it on the running run when that run can take it — `steerInto`: this process's
 *   run of the conversation whose runner pulls steering — the event is a message, the queue has
 *   room and nothing waits before it (a follow-up never overtakes an earlier message); otherwise
 *   it waits as the next run (`queued`);
 * - `queue` and `interrupt` wait as the next run (an interrupt also cancels the running run,
 *   after the commit).
 */
export function decisionTable(mode: ConcurrencyMode, isMessage: boolean, steerInto: string | null): DecisionTable {
  return {
    busy: mode === 'reject' ? 'rejected' : 'queued',
    steer_into: mode === 'steer' && isMessage ? steerInto : null,
    max_queue: MAX_STEERING_QUEUE,
  };
}
