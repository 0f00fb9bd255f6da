import { TokenBucket, type AuthorizationSnapshot } from '@libs/authz';
import type { RunDelivery } from '@libs/delivery';
import { CumulativeDeltas, type RunLease } from '@libs/persistence';
import { INT32_MAX, TERMINAL_RESULT_TYPES } from '@libs/protocol';
import type { RunnerSession } from '@libs/runner-gateway';
import type { CallBudget, RunGrant } from './run-grant';
import { terminalOutcome, verdictOutcome, verdictResult, type HostVerdict, type RunOutcome } from './run-outcome';
import type { ResultView } from './run-stream.bus';
import { decideSequence, MAX_SEQUENCE } from './sequence-rules';

/** Node's timers hold at most a signed 32-bit delay (longer ones fire at once). */
const MAX_TIMER_MS = INT32_MAX;

/** What a dropped run (`drop`) resolves `finished` with: the outcome the process that took it over writes. */
export const FENCED_OUTCOME: RunOutcome = {
  status: 'interrupted',
  status_reason: 'the run was taken over by another host process',
  error_code: 'host.fenced',
  retryable: true,
  usage: null,
};

/**
 * Where a run is in its life (docs/architecture.md#the-life-of-a-run): `running` takes results;
 * `cancelling` too, with the cancel grace running; `ending` has its one end decided (being
 * written: results are dropped, no other verdict counts); `ended` has it committed.
 */
export type RunPhase = 'running' | 'cancelling' | 'ending' | 'ended';

/** What decided the end: the runner's terminal result, or one of the host's verdicts. */
export type EndCause = 'result' | 'cancel' | 'deadline' | 'runner_lost' | 'host';

/** The run's one end, decided: its terminal result and the outcome its row records. */
export interface RunEnding {
  cause: EndCause;
  terminal: ResultView;
  outcome: RunOutcome;
}

/** A runner's result as the ingest checked it (payload valid, within the limits). */
export interface IncomingResult {
  type: string;
  /** As the runner sent it: the sequence rules decide the one it keeps. */
  sequence: number | null | undefined;
  data: Record<string, unknown>;
  usage: Record<string, unknown> | null;
  timestamp: number | null;
  /** A `message.delta`'s message size with it (`messageBytesWith`), already checked against the bound. */
  messageBytes?: number | null;
}

/** What became of a result: accepted (to be written), the terminal one (the run ends with it), or dropped. */
export type Intake =
  | {
      kind: 'accepted' | 'terminal';
      row: ResultView;
      /** The data to store: `row.data`, or a cumulative delta without its all_content (cumulative-deltas.ts). */
      stored: Record<string, unknown>;
      first: boolean;
      warning: string | null;
    }
  | { kind: 'dropped'; reason: string };

export interface RunInit {
  run_id: string;
  agent_id: string;
  session: RunnerSession;
  /** The frozen grants every host API call of this run is checked against. */
  snapshot: AuthorizationSnapshot;
  /**
   * The run's lease when this process claimed it (docs/scale-out.md#leases-and-fencing): every
   * write of the run names it. Null: not leased (a start that made no claim), writes unfenced.
   */
  lease?: RunLease | null;
}

export interface RunOwner {
  /** How long a cancelled run waits for its runner's `run.failed {code: cancelled}` (ms). */
  cancelGraceMs: number;
  /** Called once, synchronously, when the end is decided: the owner writes it, then calls `settle`. */
  onEnd(ending: RunEnding): void;
}

/**
 * The host API's read-only view of an active run (`ActiveRun.grant`). A class, so that its live
 * getters (`signal`, `active`, `cancel_requested`) are its prototype's: an object literal's
 * `get x()` defines an accessor on each object it makes, and V8 allocates each accessor pair in the
 * old generation — a root for every young-generation GC until the next full GC, which kept the
 * getters' run, and all it holds, alive through the scavenges after the run ended
 * (docs/benchmarks.md "Ended runs kept for the scavenger: accessor pairs of object literals
 * (round 16, wt-gc16b)").
 */
class ActiveRunGrant implements RunGrant {
  readonly run_id: string;
  readonly plugin_id: string;
  readonly runner_id: string;
  readonly workspace_id: string | null;
  readonly snapshot: AuthorizationSnapshot;
  readonly budget: CallBudget;
  readonly started_at: number;
  readonly lease: RunLease | null;
  readonly #run: ActiveRun;

  constructor(run: ActiveRun, init: RunInit, bucket: TokenBucket) {
    this.#run = run;
    this.run_id = run.run_id;
    this.plugin_id = init.session.plugin_id;
    this.runner_id = run.runner_id;
    this.workspace_id = init.snapshot.scope.workspace_id;
    this.snapshot = init.snapshot;
    this.budget = { take: () => bucket.take(), reserve: () => bucket.reserve() };
    this.started_at = run.started_at;
    this.lease = run.lease;
  }

  get signal(): AbortSignal {
    return this.#run.signal;
  }

  get active(): boolean {
    return !this.#run.ended;
  }

  get cancel_requested(): boolean {
    return this.#run.cancel_requested;
  }
}

/**
 * A run active in this process: its state machine (docs/architecture.md#the-life-of-a-run).
 * Results go in (`accept`), verdicts go in (`cancel`, the deadline, `runnerLost`, `fail`), and
 * exactly one end comes out — to the owner's `onEnd`, once; `finished` resolves with the
 * outcome once the owner wrote it (`settle`). The run also keeps what its end needs: the
 * assistant text it streamed, its first completed message, and its serialised result steps.
 * Other code reads it through `ActiveRunView`; the host API through its `grant`.
 */
export class ActiveRun {
  readonly run_id: string;
  readonly agent_id: string;
  readonly session: RunnerSession;
  readonly snapshot: AuthorizationSnapshot;
  readonly runner_id: string;
  readonly started_at = Date.now();
  /** When the run was admitted (epoch ms; its start until the dispatch sets it): the run-phase metrics. */
  admitted_at = this.started_at;
  /** Resolves with the written outcome once the end committed. */
  readonly finished: Promise<RunOutcome>;
  /** The host API's read-only view of this run. */
  readonly grant: RunGrant;
  /** The fence token of its writes (null: not leased). */
  readonly lease: RunLease | null;

  private phaseNow: RunPhase = 'running';
  /** Set by the first cancel and kept through the end (a cancelled run's terminal result stays cancelled). */
  private cancelRequested = false;
  /**
   * The run's abort signal, made on first use: most runs make no host API call that would take
   * it, and aborting a signal builds a DOMException (a stack trace) per run. Once aborted, the
   * signal handed out later is already aborted.
   */
  private controller: AbortController | null = null;
  private aborted = false;
  private last = 0;
  private lastShown = 0;
  private resultSeen = false;
  private readonly seen = new Set<number>();
  private deadlineTimer?: NodeJS.Timeout;
  private graceTimer?: NodeJS.Timeout;
  private chain: Promise<void> = Promise.resolve();
  private streamedText = '';
  /** UTF-8 bytes the run streamed since its last message.completed (the message being streamed). */
  private streamingBytes = 0;
  private firstCompleted: Record<string, unknown> | null = null;
  /** What of its cumulative deltas is stored (docs/durability.md#cumulative-deltas). */
  private readonly cumulative = new CumulativeDeltas();
  private resolveFinished!: (outcome: RunOutcome) => void;
  private deliveryState: RunDelivery | null = null;

  constructor(
    init: RunInit,
    private readonly owner: RunOwner,
  ) {
    this.run_id = init.run_id;
    this.agent_id = init.agent_id;
    this.session = init.session;
    this.snapshot = init.snapshot;
    this.runner_id = init.snapshot.scope.runner_id;
    this.lease = init.lease ?? null;
    this.finished = new Promise<RunOutcome>((resolve) => (this.resolveFinished = resolve));
    const bucket = new TokenBucket(init.snapshot.limits.calls_per_second, init.snapshot.limits.burst);
    this.grant = Object.freeze(new ActiveRunGrant(this, init, bucket));
    if (init.snapshot.deadline_at_ms !== null) {
      this.armDeadline(init.snapshot.deadline_at_ms);
    }
  }

  /** Aborted when the run ends or its cancel is requested: in-flight resource calls stop. */
  get signal(): AbortSignal {
    if (this.controller === null) {
      this.controller = new AbortController();
      if (this.aborted) {
        this.controller.abort();
      }
    }
    return this.controller.signal;
  }

  private abortCalls(): void {
    this.aborted = true;
    this.controller?.abort();
  }

  get phase(): RunPhase {
    return this.phaseNow;
  }

  /** True once the end is decided (a terminal result accepted, or a verdict). */
  get ended(): boolean {
    return this.phaseNow === 'ending' || this.phaseNow === 'ended';
  }

  get cancel_requested(): boolean {
    return this.cancelRequested;
  }

  /** Highest sequence accepted so far. */
  get last_sequence(): number {
    return this.last;
  }

  /** Highest sequence shown to readers (committed, then published). */
  get shown_sequence(): number {
    return this.lastShown;
  }

  /** A result of this run was committed and shown to readers. */
  shown(sequence: number): void {
    this.lastShown = Math.max(this.lastShown, sequence);
  }

  /** The sequence the host gives its own next result (never one a reader may have seen). */
  nextHostSequence(): number {
    return Math.min(this.last + 1, MAX_SEQUENCE);
  }

  /**
   * A runner's result: dropped once the end is decided or by the sequence rules
   * (docs/protocol.md#result-rules); a terminal one decides the end (a cancelled run stays
   * cancelled); any other is accepted, and what the end needs of it is kept.
   */
  accept(result: IncomingResult): Intake {
    if (this.ended) {
      return { kind: 'dropped', reason: 'result dropped: the run already has a terminal result' };
    }
    const d = decideSequence(result.sequence, this.last, this.seen);
    if (!d.accept) {
      return { kind: 'dropped', reason: d.warning };
    }
    this.seen.add(d.sequence);
    this.last = Math.max(this.last, d.sequence);
    const first = !this.resultSeen;
    this.resultSeen = true;
    const row: ResultView = {
      run_id: this.run_id,
      sequence: d.sequence,
      type: result.type,
      data: result.data,
      usage: result.usage,
      source: 'runner',
      timestamp: result.timestamp,
    };
    const warning = d.warning ?? null;
    const stored = this.cumulative.store(row.sequence, row.type, row.data);
    if (TERMINAL_RESULT_TYPES.includes(result.type)) {
      this.decide({ cause: 'result', terminal: row, outcome: terminalOutcome(row, this.cancel_requested) });
      return { kind: 'terminal', row, stored, first, warning };
    }
    this.keep(row, result.messageBytes ?? null);
    return { kind: 'accepted', row, stored, first, warning };
  }

  /**
   * The first cancel request: in-flight calls abort, and the runner has the cancel grace to
   * confirm before the run ends `cancelled` regardless. False when a cancel was requested
   * already or the end is decided.
   */
  cancel(reason: string): boolean {
    if (this.phaseNow !== 'running') {
      return false;
    }
    this.phaseNow = 'cancelling';
    this.cancelRequested = true;
    this.abortCalls();
    const ms = this.owner.cancelGraceMs;
    this.graceTimer = setTimeout(
      () =>
        this.verdict('cancel', {
          status: 'cancelled',
          code: 'cancelled',
          error: `cancelled (${reason}); the runner did not confirm within ${ms} ms`,
          retryable: false,
        }),
      ms,
    );
    return true;
  }

  /** The runner's session went: a cancelled run ends cancelled, any other fails (retryable). */
  runnerLost(reason: string): boolean {
    return this.verdict(
      'runner_lost',
      this.cancel_requested
        ? {
            status: 'cancelled',
            code: 'cancelled',
            error: `cancelled; the runner disconnected (${reason})`,
            retryable: false,
          }
        : { status: 'failed', code: 'runner.disconnected', error: `runner disconnected: ${reason}`, retryable: true },
    );
  }

  /** A host failure decides the end (the verdict names it); false when the end was decided already. */
  fail(verdict: HostVerdict): boolean {
    return this.verdict('host', verdict);
  }

  /**
   * The owner wrote the end: the run is over and `finished` resolves with `outcome` (what was
   * written, which a failed commit may have changed). Only after the end was decided.
   */
  settle(outcome: RunOutcome): void {
    if (this.phaseNow !== 'ending') {
      throw new Error(`run ${this.run_id}: settle() in phase ${this.phaseNow} (only an ending run settles)`);
    }
    this.phaseNow = 'ended';
    this.resolveFinished(outcome);
  }

  /**
   * The run is no longer this process's (its write was fenced, or the process was declared dead):
   * it is over here without an end of its own — no verdict, nothing written; timers stop and
   * in-flight calls abort; `finished` resolves with `interrupted (host.fenced)`, what another
   * process records or recorded. False when the end was already decided.
   */
  drop(reason: string): boolean {
    if (this.ended) {
      return false;
    }
    this.phaseNow = 'ended';
    clearTimeout(this.deadlineTimer);
    clearTimeout(this.graceTimer);
    this.abortCalls();
    this.resolveFinished({ ...FENCED_OUTCOME, status_reason: reason });
    return true;
  }

  /** An accepted result failed to persist: no later delta is stored resting on the rows before it. */
  notStored(): void {
    this.cumulative.broken();
  }

  /** Serialises this run's persistence steps in arrival order; a failing step does not stop the next. */
  enqueue(step: () => Promise<void>, onError: (e: unknown) => void): void {
    this.chain = this.chain.then(step).catch(onError);
  }

  /**
   * The size of the message being streamed with a delta of `ownBytes` whose cumulative text
   * (all_content) is `cumulativeBytes` (null when it has none).
   */
  messageBytesWith(ownBytes: number, cumulativeBytes: number | null): number {
    return Math.max(this.streamingBytes + ownBytes, cumulativeBytes ?? 0);
  }

  /** The assistant text streamed until the first completed message (a run that only streams). */
  get streamed(): string {
    return this.streamedText;
  }

  /** The first completed message of the run (its assistant transcript row). */
  get assistantMessage(): Record<string, unknown> | null {
    return this.firstCompleted;
  }

  /** The run's delivery (normaliser state and edit timer), attached once at its start. */
  attachDelivery(delivery: RunDelivery): void {
    this.deliveryState ??= delivery;
  }

  get delivery(): RunDelivery | null {
    return this.deliveryState;
  }

  /** Kept for the end: streamed text (only until a message completes, so it stays within the message bound), the first completed message. */
  private keep(row: ResultView, messageBytes: number | null): void {
    if (row.type === 'message.delta') {
      const chunk = row.data.chunk as { content?: unknown } | undefined;
      if (this.firstCompleted === null && typeof chunk?.content === 'string') {
        this.streamedText += chunk.content; // a rope: appending costs O(text), flattened once at the end
      }
      if (messageBytes !== null) {
        this.streamingBytes = messageBytes;
      }
    } else if (row.type === 'message.completed') {
      this.firstCompleted ??= row.data.message as Record<string, unknown>;
      this.streamingBytes = 0;
    }
  }

  private verdict(cause: Exclude<EndCause, 'result'>, v: HostVerdict): boolean {
    if (this.ended) {
      return false;
    }
    this.decide({
      cause,
      terminal: verdictResult(this.run_id, this.nextHostSequence(), v),
      outcome: verdictOutcome(v),
    });
    return true;
  }

  /** The one transition into `ending`: timers stop, in-flight calls abort, the owner gets the end. */
  private decide(ending: RunEnding): void {
    this.phaseNow = 'ending';
    clearTimeout(this.deadlineTimer);
    clearTimeout(this.graceTimer);
    this.abortCalls();
    this.owner.onEnd(ending);
  }

  private armDeadline(deadlineAtMs: number): void {
    const remaining = deadlineAtMs - Date.now();
    if (remaining > MAX_TIMER_MS) {
      this.deadlineTimer = setTimeout(() => this.armDeadline(deadlineAtMs), MAX_TIMER_MS);
      return;
    }
    this.deadlineTimer = setTimeout(
      () =>
        this.verdict('deadline', {
          status: 'timeout',
          code: 'runner.timeout',
          error: 'the run exceeded its deadline',
          retryable: true,
        }),
      Math.max(0, remaining),
    );
  }
}

/** What other code of the runs lib may read of an active run (no transitions). */
export type ActiveRunView = Pick<
  ActiveRun,
  | 'run_id'
  | 'agent_id'
  | 'runner_id'
  | 'snapshot'
  | 'started_at'
  | 'ended'
  | 'phase'
  | 'cancel_requested'
  | 'last_sequence'
  | 'delivery'
  | 'finished'
  | 'grant'
  | 'lease'
  | 'shown_sequence'
  | 'streamed'
  | 'assistantMessage'
>;
