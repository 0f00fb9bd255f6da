import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { ProcessRegistry } from '@libs/cluster';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import {
  claimSenderUnit,
  fencedSenderUnit,
  HotStore,
  oldestPendingWebhookUnit,
  pendingHeadsUnit,
  releaseOtherSendersUnit,
  releaseSendersUnit,
  sweepSendersUnit,
  type Unit,
  webhookDeliveredUnit,
  webhookFailedUnit,
  webhookRetryUnit,
  type OutboxRow,
} from '@libs/persistence';
import { telemetry } from '@libs/telemetry';
import { opOf } from '../outbox-store';
import { backoffMs } from './backoff';
import { EndpointScheduler } from './endpoint-scheduler';
import { signature, WEBHOOK_HEADERS } from './signature';
import { postWebhook, type WebhookAttempt } from './webhook-sender';

/** Longest sleep between two looks at the outbox when nothing woke the worker. */
const IDLE_POLL_MS = 5000;
/** Head ops read per look at most (over all endpoints). */
const MAX_HEADS = 1024;
/** Period of the cleanup of dead senders' leases over runs with nothing pending. */
const SENDER_SWEEP_MS = 60_000;

/** Who this process is in host_processes (the ProcessRegistry; the id changes if it was declared dead). */
export interface SenderIdentity {
  readonly id: string;
}

/**
 * Pushes the outbox to agents' webhooks (issue 10). The outbox is the queue — it survives
 * restarts; this worker keeps only what is in flight. Ops of one run go one at a time in sequence
 * order (the next is sent after the previous was acknowledged or gave up); up to
 * WEBHOOK_CONCURRENCY runs are pushed at once, shared fairly between endpoints with a circuit
 * breaker each (endpoint-scheduler.ts: a dead endpoint holds at most WEBHOOK_ENDPOINT_CONCURRENCY
 * workers, then none while its breaker is open). A failed attempt is retried after an exponential
 * backoff capped at WEBHOOK_RETRY_MAX_MS; after WEBHOOK_MAX_ATTEMPTS the op — and the later ops
 * of its run, never sent ahead of it — is marked failed (admin: GET /v1/admin/deliveries/failed).
 *
 * Several processes on one database (docs/scale-out.md#webhook-outbox-lease): a run's ops are sent
 * by the process holding its lease in `delivery_senders`, claimed right before each attempt and
 * held while this process's registry row lives; every state write is fenced by it. A dead sender's
 * runs are claimed by the others from their first unsent op. `handOver()` (graceful shutdown)
 * stops sending and gives the leases back.
 */
@Injectable()
export class WebhookWorker implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Webhooks');
  private readonly scheduler: EndpointScheduler;
  private timer?: NodeJS.Timeout;
  private passing = false;
  private again = false;
  private stopped = true;
  /**
   * Runs whose attempt ended while a look at the outbox was reading: that read may predate the
   * attempt's state write (PostgreSQL reads are asynchronous), so their heads in it are stale —
   * the next look (the ending woke it) reads them again.
   */
  private endedDuringRead: Set<string> | null = null;
  /** Aborts the requests in flight at shutdown (their ops stay pending: sent again after a restart). */
  private readonly shutdown = new AbortController();
  /** Attempts in flight (claim, request, record), awaited by handOver(). */
  private readonly inflight = new Set<Promise<void>>();
  private lastSenderSweep = 0;

  constructor(
    private readonly hot: HotStore,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(ProcessRegistry) private readonly process: SenderIdentity,
  ) {
    const w = config.webhooks;
    this.scheduler = new EndpointScheduler({
      concurrency: w.concurrency,
      perEndpoint: Math.min(w.endpointConcurrency, w.concurrency),
      breakerFailures: w.breakerFailures,
      breakerOpenMs: w.breakerOpenMs,
      breakerMaxOpenMs: Math.max(w.breakerOpenMs, w.retryMaxMs),
    });
    telemetry.sample('outbox_oldest_pending_age_seconds', async () => {
      const oldest = await this.hot.read(oldestPendingWebhookUnit());
      return oldest === null ? 0 : Math.max(0, Date.now() - oldest) / 1000;
    });
  }

  async onApplicationBootstrap(): Promise<void> {
    this.stopped = false;
    if (this.config.database.type === 'sqlite') {
      // One host process per SQLite file (the file lock): leases of any other process are a killed
      // predecessor's; its runs are taken over now, not after its registry row expires.
      const me = this.process.id;
      const freed = await this.hot.write(() => releaseOtherSendersUnit(me));
      if (freed > 0) {
        this.logger.warn({ msg: `${freed} webhook lease(s) of an earlier process taken back at boot` });
      }
    }
    this.wake(); // ops left pending by an earlier process
  }

  onModuleDestroy(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.shutdown.abort();
  }

  /**
   * Graceful shutdown: stops sending (requests in flight are aborted without recording an attempt:
   * the next sender sends them again, same idempotency key), waits for the attempts to settle, and
   * hands every webhook lease of this process back, so the other processes take its runs at once
   * instead of after its registry row is gone. Returns how many leases were handed back.
   */
  async handOver(): Promise<number> {
    this.onModuleDestroy();
    await Promise.allSettled([...this.inflight]);
    const id = this.process.id;
    return this.hot.write(() => releaseSendersUnit(id));
  }

  /** New ops were committed, or an op finished: look at the outbox again now. */
  wake(): void {
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.stopped) {
      return;
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.pass(), ms);
    this.timer.unref();
  }

  /** One look at the outbox: starts the due head ops the fair scheduler admits (one per run at most). */
  private async pass(): Promise<void> {
    if (this.passing) {
      this.again = true;
      return;
    }
    this.passing = true;
    let nextIn = IDLE_POLL_MS;
    try {
      const { concurrency, endpointConcurrency } = this.config.webhooks;
      if (this.scheduler.inflight < concurrency) {
        // Per endpoint: its runs in flight (still pending) plus enough heads to fill its free slots.
        const perEndpoint = 2 * Math.min(endpointConcurrency, concurrency);
        const ended = new Set<string>();
        this.endedDuringRead = ended;
        const me = this.process.id;
        const heads = await this.hot.read(pendingHeadsUnit(perEndpoint, MAX_HEADS, me)).finally(() => {
          this.endedDuringRead = null;
        });
        const now = Date.now();
        const due: Array<OutboxRow & { endpoint: string }> = [];
        for (const op of heads) {
          if (ended.has(op.run_id)) {
            continue;
          }
          const at = op.next_attempt_at ?? op.created_at;
          if (at > now) {
            nextIn = Math.min(nextIn, at - now);
          } else {
            due.push({ ...op, endpoint: op.webhook_url ?? '' });
          }
        }
        for (const op of this.scheduler.pick(due, now)) {
          const p = this.deliver(op);
          this.inflight.add(p);
          void p.finally(() => this.inflight.delete(p));
        }
        const probe = this.scheduler.nextProbeAt(now);
        if (probe !== null) {
          nextIn = Math.min(nextIn, probe - now);
        }
      }
    } catch (e) {
      this.logger.error({ msg: `webhook outbox read failed: ${e instanceof Error ? e.message : String(e)}` });
    } finally {
      this.passing = false;
    }
    await this.sweepSenders();
    this.schedule(this.again ? 0 : nextIn);
    this.again = false;
  }

  /** Dead senders' leases over runs with nothing pending: deleted now and then (nobody would claim them). */
  private async sweepSenders(): Promise<void> {
    const now = Date.now();
    if (this.stopped || now - this.lastSenderSweep < SENDER_SWEEP_MS) {
      return;
    }
    this.lastSenderSweep = now;
    await this.hot
      .write(() => sweepSendersUnit())
      .catch((e: unknown) => this.logger.warn({ msg: `webhook lease cleanup failed: ${message(e)}` }));
  }

  /**
   * One attempt of a run's head op, its outcome recorded; then the run's next op may go. The run's
   * lease is claimed first, with its head read again in the same unit: when another live process
   * holds it, or its head is no longer the op the look saw (another sender moved on), nothing is
   * sent and the next look decides again.
   */
  private async deliver(seen: OutboxRow & { endpoint: string }): Promise<void> {
    let outcome: boolean | 'skipped' = 'skipped';
    try {
      const me = this.process.id;
      const head = await this.hot.write(() => claimSenderUnit(seen.run_id, me, Date.now()));
      if (this.stopped || !head || head.sequence !== seen.sequence || (head.next_attempt_at ?? 0) > Date.now()) {
        return;
      }
      outcome = await this.attemptAndRecord(head, me);
    } catch (e) {
      this.logger.error({ run_id: seen.run_id, msg: `webhook lease claim failed: ${message(e)}` });
    } finally {
      this.endedDuringRead?.add(seen.run_id);
      if (outcome === 'skipped') {
        this.scheduler.skipped(seen.run_id, seen.endpoint);
      } else {
        this.scheduler.finished(seen.run_id, seen.endpoint, outcome, Date.now());
      }
      this.wake();
    }
  }

  /** A state write of `op`, fenced by this process's lease of its run; false when the lease was lost. */
  private async recordFenced<T>(op: OutboxRow, me: string, write: () => Unit<T>): Promise<T | undefined> {
    const r = await this.hot.write(() => fencedSenderUnit(op.run_id, me, write));
    if (r.fenced) {
      this.logger.warn({
        run_id: op.run_id,
        delivery_id: op.delivery_id,
        sequence: op.sequence,
        msg: 'webhook lease lost (another process sends this run now): attempt not recorded; the op is sent again by the new sender',
      });
      return undefined;
    }
    return r.value;
  }

  private async attemptAndRecord(op: OutboxRow, me: string): Promise<boolean | 'skipped'> {
    const attempts = op.attempts + 1;
    const t0 = telemetry.now();
    const result = await this.attempt(op);
    if (this.stopped) {
      return 'skipped'; // cut by the shutdown, not the endpoint's answer: nothing to record
    }
    const now = Date.now();
    const log = { run_id: op.run_id, delivery_id: op.delivery_id, sequence: op.sequence, attempts };
    const outcome = result.ok ? 'delivered' : attempts >= this.config.webhooks.maxAttempts ? 'failed' : 'retry';
    telemetry.webhookAttempt(outcome, op, attempts, t0, result.status);
    try {
      if (result.ok) {
        await this.recordFenced(op, me, () => webhookDeliveredUnit(op.delivery_id, attempts, now, null));
        return true;
      }
      const { maxAttempts, retryBaseMs, retryMaxMs } = this.config.webhooks;
      const error = result.error ?? 'failed';
      if (attempts >= maxAttempts) {
        const skipped = await this.recordFenced(op, me, () => webhookFailedUnit(op, attempts, error));
        if (skipped === undefined) {
          return false;
        }
        this.logger.error({
          ...log,
          msg: `webhook op failed after ${attempts} attempts (${error}); ${skipped} later op(s) of the run not sent`,
        });
        return false;
      }
      const wait = backoffMs(attempts, retryBaseMs, retryMaxMs);
      await this.recordFenced(op, me, () => webhookRetryUnit(op.delivery_id, attempts, now + wait, error));
      this.logger.warn({ ...log, msg: `webhook attempt failed (${error}); retry in ${wait} ms` });
    } catch (e) {
      // The state write failed: the op stays pending and is tried again (same idempotency key).
      this.logger.error({ ...log, msg: `webhook state not recorded: ${message(e)}` });
    }
    return result.ok;
  }

  private async attempt(op: OutboxRow): Promise<WebhookAttempt> {
    if (!op.webhook_url) {
      return { ok: false, status: null, error: 'no webhook URL' };
    }
    const secret = op.webhook_secret_env ? this.config.secret(op.webhook_secret_env) : null;
    if (!secret) {
      return {
        ok: false,
        status: null,
        error: `webhook secret ${op.webhook_secret_env ?? '(none)'} is not set or not allowed by SECRET_ENV_ALLOWLIST`,
      };
    }
    const body = JSON.stringify({ ...opOf(op), agent_id: op.agent_id });
    const timestamp = String(Math.floor(Date.now() / 1000));
    return postWebhook(
      op.webhook_url,
      body,
      {
        [WEBHOOK_HEADERS.signature]: signature(secret, timestamp, body),
        [WEBHOOK_HEADERS.timestamp]: timestamp,
        [WEBHOOK_HEADERS.deliveryId]: op.delivery_id,
        [WEBHOOK_HEADERS.idempotencyKey]: op.idempotency_key,
        'user-agent': 'runner-host-webhook/1',
      },
      {
        timeoutMs: this.config.webhooks.timeoutMs,
        allowPrivate: this.config.webhooks.allowPrivate,
        signal: this.shutdown.signal,
      },
    );
  }
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
