import { TokenBucket, type AuthorizationSnapshot } from '@libs/authz';
import type { RunDelivery } from '@libs/delivery';
import type { RunnerSession } from '@libs/runner-gateway';
import { decideSequence, MAX_SEQUENCE, type SequenceDecision } from './sequence-rules';

const MAX_TIMER_MS = 2_147_483_647;

/**
 * A run active in this process. It owns its transitions — sequence bookkeeping, the one
 * terminal outcome, cancel, deadline and grace timers, its serialised result steps, the
 * assistant text it streamed — and the rest of the host reads it through `ActiveRunView`.
 */
export class ActiveRun {
  readonly started_at = Date.now();
  /** Aborted when the run ends or a cancel is requested: in-flight resource calls stop. */
  readonly abort = new AbortController();
  /** Per-run host API rate limit. */
  readonly bucket: TokenBucket;
  readonly finished: Promise<void>;
  readonly runner_id: string;
  /** When the run was admitted (epoch ms; its start until the dispatch sets it): the run-phase metrics. */
  admitted_at = this.started_at;

  private last = 0;
  private resultSeen = false;
  private readonly seen = new Set<number>();
  private endedFlag = false;
  private cancelFlag = false;
  private deadlineTimer?: NodeJS.Timeout;
  private graceTimer?: NodeJS.Timeout;
  private chain: Promise<void> = Promise.resolve();
  private streamedText = '';
  /** UTF-8 bytes the run streamed since its last message.completed (the message being streamed). */
  private streamingBytes = 0;
  private firstCompleted: Record<string, unknown> | null = null;
  private resolveFinished!: () => void;
  private deliveryState: RunDelivery | null = null;

  constructor(
    readonly run_id: string,
    readonly agent_id: string,
    readonly session: RunnerSession,
    /** The frozen grants every host API call of this run is checked against. */
    readonly snapshot: AuthorizationSnapshot,
  ) {
    this.runner_id = snapshot.scope.runner_id;
    this.bucket = new TokenBucket(snapshot.limits.calls_per_second, snapshot.limits.burst);
    this.finished = new Promise<void>((resolve) => (this.resolveFinished = resolve));
  }

  /** True once a terminal result was accepted or the host decided the outcome. */
  get ended(): boolean {
    return this.endedFlag;
  }

  get cancel_requested(): boolean {
    return this.cancelFlag;
  }

  /** Highest sequence accepted so far. */
  get last_sequence(): number {
    return this.last;
  }

  /** The sequence the host gives its own next result (never one a reader may have seen). */
  nextHostSequence(): number {
    return Math.min(this.last + 1, MAX_SEQUENCE);
  }

  /** Applies the sequence rules to a runner's result and, when accepted, records its sequence. */
  acceptSequence(raw: number | null | undefined): SequenceDecision {
    const d = decideSequence(raw, this.last, this.seen);
    if (d.accept) {
      this.seen.add(d.sequence);
      this.last = Math.max(this.last, d.sequence);
    }
    return d;
  }

  /** True for the run's first accepted result only. */
  firstResult(): boolean {
    return this.resultSeen ? false : (this.resultSeen = true);
  }

  /** Marks the run ended; false when it already was (exactly one terminal outcome). */
  end(): boolean {
    if (this.endedFlag) {
      return false;
    }
    this.endedFlag = true;
    return true;
  }

  /** First cancel request: true (and in-flight calls abort); later ones: false. */
  requestCancel(): boolean {
    if (this.cancelFlag) {
      return false;
    }
    this.cancelFlag = true;
    this.abort.abort();
    return true;
  }

  /** Serialises this run's persistence steps in arrival order; a failing step does not stop the next. */
  enqueue(step: () => Promise<void>, onError: (e: unknown) => void): void {
    this.chain = this.chain.then(step).catch(onError);
  }

  armDeadline(deadlineAtMs: number, onExpiry: () => void): void {
    const remaining = deadlineAtMs - Date.now();
    if (remaining > MAX_TIMER_MS) {
      this.deadlineTimer = setTimeout(() => this.armDeadline(deadlineAtMs, onExpiry), MAX_TIMER_MS);
      return;
    }
    this.deadlineTimer = setTimeout(
      () => {
        if (!this.endedFlag) {
          onExpiry();
        }
      },
      Math.max(0, remaining),
    );
  }

  armGrace(ms: number, onExpiry: () => void): void {
    this.graceTimer = setTimeout(onExpiry, ms);
  }

  /** Stops timers and in-flight calls: called once the outcome is being written. */
  settle(): void {
    clearTimeout(this.deadlineTimer);
    clearTimeout(this.graceTimer);
    this.endedFlag = true;
    this.abort.abort();
  }

  markFinished(): void {
    this.resolveFinished();
  }

  /**
   * A streamed delta's text, kept for a run that never completes a message (its transcript row).
   * Only until the first completed message — which is the transcript row then — so it never
   * outgrows the message bound (`messageBytesWith`).
   */
  noteStreamed(text: string): void {
    if (this.firstCompleted === null) {
      this.streamedText += text; // a rope: appending costs O(text), flattened once at the end
    }
  }

  /**
   * The size of the message being streamed with a delta of `ownBytes` whose cumulative text
   * (all_content) is `cumulativeBytes` (null when it has none).
   */
  messageBytesWith(ownBytes: number, cumulativeBytes: number | null): number {
    return Math.max(this.streamingBytes + ownBytes, cumulativeBytes ?? 0);
  }

  /** Records the size of the message being streamed after an accepted delta. */
  noteMessageBytes(bytes: number): void {
    this.streamingBytes = bytes;
  }

  get streamed(): string {
    return this.streamedText;
  }

  /** The run's delivery (normaliser state and edit timer), attached once at its start. */
  attachDelivery(delivery: RunDelivery): void {
    this.deliveryState ??= delivery;
  }

  get delivery(): RunDelivery | null {
    return this.deliveryState;
  }

  /** The first completed message of the run (its assistant transcript row). */
  noteAssistantMessage(message: Record<string, unknown>): void {
    this.firstCompleted ??= message;
    this.streamingBytes = 0;
  }

  get assistantMessage(): Record<string, unknown> | null {
    return this.firstCompleted;
  }
}

/** What other libs may read of an active run. */
export type ActiveRunView = Pick<
  ActiveRun,
  | 'run_id'
  | 'agent_id'
  | 'runner_id'
  | 'session'
  | 'snapshot'
  | 'started_at'
  | 'abort'
  | 'bucket'
  | 'ended'
  | 'cancel_requested'
  | 'last_sequence'
>;
