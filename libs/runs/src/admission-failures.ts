import type { JsonObject, NewRun } from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import { verdictResult } from './run-outcome';

/** A run failed at admission because its runner is not connected, with its terminal result. */
export function unavailableRun(run: NewRun) {
  const reason = `runner ${run.runner_id} is not connected`;
  const terminal = verdictResult(run.run_id, 1, {
    status: 'failed',
    code: 'runner.unavailable',
    error: reason,
    retryable: true,
  });
  return {
    reason,
    run: {
      ...run,
      status: 'failed' as const,
      status_reason: reason,
      error_code: 'runner.unavailable',
      retryable: true,
      finished_at: run.created_at,
    },
    terminal: { ...terminal, data: terminal.data as JsonObject, usage: null, created_at: run.created_at },
  };
}

export function unavailableError(eventId: string, runId: string, reason: string): DomainError {
  return new DomainError('unavailable', `${reason}; the event was recorded and its run failed (runner.unavailable)`, {
    event_id: eventId,
    run_id: runId,
    error_code: 'runner.unavailable',
  });
}

/**
 * Policy `reject` while the conversation is busy
 * (docs/conversations-and-steering.md#concurrency-policies): a conflict; nothing else changed.
 */
export function rejectedError(eventId: string, runId: string | null): DomainError {
  return new DomainError(
    'conflict',
    `the conversation is busy${runId ? ` (run ${runId} is active)` : ' (runs are waiting)'} and the concurrency policy is reject; send it again later`,
    { event_id: eventId, run_id: runId, disposition: 'rejected' },
  );
}
