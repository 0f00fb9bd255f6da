import type { RunEnd } from '@libs/persistence';
import type { RunStatus } from '@libs/protocol';
import type { ResultView } from './run-stream.bus';

/** The host's own verdicts on a run, each written as a final `run.failed` result. */
export interface HostVerdict {
  status: Extract<RunStatus, 'failed' | 'cancelled' | 'timeout' | 'interrupted'>;
  code: string;
  error: string;
  retryable: boolean;
}

/** How a run ended, as its row records it (docs/architecture.md#the-life-of-a-run). */
export type RunOutcome = Omit<RunEnd, 'finished_at' | 'status'> & { status: RunStatus };

/** The host's terminal `run.failed` result for a verdict, at `sequence`. */
export function verdictResult(run_id: string, sequence: number, v: HostVerdict): ResultView {
  return {
    run_id,
    sequence,
    type: 'run.failed',
    data: { error: v.error, code: v.code, retryable: v.retryable },
    usage: null,
    source: 'host',
    timestamp: Math.floor(Date.now() / 1000),
  };
}

/** The outcome a host verdict writes. */
export function verdictOutcome(v: HostVerdict): RunOutcome {
  return { status: v.status, status_reason: v.error, error_code: v.code, retryable: v.retryable, usage: null };
}

/**
 * The outcome of a runner's terminal result: `run.completed` completes (its finish_reason the
 * reason); a `run.failed` fails, except that a run whose cancel was requested (or that says
 * `cancelled`) is cancelled, and a runner that ran out of the run's time itself timed out.
 */
export function terminalOutcome(row: ResultView, cancelRequested: boolean): RunOutcome {
  const data = row.data;
  if (row.type === 'run.completed') {
    return {
      status: 'completed',
      status_reason: typeof data.finish_reason === 'string' ? data.finish_reason : 'stop',
      error_code: null,
      retryable: null,
      usage: row.usage,
    };
  }
  const cancelled = cancelRequested || data.code === 'cancelled';
  // A runner's local deadline is the host's: a runner.timeout of its own is the run's timeout.
  const timedOut = !cancelled && data.code === 'runner.timeout';
  return {
    status: cancelled ? 'cancelled' : timedOut ? 'timeout' : 'failed',
    status_reason: typeof data.error === 'string' ? data.error : null,
    error_code: typeof data.code === 'string' ? data.code : 'runner.error',
    retryable: cancelled ? false : Boolean(data.retryable),
    usage: row.usage,
  };
}
