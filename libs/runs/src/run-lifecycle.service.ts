import { Inject, Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type { AuthorizationSnapshot } from '@libs/authz';
import { deliveryPolicySchema } from '@libs/agents';
import {
  DeliveryService,
  deliveryPlan,
  deliveryContextOf,
  hugeOps,
  type DeliveryOp,
  type DeliveryPlan,
} from '@libs/delivery';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { StateService, TranscriptService, conversationOf } from '@libs/conversations';
import {
  RunsRepository,
  conversationKey,
  isFenced,
  type JsonObject,
  type NewResult,
  type OrphanRef,
  type RunLease,
} from '@libs/persistence';
import type { RunnerSession } from '@libs/runner-gateway';
import { ActiveRuns } from './active-runs';
import { ActiveRun, FENCED_OUTCOME, type ActiveRunView, type RunEnding } from './active-run';
import { assistantMessageAtEnd, effectsOf } from './result-effects';
import { verdictOutcome, verdictResult, type HostVerdict } from './run-outcome';
import { RunStreamBus, type ResultView } from './run-stream.bus';
import { SIGNAL_PORT, nextSignal, type SignalPort } from './concurrency/signal-port';
import { CommitSignals, FollowInterest } from './database-follows';
import { isTerminal, type RunStatus } from '@libs/protocol';
import { telemetry } from '@libs/telemetry';
import type { RunSteps } from './run-steps';

/**
 * The row to write for a result; `stored`: its data as stored, when not as sent (cumulative-deltas.ts).
 * Written field by field, not as `{ ...r, data, … }`: an object spread
 * followed by more keys is a slow path of V8 in Node 20 (µs per object, where a plain `{ ...r }` or
 * `{ a, ...r }` takes tens of ns; docs/benchmarks.md#host-cpu-per-run-round-9-wt-cpu9).
 * The writer reads the row by RESULT_COLUMNS; nothing else sees it.
 */
function resultRow(r: ResultView, stored: Record<string, unknown> = r.data): NewResult {
  return {
    run_id: r.run_id,
    sequence: r.sequence,
    type: r.type,
    data: stored as JsonObject,
    usage: r.usage as JsonObject | null,
    source: r.source,
    timestamp: r.timestamp,
    created_at: Date.now(),
  };
}

/** A run started without a plan: the protocol's default surface and the default policy. */
const DEFAULT_DELIVERY = deliveryPlan(deliveryPolicySchema.parse({}), deliveryContextOf(undefined));

/** Beyond the cancel grace and two poll periods, how long a cancel at a non-owner waits for the run's end. */
const CANCEL_ANSWER_MARGIN_MS = 5000;

const PERSISTENCE_FAILED: HostVerdict = {
  status: 'failed',
  code: 'host.persistence_failed',
  error: 'the host could not record the run result',
  retryable: true,
};

/**
 * After the commit of huge ops (a 16 MiB `message.final`), one turn of the event loop before they
 * are shown: their SSE frames are built and written in a task of their own, not in the commit's
 * (docs/delivery.md#long-answers). Publishing stays in the run's order: its next step waits. Only
 * for huge ops (`hugeOps`): an await in every step would cost every result a microtask.
 */
function turnAfterHugeCommit(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * The owner of every active run (docs/architecture.md#the-life-of-a-run): it starts the run's
 * state machine (ActiveRun) and is the only code that hands it verdicts, writes its end and opens
 * and ends its results channel. Results persisted, deadline, cancel, disconnect, the end of a
 * run, recovery: every write goes through the one writer, in the run's arrival order; a reader
 * is shown a result only after it committed.
 */
@Injectable()
export class RunLifecycleService implements RunSteps, OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('RunLifecycle');
  private unsubscribe?: () => void;
  /**
   * On a shared bus: the `results` signal after each commit of a run's rows, coalesced, for its
   * readers in other processes, sent only while some process announces it follows the run
   * (docs/scale-out.md#everything-from-anywhere-reads-cancel-steering); null in one process.
   */
  private readonly commits: CommitSignals | null;
  private readonly followed: FollowInterest | null;
  private cancelPoll?: NodeJS.Timeout;
  private pollingCancels = false;

  constructor(
    private readonly runs: RunsRepository,
    @Inject(SIGNAL_PORT) private readonly signals: SignalPort,
    private readonly active: ActiveRuns,
    private readonly bus: RunStreamBus,
    private readonly state: StateService,
    private readonly transcript: TranscriptService,
    private readonly deliveries: DeliveryService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    const interest = signals.pollMs === undefined ? null : new FollowInterest(signals.pollMs);
    this.followed = interest;
    this.commits =
      interest &&
      new CommitSignals(
        (runId) => this.signals.publish({ kind: 'results', run_id: runId }),
        (runId) => interest.followed(runId),
      );
  }

  /** Rows of the run were committed: readers following it from another process read them. */
  private committed(runId: string): void {
    this.commits?.committed(runId);
  }

  /**
   * Interrupt (docs/conversations-and-steering.md#concurrency-policies): a cancel signal goes
   * through the real cancel path of the run, if it is active here.
   */
  onModuleInit(): void {
    const unfollow = this.followed && this.subscribeFollows(this.followed);
    const uncancel = this.signals.subscribe('cancel', (s) => {
      const run = this.active.get(s.run_id);
      if (run && !run.ended) {
        void this.cancel(run, s.reason).catch((e: unknown) =>
          this.logger.error({
            run_id: s.run_id,
            msg: `interrupt failed: ${e instanceof Error ? e.message : String(e)}`,
          }),
        );
      }
    });
    this.unsubscribe = () => {
      uncancel();
      unfollow?.();
    };
    // The poll behind the cancel signal: a cancel requested at another process whose signal was lost.
    if (this.signals.pollMs !== undefined) {
      this.cancelPoll = setInterval(() => void this.pollCancels(), this.signals.pollMs);
      this.cancelPoll.unref();
    }
  }

  onModuleDestroy(): void {
    this.unsubscribe?.();
    clearInterval(this.cancelPoll);
  }

  /**
   * `follow` announcements (docs/scale-out.md#everything-from-anywhere-reads-cancel-steering): a
   * run newly followed that is active here gets one `results` signal at once, so a follower that
   * started after the run's last commit reads without waiting for its poll tick.
   */
  private subscribeFollows(interest: FollowInterest): () => void {
    return this.signals.subscribe('follow', (s) => {
      if (interest.noted(s.run_id) && this.active.get(s.run_id)) {
        this.committed(s.run_id);
      }
    });
  }

  /**
   * Reads the cancel requests of the runs active here (`cancel_requested_at`, written by any
   * process) and cancels those not cancelling yet: one query per poll tick, only when runs are active.
   */
  async pollCancels(): Promise<void> {
    const ids = this.active
      .all()
      .filter((r) => !r.ended && !r.cancel_requested)
      .map((r) => r.run_id);
    if (this.pollingCancels || ids.length === 0) {
      return;
    }
    this.pollingCancels = true;
    try {
      for (const runId of await this.runs.cancelRequestedAmong(ids)) {
        const run = this.active.get(runId);
        if (run && !run.ended && !run.cancel_requested) {
          this.logger.log({ run_id: runId, msg: 'cancel request read from the database (its signal was lost)' });
          void this.cancel(run, 'cancelled by request').catch((e: unknown) =>
            this.logger.error({ run_id: runId, msg: `cancel failed: ${e instanceof Error ? e.message : String(e)}` }),
          );
        }
      }
    } catch (e) {
      this.logger.warn({ msg: `reading cancel requests: ${e instanceof Error ? e.message : String(e)}` });
    } finally {
      this.pollingCancels = false;
    }
  }

  /**
   * Cancel of a run owned by another process (docs/scale-out.md#everything-from-anywhere): the
   * request is written (the owner's poll reads it), then signalled (the owner acts at once);
   * resolves once the run ended — the owner's cancel grace, then it ends regardless — or after
   * that grace and two poll periods more (an owner that died leaves its run to the sweep).
   */
  async cancelElsewhere(runId: string, reason: string): Promise<void> {
    await this.runs.markCancelRequested(runId, Date.now());
    this.signals.publish({ kind: 'cancel', run_id: runId, reason });
    const pollMs = this.signals.pollMs ?? this.config.cluster.pollMs;
    const until = Date.now() + this.config.runs.cancelGraceMs + 2 * pollMs + CANCEL_ANSWER_MARGIN_MS;
    for (;;) {
      const remaining = until - Date.now();
      // The owner signals the run's commits only while someone follows it (renewed each round).
      this.signals.publish({ kind: 'follow', run_id: runId });
      // Subscribed before the read: the end's signal between the read and the wait is not missed.
      const waiter = remaining > 0 ? nextSignal(this.signals, 'results', (s) => s.run_id === runId, remaining) : null;
      const status = await this.runs.status(runId);
      if (status === null || isTerminal(status) || !waiter || !(await waiter.promise)) {
        waiter?.cancel();
        return;
      }
    }
  }

  /** The interrupt policy's cancel (docs/conversations-and-steering.md#concurrency-policies), wherever the run is active. */
  interrupt(runId: string, reason: string): void {
    if (!this.active.get(runId) && this.signals.pollMs !== undefined) {
      // Active in another process: written too, so that its poll finds it if the signal is lost.
      void this.runs.markCancelRequested(runId, Date.now()).catch((e: unknown) =>
        this.logger.error({
          run_id: runId,
          msg: `interrupt not recorded: ${e instanceof Error ? e.message : String(e)}`,
        }),
      );
    }
    this.signals.publish({ kind: 'cancel', run_id: runId, reason });
  }

  /**
   * The takeover of a run whose owner process is dead (docs/scale-out.md#dead-owner-sweep; at boot
   * this is crash recovery: docs/durability.md#crash-recovery), in one commit under its row lock:
   * with `requeueUnstarted`, a run with no committed result waits again and its conversation is
   * signalled (only for a caller that knows its runner never began it); any other ends
   * `interrupted` with its terminal after the last committed result (the only ones a reader can
   * have seen), its delivery closed and its queued steering items re-dispatched in order. Readers
   * following it in this process see the terminal. False when it was not taken (another sweeper
   * took it, it ended, or its owner is back).
   */
  async takeOver(orphan: OrphanRef, requeueUnstarted = false): Promise<boolean> {
    const row = await this.runs.get(orphan.run_id);
    if (!row || row.status !== 'running') {
      return false;
    }
    const verdict: HostVerdict = {
      status: 'interrupted',
      code: 'host.interrupted',
      error: 'the host process running it stopped while the run was active',
      retryable: true,
    };
    const outbox = await this.deliveries.interrupted(row);
    const at = Date.now();
    // The unit sets the terminal's sequence: after the last result committed under the row lock.
    const terminal = resultRow(verdictResult(row.run_id, 0, verdict));
    const taken = await this.runs.takeOver({
      orphan,
      terminal,
      end: { ...verdictOutcome(verdict), finished_at: at },
      outbox,
      at,
      requeue_unstarted: requeueUnstarted,
    });
    if (!taken.taken) {
      return false;
    }
    telemetry.runTakenOver(taken.kind);
    // Readers following it from the database at other processes read its end now (docs/scale-out.md).
    this.committed(row.run_id);
    if (taken.kind === 'requeued') {
      this.logger.warn({ run_id: row.run_id, msg: 'run of a dead host process never started: waiting again' });
      this.signals.publish({ kind: 'conversation', key: taken.conversation_key });
      return true;
    }
    this.logger.warn({
      run_id: row.run_id,
      msg: `run interrupted: its host process died${taken.released ? `; ${taken.released} steering item(s) re-dispatched` : ''}`,
    });
    if (this.bus.follow(row.run_id)) {
      this.bus.publish(verdictResult(row.run_id, taken.sequence, verdict));
      this.bus.end(row.run_id);
    }
    if (taken.conversation_key) {
      this.signals.publish({ kind: 'conversation', key: taken.conversation_key });
    }
    return true;
  }

  /**
   * Graceful shutdown (docs/deployment.md#graceful-shutdown): resolves once no run is active in
   * this process, or when `signal` aborts (the grace ran out, or a second signal came).
   */
  async idle(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const runs = this.active.all();
      if (runs.length === 0) {
        return;
      }
      const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      await Promise.race([Promise.allSettled(runs.map((r) => r.finished)), aborted]);
    }
  }

  /**
   * Graceful shutdown, after the grace: every run still active here ends `interrupted` with its
   * terminal result (steering items re-queued in the same commit, as crash recovery does), the
   * runner is told to cancel it; resolves once every end is written. How many were interrupted.
   */
  async interruptAll(why: string): Promise<number> {
    const runs = this.active.all().filter((r) => !r.ended);
    for (const run of runs) {
      this.conclude(run, { status: 'interrupted', code: 'host.interrupted', error: why, retryable: true });
      try {
        run.session.send({ cancel: { run_id: run.run_id, reason: why } });
      } catch {
        // The stream is gone already: the runner has lost the run anyway.
      }
      this.logger.warn({ run_id: run.run_id, msg: `run interrupted: ${why}` });
    }
    await Promise.allSettled(this.active.all().map((r) => r.finished));
    return runs.length;
  }

  /** Opens the results channel of a run that waits in its conversation: its readers follow it before it starts. */
  openWaiting(runId: string): void {
    this.bus.open(runId);
  }

  /**
   * A run waiting in its conversation (`queued`) has no live channel yet when this process did
   * not queue it (e.g. after a restart): one is opened, so its readers follow it until it ends.
   */
  async followWaiting(runId: string, known?: RunStatus): Promise<void> {
    // A terminal status (as the caller just read it) is final: the run waits no more.
    if (this.bus.follow(runId) || (known !== undefined && isTerminal(known))) {
      return;
    }
    if ((await this.runs.status(runId)) !== 'queued') {
      return;
    }
    this.bus.open(runId);
    // It may have ended between the read and the open: then nothing would ever end the channel.
    const now = await this.runs.status(runId);
    if (now !== 'queued' && now !== 'running') {
      this.bus.end(runId);
    }
  }

  /** A waiting run ended before it started (its end committed): its readers see the terminal result, the channel ends. */
  endedWaiting(terminal: ResultView): void {
    this.bus.publish(terminal);
    this.bus.end(terminal.run_id);
    this.committed(terminal.run_id);
  }

  /**
   * Registers a dispatched run (its state machine arms its deadline) and opens its results
   * channel. `lease`: the claim its start unit made (every write of the run is fenced by it).
   */
  start(
    run_id: string,
    agent: { agent_id: string },
    session: RunnerSession,
    snapshot: AuthorizationSnapshot,
    delivery: DeliveryPlan = DEFAULT_DELIVERY,
    lease: RunLease | null = null,
  ): ActiveRun {
    const run: ActiveRun = new ActiveRun(
      { run_id, agent_id: agent.agent_id, session, snapshot, lease },
      { cancelGraceMs: this.config.runs.cancelGraceMs, onEnd: (ending) => this.finish(run, ending) },
    );
    this.active.add(run);
    this.bus.open(run_id);
    const host = {
      run_id,
      agent_id: agent.agent_id,
      // Delivery's own writes (a coalesced edit come due): its followers elsewhere are woken too.
      enqueue: (step: () => Promise<void>) =>
        this.enqueue(run, async () => {
          await step();
          this.committed(run_id);
        }),
    };
    run.attachDelivery(this.deliveries.open(host, delivery));
    return run;
  }

  /** Queues a step of this run behind its earlier ones. */
  enqueue(run: ActiveRun, step: () => Promise<void>): void {
    run.enqueue(step, (e: unknown) => {
      this.logger.error({ run_id: run.run_id, msg: `run step failed: ${e instanceof Error ? e.stack : String(e)}` });
    });
  }

  /**
   * An accepted non-terminal result: written with what it implies (state), then shown to live
   * readers as sent. `extra.stored`: its data as stored, when not as sent (a cumulative delta:
   * docs/durability.md#cumulative-deltas).
   */
  accept(
    run: ActiveRun,
    row: ResultView,
    extra: { ops?: DeliveryOp[]; written?: Promise<unknown> | null; stored?: Record<string, unknown> } = {},
  ): void {
    const effects = effectsOf(run, row, this.state);
    // `extra`: what the result implies beyond delivery's normaliser (an interaction, docs/interactions.md).
    const ops = [...(extra.ops ?? []), ...(run.delivery?.onResult(row) ?? [])];
    const written = Promise.all([
      this.runs.insertResult(resultRow(row, extra.stored), effects.state, this.outboxRows(run, ops), run.lease),
      extra.written,
    ]);
    this.enqueue(run, async () => {
      try {
        await written;
      } catch (e) {
        if (isFenced(e)) {
          this.fenced(run);
          return;
        }
        run.notStored();
        this.logger.error({
          run_id: run.run_id,
          msg: `result ${row.sequence} (${row.type}) not persisted, dropped: ${e instanceof Error ? e.message : String(e)}`,
        });
        return;
      }
      telemetry.tracing.resultsCommitted(run.run_id, row.sequence);
      if (hugeOps(ops)) {
        await turnAfterHugeCommit();
      }
      run.shown(row.sequence);
      this.bus.publish(row);
      this.deliveries.published(ops, run.delivery?.plan ?? null);
      this.committed(run.run_id);
    });
  }

  private outboxRows(run: ActiveRunView, ops: DeliveryOp[]) {
    return run.delivery ? this.deliveries.rows(run.agent_id, run.delivery.plan, ops) : [];
  }

  /** A host failure ends an active run with its verdict (a final run.failed result); no-op once its end is decided. */
  conclude(run: ActiveRun, verdict: HostVerdict): void {
    run.fail(verdict);
  }

  onDisconnected(session: RunnerSession, reason: string): void {
    for (const run of this.active.onSession(session.session_id)) {
      if (run.runnerLost(reason)) {
        this.logger.warn({ run_id: run.run_id, msg: `runner disconnected mid-run: ${reason}` });
      }
    }
  }

  /**
   * Sends a cancel to the runner, which has the grace period to confirm with its `run.failed
   * {code: cancelled}` before the run ends `cancelled` regardless; resolves once the run ended.
   */
  async cancel(run: ActiveRun, reason: string): Promise<void> {
    if (run.cancel(reason)) {
      await this.runs.markCancelRequested(run.run_id, Date.now());
      run.session.send({ cancel: { run_id: run.run_id, reason } });
      this.logger.log({ run_id: run.run_id, msg: `cancel sent to the runner: ${reason}` });
    }
    await run.finished;
  }

  /**
   * A write of the run was fenced (docs/scale-out.md#fenced-writes): another process owns it now,
   * or this one was declared dead. The run is dropped here without writing anything more; its
   * runner is told to stop it (the owner now re-runs or ends it); readers here follow it until
   * the end the other process writes. No-op once its end is decided (its finish sees the fence).
   */
  fenced(run: ActiveRun): void {
    if (!run.drop('the run is owned by another host process now')) {
      return;
    }
    this.fencedOut(run);
    this.active.remove(run.run_id);
    this.deliveries.end(run.run_id);
    void this.handOver(run);
  }

  /** Every run active here is dropped without writing (this process was declared dead: self-fence). */
  dropAll(): number {
    let n = 0;
    for (const run of this.active.all()) {
      if (!run.ended) {
        this.fenced(run);
        n++;
      }
    }
    return n;
  }

  private fencedOut(run: ActiveRun): void {
    telemetry.fencedWrite();
    this.logger.warn({
      run_id: run.run_id,
      msg: `write fenced: attempt ${run.lease?.attempt ?? '?'} no longer owns the run; dropped in this process`,
    });
    try {
      run.session.send({
        cancel: { run_id: run.run_id, reason: 'host.fenced: the run is owned by another host process' },
      });
    } catch {
      // The stream is gone: nothing to stop.
    }
  }

  /**
   * Readers following a run this process lost see the end the new owner writes: the committed
   * results after the last one shown are read back once the run is over (a bounded poll), then
   * the channel ends (a reader that is cut reconnects and replays from the database).
   */
  private async handOver(run: ActiveRunView): Promise<void> {
    const runId = run.run_id;
    if (!this.bus.follow(runId)) {
      return;
    }
    const { pollMs, leaseMs } = this.config.cluster;
    const until = Date.now() + 3 * leaseMs;
    try {
      for (;;) {
        const status = await this.runs.status(runId);
        if ((status !== 'running' && status !== 'queued') || Date.now() >= until) {
          break;
        }
        await new Promise((r) => setTimeout(r, Math.min(pollMs, 1000)).unref());
      }
      for (const r of await this.runs.resultsAfter(runId, run.shown_sequence, 1000)) {
        this.bus.publish(r);
      }
    } catch (e) {
      this.logger.warn({ run_id: runId, msg: `hand-over read failed: ${e instanceof Error ? e.message : String(e)}` });
    } finally {
      this.bus.end(runId);
    }
  }

  /**
   * The end of a run in one commit — final status, terminal result, its state write, the
   * assistant transcript row — queued behind the run's earlier results; then the terminal result
   * is shown to readers (whoever sees it also reads the final status). If that commit fails the
   * host writes its own `run.failed`, so no run is ever left without a terminal result.
   */
  private finish(run: ActiveRun, ending: RunEnding): void {
    let { terminal, outcome } = ending;
    if (ending.cause === 'deadline') {
      run.session.send({ cancel: { run_id: run.run_id, reason: 'deadline exceeded' } });
      this.logger.warn({ run_id: run.run_id, msg: 'run deadline exceeded' });
    }
    const effects = effectsOf(run, terminal, this.state);
    const message = assistantMessageAtEnd(run, terminal, outcome.status === 'completed');
    const conversation = conversationOf(run.snapshot.scope);
    const assistant =
      message && conversation
        ? this.transcript.assistantRow(
            {
              agent_id: conversation.agent_id,
              workspace_id: conversation.workspace_id,
              conversation_id: conversation.conversation_id,
              thread_id: conversation.thread_id,
              run_id: run.run_id,
              runner_id: run.runner_id,
            },
            message,
          )
        : null;
    // Field by field (see resultRow): the writer reads these by name.
    const end = {
      status: outcome.status,
      status_reason: outcome.status_reason,
      error_code: outcome.error_code,
      retryable: outcome.retryable,
      usage: outcome.usage ?? null,
      finished_at: Date.now(),
    };
    const ops = run.delivery?.onEnd(terminal, outcome.status) ?? [];
    const key = conversation
      ? conversationKey(run.agent_id, conversation.workspace_id, conversation.conversation_id, conversation.thread_id)
      : null;
    // Whether a run waits in the conversation, read by the end's own unit: only then is the
    // `conversation` signal sent (a NOTIFY on a shared bus); the dispatcher's poll is the truth.
    let waiting = false;
    const written = this.runs
      .end(resultRow(terminal), end, effects.state, assistant, this.outboxRows(run, ops), run.lease, key)
      .then((r) => {
        waiting = r.waiting;
      });
    this.enqueue(run, async () => {
      let fenced = false;
      try {
        await written.catch(async (e: unknown) => {
          if (isFenced(e)) {
            fenced = true;
            return;
          }
          this.logger.error({
            run_id: run.run_id,
            msg: `terminal result not persisted (${e instanceof Error ? e.message : String(e)}); the host fails the run`,
          });
          terminal = verdictResult(
            run.run_id,
            Math.max(run.nextHostSequence(), terminal.sequence + 1),
            PERSISTENCE_FAILED,
          );
          outcome = verdictOutcome(PERSISTENCE_FAILED);
          return this.runs
            .end(resultRow(terminal), { ...outcome, finished_at: Date.now() }, null, null, [], run.lease, key)
            .then((r) => {
              waiting = r.waiting;
              return r;
            })
            .catch((again: unknown) => {
              if (!isFenced(again)) {
                throw again;
              }
              fenced = true;
              return { ended: false, released: 0 };
            });
        });
        if (fenced) {
          // Another process owns the run now: it wrote (or writes) the end; nothing of this one counts.
          outcome = FENCED_OUTCOME;
          this.fencedOut(run);
        } else {
          if (hugeOps(ops)) {
            await turnAfterHugeCommit();
          }
          this.bus.publish(terminal);
          this.deliveries.published(ops, run.delivery?.plan ?? null);
          this.committed(run.run_id);
          if (telemetry.logs.enabled('log')) {
            this.logger.log({
              run_id: run.run_id,
              msg: `run ${outcome.status}${outcome.error_code ? ` (${outcome.error_code})` : ''}`,
            });
          }
        }
      } finally {
        if (!fenced) {
          telemetry.runEnded(run.runner_id, outcome.status, run.admitted_at, run.run_id, outcome.error_code);
        }
        this.active.remove(run.run_id);
        if (fenced) {
          void this.handOver(run);
        } else {
          this.bus.end(run.run_id);
        }
        this.deliveries.end(run.run_id);
        run.settle(outcome);
        if (key !== null && waiting) {
          // The conversation is free and a run waits in it (re-dispatched items first, by arrival):
          // it may start. Nothing waiting, no signal (docs/scale-out.md#signal-bus).
          telemetry.conversationSignal('sent');
          this.signals.publish({ kind: 'conversation', key });
        } else if (key !== null) {
          telemetry.conversationSignal('skipped');
        }
      }
    });
  }
}
