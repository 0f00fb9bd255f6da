import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { DEFAULT_WORKSPACE, SteeringRepository, type JsonObject, type SteeringRow } from '@libs/persistence';
import { RunnerDispatch, RunnerPresence } from '@libs/runner-gateway';
import { AdmissionCatalog } from '../admission-catalog';
import { RunLifecycleService } from '../run-lifecycle.service';
import { verdictResult, type HostVerdict } from '../run-outcome';
import { RunStarter, type LiveRunner } from '../run-start';
import { RunLeases } from '../run-leases.service';
import { WorkspaceQuotaGate } from '../workspace-quotas';
import { isStoredSubmission } from './admission-rows';
import { routeOf, waitingAction } from './routing';
import { SIGNAL_PORT, type SignalPort } from './signal-port';

const RUNNER_POLL_MS = 100;
/** While a waiting run's runner is connected nowhere, presence in other processes is read this often. */
const PRESENCE_POLL_MS = 1000;
const RETRY_MS = 1000;
/**
 * How often a conversation whose next run waits for its workspace's `max_active_runs` tries again
 * when the port does not poll (one process: the end of a run of another conversation of the
 * workspace signals nothing to this one). On a shared bus the port's poll period is used.
 */
export const QUOTA_RETRY_MS = 1000;

/**
 * Starts a conversation's waiting runs (queued events, re-dispatched steering items) one at a
 * time, in arrival order, whenever the conversation is free: after a run ends, after an event
 * was queued, and at boot (after the interrupted runs were finalised and their items released).
 * A waiting run whose runner is not connected (right after a restart, before plugins reconnect)
 * waits for it, up to QUEUED_RUN_RUNNER_WAIT_MS from when it became due, then fails
 * `runner.unavailable`; the next one is then tried. A waiting run whose runner another live
 * process holds is left to that process (docs/scale-out.md#routing): its dispatcher is woken by
 * the same `conversation` signal and claims it. One driver per conversation in this process; the
 * database (lock + unique running run + the item's conditional start) decides between processes.
 *
 * A waiting run that would take its workspace past `max_active_runs` does not start: it keeps
 * waiting (its conversation's later items behind it) and its conversation is tried again every
 * QUOTA_RETRY_MS (or the poll period) until it starts (docs/tenancy.md#quotas).
 *
 * On a signal port that may lose wake-ups (a shared bus: `pollMs`, SIGNAL_POLL_MS), it also scans
 * the waiting conversations every poll period, so that a lost signal (bus down, a run ended in
 * another process) delays a waiting run by at most one period (docs/scale-out.md#signal-bus).
 */
@Injectable()
export class ConversationDispatcher implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Conversations');
  private readonly drivers = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();
  private readonly stopping = new AbortController();
  private readonly bootAt = Date.now();
  private unsubscribe?: () => void;
  private pollTimer?: NodeJS.Timeout;
  private polling = false;
  /** Conversations whose next run waits for its workspace's `max_active_runs`: tried again on a timer. */
  private readonly quotaBlocked = new Set<string>();
  /**
   * Conversations whose last start was refused by the quota: their next try counts the
   * workspace's running runs first and prepares the run only when a slot looks free.
   */
  private readonly quotaWaiting = new Set<string>();
  private quotaTimer?: NodeJS.Timeout;

  constructor(
    private readonly steering: SteeringRepository,
    private readonly lifecycle: RunLifecycleService,
    private readonly starter: RunStarter,
    private readonly catalog: AdmissionCatalog,
    private readonly runners: RunnerDispatch,
    @Inject(SIGNAL_PORT) private readonly signals: SignalPort,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly presence: RunnerPresence,
    private readonly leases: RunLeases,
    private readonly quotas: WorkspaceQuotaGate,
  ) {}

  /**
   * Crash recovery (docs/durability.md#crash-recovery), in order: the runs of dead processes
   * taken over (RunLeases.recover: interrupted, or waiting again; their queues released),
   * orphaned queues, then the waiting runs.
   */
  async onApplicationBootstrap(): Promise<void> {
    await this.leases.recover();
    const released = await this.steering.releaseOrphans();
    if (released > 0) {
      this.logger.warn({ msg: `${released} steering item(s) of ended runs re-dispatched` });
    }
    this.unsubscribe = this.signals.subscribe('conversation', (s) => this.kick(s.key));
    for (const key of await this.steering.waitingConversations()) {
      this.kick(key);
    }
    const pollMs = this.signals.pollMs;
    if (pollMs !== undefined && !this.stopping.signal.aborted) {
      this.pollTimer = setInterval(() => void this.poll(), pollMs);
      this.pollTimer.unref();
    }
  }

  /** One scan behind the signals: kicks every conversation with a waiting run (one scan at a time). */
  private async poll(): Promise<void> {
    if (this.polling || this.stopping.signal.aborted) {
      return;
    }
    this.polling = true;
    try {
      for (const key of await this.steering.waitingConversations()) {
        this.kick(key);
      }
    } catch (e) {
      this.logger.warn({
        msg: `waiting-conversation poll failed (the next one retries): ${e instanceof Error ? e.message : String(e)}`,
      });
    } finally {
      this.polling = false;
    }
  }

  /** Stops at the first shutdown hook: a run waiting for its runner must not hold the process. */
  async onModuleDestroy(): Promise<void> {
    await this.pause();
  }

  /**
   * Starts no waiting run any more (graceful shutdown, docs/deployment.md#graceful-shutdown): they
   * stay queued for the other processes; resolves once the drivers running now have stopped.
   */
  async pause(): Promise<void> {
    this.stopping.abort();
    clearInterval(this.pollTimer);
    clearTimeout(this.quotaTimer);
    this.unsubscribe?.();
    await Promise.allSettled([...this.drivers.values()]);
  }

  /** Starts the conversation's next waiting run if it is free (coalesced: one driver per conversation). */
  kick(key: string): void {
    if (this.stopping.signal.aborted) {
      return;
    }
    if (this.drivers.has(key)) {
      this.again.add(key);
      return;
    }
    const driver = this.drive(key)
      .catch((e: unknown) => {
        // A waiting run must not stay stuck until the conversation's next event: try again soon.
        this.logger.error({
          msg: `conversation dispatch failed, retrying: ${e instanceof Error ? e.stack : String(e)}`,
        });
        setTimeout(() => this.kick(key), RETRY_MS).unref();
      })
      .finally(() => {
        this.drivers.delete(key);
        if (this.again.delete(key)) {
          this.kick(key);
        }
      });
    this.drivers.set(key, driver);
  }

  private async drive(key: string): Promise<void> {
    while (!this.stopping.signal.aborted) {
      const next = await this.steering.nextWaiting(key);
      if (!next) {
        this.quotaWaiting.delete(key);
        return;
      }
      const outcome = await this.startOne(next, this.quotaWaiting.has(key));
      if (outcome === 'quota') {
        this.retryForQuota(key);
        return;
      }
      this.quotaWaiting.delete(key);
      if (outcome === 'started' || outcome === 'busy' || outcome === 'elsewhere') {
        return;
      }
    }
  }

  /** The conversation is tried again once QUOTA_RETRY_MS (or the poll period) passed; one timer for all. */
  private retryForQuota(key: string): void {
    this.quotaWaiting.add(key);
    this.quotaBlocked.add(key);
    if (this.quotaTimer || this.stopping.signal.aborted) {
      return;
    }
    this.quotaTimer = setTimeout(() => {
      this.quotaTimer = undefined;
      const keys = [...this.quotaBlocked];
      this.quotaBlocked.clear();
      for (const k of keys) {
        this.kick(k);
      }
    }, this.signals.pollMs ?? QUOTA_RETRY_MS);
    this.quotaTimer.unref();
  }

  /**
   * Tries the conversation's next waiting run. `quotaFirst` (its last try was refused by the
   * workspace's `max_active_runs`): one count of the workspace's running runs before anything
   * else is read or built — while the quota stays reached, a retry costs that read, not a
   * preparation (snapshot, state, transcript, context) thrown away each time.
   */
  private async startOne(
    item: SteeringRow,
    quotaFirst = false,
  ): Promise<'started' | 'busy' | 'failed' | 'moved' | 'elsewhere' | 'quota'> {
    const conversation = {
      key: item.conversation_key,
      agent_id: item.agent_id,
      runner_id: item.runner_id,
      workspace_id: item.workspace_id,
      conversation_id: item.conversation_id,
      thread_id: item.thread_id,
    };
    if ((await this.steering.situation(conversation)).running_run_id) {
      return 'busy';
    }
    const runId = item.next_run_id!;
    const agent = await this.catalog.agent(item.agent_id).catch(() => null);
    if (!agent) {
      return this.fail(item, { code: 'agent.not_found', error: `agent ${item.agent_id} no longer exists` });
    }
    const activeQuota = this.quotas.activeQuota(agent.workspace_id ?? DEFAULT_WORKSPACE);
    if (quotaFirst && activeQuota && (await this.steering.activeQuotaReached(activeQuota))) {
      return 'quota';
    }
    const live = await this.runnerOf(agent.runner_id, item);
    if (live === 'elsewhere') {
      return 'elsewhere';
    }
    if (!live) {
      return this.fail(item, {
        code: 'runner.unavailable',
        error: `runner ${agent.runner_id} did not connect within ${this.config.runs.runnerWaitMs} ms`,
      });
    }
    const sub = item.submission;
    if (!isStoredSubmission(sub)) {
      return this.fail(item, {
        code: 'host.dispatch_failed',
        error: 'the waiting run has no valid stored event submission',
      });
    }
    const prepared = await this.starter.prepare(runId, item.event_id, sub, agent, live, Date.now());
    const started = await this.starter.whileStarting(prepared, conversation.key, () =>
      this.steering.startWaiting({
        conversation,
        item_id: item.id,
        run_id: runId,
        run: prepared.run,
        // Checked at the start as at admission (docs/tenancy.md#quotas): a waiting or routed run
        // that would exceed the limit keeps waiting.
        active_quota: activeQuota,
      }),
    );
    if (started.started) {
      this.logger.log({ run_id: runId, msg: `waiting run started (event ${item.event_id})` });
      this.starter.dispatch(prepared, agent, live, started.event_seq, started.attempt);
      return 'started';
    }
    if (started.why === 'quota') {
      this.logger.debug({ run_id: runId, msg: 'waiting run not started: its workspace is at max_active_runs' });
      return 'quota';
    }
    return started.why === 'busy' ? 'busy' : 'moved';
  }

  /**
   * The runner's live session here; 'elsewhere' when another live process holds it (that one
   * starts the run); else waits for it to connect here or elsewhere until the item's bound passes.
   */
  private async runnerOf(runnerId: string, item: SteeringRow): Promise<LiveRunner | 'elsewhere' | undefined> {
    const due = Math.max(item.redispatched_at ?? item.created_at, this.bootAt);
    const until = due + this.config.runs.runnerWaitMs;
    let presenceReadAt = 0;
    for (;;) {
      const live = this.runners.target(runnerId);
      let elsewhere = false;
      if (!live && Date.now() - presenceReadAt >= PRESENCE_POLL_MS) {
        presenceReadAt = Date.now();
        elsewhere = await this.presence.heldElsewhere(runnerId);
      }
      const action = waitingAction(routeOf(live !== undefined, elsewhere), Date.now() >= until);
      if (action === 'start') {
        return live;
      }
      if (action === 'leave') {
        return 'elsewhere';
      }
      if (action === 'fail' || this.stopping.signal.aborted) {
        return undefined;
      }
      await sleep(Math.min(RUNNER_POLL_MS, until - Date.now()), undefined, { signal: this.stopping.signal }).catch(
        () => undefined,
      );
    }
  }

  /**
   * Cancel of a run that waits in its conversation (POST /v1/runs/:id/cancel): it ends
   * `cancelled` before it started. False when it is not waiting (it started meanwhile).
   */
  async cancelWaiting(runId: string, reason: string): Promise<boolean> {
    const item = await this.steering.itemOfNextRun(runId);
    if (!item) {
      return false;
    }
    const done = await this.end(item, { status: 'cancelled', code: 'cancelled', error: reason, retryable: false });
    if (done) {
      this.signals.publish({ kind: 'conversation', key: item.conversation_key });
    }
    return done;
  }

  /** A waiting run that cannot start ends `failed` with its terminal result; its readers see it. */
  private async fail(item: SteeringRow, why: { code: string; error: string }): Promise<'failed'> {
    await this.end(item, { status: 'failed', code: why.code, error: why.error, retryable: true });
    return 'failed';
  }

  private async end(item: SteeringRow, verdict: HostVerdict): Promise<boolean> {
    const runId = item.next_run_id!;
    const terminal = verdictResult(runId, 1, verdict);
    const now = Date.now();
    const ended = await this.steering.failQueued(
      item.id,
      { ...terminal, data: terminal.data as JsonObject, usage: null, created_at: now },
      {
        status: verdict.status,
        status_reason: verdict.error,
        error_code: verdict.code,
        retryable: verdict.retryable,
        finished_at: now,
      },
    );
    if (ended) {
      this.logger.warn({ run_id: runId, msg: `waiting run ended ${verdict.status}: ${verdict.error}` });
      this.lifecycle.endedWaiting(terminal);
    }
    return ended;
  }
}
