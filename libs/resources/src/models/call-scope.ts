import { DomainError, INT32_MAX } from '@libs/protocol';
import { telemetry } from '@libs/telemetry';
import type { ResourceCall } from '../resource-call';

export type AbortCause = 'cancelled' | 'run_deadline' | 'timeout';

/** Node's timers hold at most a signed 32-bit delay (longer ones fire at once). */
const MAX_TIMER_MS = INT32_MAX;

/**
 * One AbortSignal for one provider call, aborted by whichever comes first: the run's signal (the
 * run ended or was cancelled), the run deadline, or the call's own timeout. With `idle`, the
 * timeout is the longest wait between two stream chunks (`touch()` on each chunk) instead of a
 * bound on the whole call; the run deadline stays absolute.
 */
export class CallScope {
  /** For the model-call metrics: when the call started (telemetry clock) and whether it failed. */
  readonly startedMs = telemetry.now();
  failed = false;
  private readonly controller = new AbortController();
  private timer?: NodeJS.Timeout;
  private abortCause: AbortCause | null = null;
  private readonly onRunAbort = () => this.abort('cancelled');

  constructor(
    private readonly call: ResourceCall,
    readonly timeoutMs: number,
    private readonly idle = false,
  ) {
    if (call.signal.aborted) {
      this.abort('cancelled');
      return;
    }
    call.signal.addEventListener('abort', this.onRunAbort, { once: true });
    this.arm();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get cause(): AbortCause | null {
    return this.abortCause;
  }

  /** Throws the abort error if the scope is already aborted (check before each provider step). */
  check(): void {
    if (this.abortCause) {
      throw this.error();
    }
  }

  /** A chunk arrived: an idle timeout starts again. */
  touch(): void {
    if (this.idle && !this.abortCause) {
      this.arm();
    }
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.call.signal.removeEventListener('abort', this.onRunAbort);
  }

  /** The protocol error for the cause of the abort. */
  error(): DomainError {
    switch (this.abortCause ?? 'cancelled') {
      case 'cancelled':
        return new DomainError(
          'deadline_exceeded',
          'model call stopped: the run ended or was cancelled',
          { reason: 'cancelled' },
          false,
        );
      case 'run_deadline':
        return new DomainError(
          'deadline_exceeded',
          'model call stopped: the run deadline passed',
          { reason: 'run_deadline' },
          false,
        );
      case 'timeout':
        return new DomainError(
          'deadline_exceeded',
          `model call stopped: no answer within timeout_ms (${this.timeoutMs} ms)`,
          { reason: 'timeout', timeout_ms: this.timeoutMs },
          true,
        );
    }
  }

  private arm(): void {
    clearTimeout(this.timer);
    const untilDeadline = this.call.deadline_at_ms === null ? Infinity : this.call.deadline_at_ms - Date.now();
    const cause: AbortCause = untilDeadline <= this.timeoutMs ? 'run_deadline' : 'timeout';
    const ms = Math.min(this.timeoutMs, untilDeadline);
    if (ms <= 0) {
      this.abort(cause);
      return;
    }
    this.timer = setTimeout(() => this.abort(cause), Math.min(ms, MAX_TIMER_MS));
  }

  private abort(cause: AbortCause): void {
    if (!this.abortCause) {
      this.abortCause = cause;
      clearTimeout(this.timer);
      this.controller.abort();
    }
  }
}
