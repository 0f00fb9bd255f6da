import { INT32_MAX } from '@libs/protocol';
import type { JsonObject, LocalAgentHostPort } from '../host-port';

/*
 * Deadline and cancel of one run (docs/local-agent.md#deadline-and-cancel). Every awaited operation is
 * raced against a stop event — never against a timer of its own — so an operation that fails
 * with its own timeout error propagates that error unchanged, and the run stops the moment the
 * local deadline passes, the host deadline passes, or the host aborts the run.
 */

export type StopReason = 'cancelled' | 'timeout';

export class RunStopped extends Error {
  constructor(readonly reason: StopReason) {
    super(reason === 'timeout' ? 'Agent run timed out' : 'Run cancellation requested');
    this.name = 'RunStopped';
  }
}

/** Node's timers hold at most a signed 32-bit delay (longer ones fire at once). */
const MAX_TIMER_MS = INT32_MAX;

export class RunControls {
  private reason: StopReason | null = null;
  private timer?: NodeJS.Timeout;
  /** Rejecters of the races in flight: removed when a race settles, so long runs keep nothing. */
  private readonly waiting = new Set<(e: RunStopped) => void>();
  private readonly onPortAbort = () => this.stop(this.hostDeadlinePassed() ? 'timeout' : 'cancelled');
  /** Epoch ms of the earliest deadline (local or host), null without one. */
  readonly deadlineAtMs: number | null;

  constructor(
    private readonly port: Pick<LocalAgentHostPort, 'signal' | 'runGet'>,
    localTimeoutSeconds: number | null,
    private readonly hostDeadlineAtMs: number | null,
    private readonly canPollRun: boolean,
    private readonly now: () => number = Date.now,
  ) {
    const start = now();
    const local = localTimeoutSeconds === null ? null : start + localTimeoutSeconds * 1000;
    const all = [local, hostDeadlineAtMs].filter((d): d is number => d !== null);
    this.deadlineAtMs = all.length > 0 ? Math.min(...all) : null;
    if (port.signal.aborted) {
      this.onPortAbort();
    } else {
      port.signal.addEventListener('abort', this.onPortAbort, { once: true });
    }
    if (this.deadlineAtMs !== null) {
      this.arm(this.deadlineAtMs);
    }
  }

  private arm(at: number): void {
    const ms = at - this.now();
    if (ms <= 0) {
      this.stop('timeout');
      return;
    }
    this.timer = setTimeout(
      () => (ms > MAX_TIMER_MS ? this.arm(at) : this.stop('timeout')),
      Math.min(ms, MAX_TIMER_MS),
    );
  }

  private hostDeadlinePassed(): boolean {
    return this.hostDeadlineAtMs !== null && this.now() >= this.hostDeadlineAtMs;
  }

  /** Whether the run deadline (local or host) has passed: a deadline error is then the run's. */
  deadlinePassed(): boolean {
    return this.reason === 'timeout' || (this.deadlineAtMs !== null && this.now() >= this.deadlineAtMs);
  }

  stop(reason: StopReason): void {
    if (this.reason) {
      return;
    }
    this.reason = reason;
    const waiting = [...this.waiting];
    this.waiting.clear();
    waiting.forEach((reject) => reject(new RunStopped(reason)));
  }

  get stopReason(): StopReason | null {
    return this.reason;
  }

  /** Throws RunStopped once the run must stop. */
  check(): void {
    if (this.reason) {
      throw new RunStopped(this.reason);
    }
  }

  /** `p`, unless the run stops first (then RunStopped; `p` is left to the host's abort). */
  race<T>(p: Promise<T>): Promise<T> {
    if (this.reason) {
      p.catch(() => undefined);
      return Promise.reject(new RunStopped(this.reason));
    }
    return new Promise<T>((resolve, reject) => {
      this.waiting.add(reject);
      p.then(
        (v) => {
          this.waiting.delete(reject);
          resolve(v);
        },
        (e: unknown) => {
          this.waiting.delete(reject);
          // The operation's own error, unchanged (LP: never reinterpreted as the run's timeout).
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
          reject(e);
        },
      );
    });
  }

  /** A forced run.get poll (start, after assembly, at the end); poll failures count as "not cancelled". */
  async pollCancel(): Promise<void> {
    this.check();
    if (this.canPollRun && this.port.runGet) {
      try {
        const run = await this.race(this.port.runGet());
        if (run.cancel_requested || run.status === 'cancelled') {
          this.stop('cancelled');
        }
      } catch (e) {
        if (e instanceof RunStopped) {
          throw e;
        }
      }
    }
    this.check();
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.port.signal.removeEventListener('abort', this.onPortAbort);
  }
}

/** The protocol code of a port error (also on a wrapped `.error`). */
export function errorCode(e: unknown): string | null {
  if (!e || typeof e !== 'object') {
    return null;
  }
  const o = e as { code?: unknown; error?: { code?: unknown } };
  if (typeof o.code === 'string') {
    return o.code;
  }
  return typeof o.error?.code === 'string' ? o.error.code : null;
}

/**
 * A `deadline_exceeded` that is the run's (not the call's own timeout): the host marks a call's
 * own timeout with details.reason "timeout"; any other deadline error, or any error once the run
 * deadline has passed, is the run's.
 */
export function isRunDeadlineError(e: unknown, controls: RunControls): boolean {
  if (errorCode(e) !== 'deadline_exceeded') {
    return false;
  }
  const details = (e as { details?: JsonObject }).details;
  return details?.reason !== 'timeout' || controls.deadlinePassed();
}

export const errorMessage = (e: unknown): string =>
  e instanceof Error ? e.message : typeof e === 'string' ? e : JSON.stringify(e);
