import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import {
  HotStore,
  oldestPendingWebhookUnit,
  pendingHeadsUnit,
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

/**
 * Pushes the outbox to agents' webhooks (issue 10). The outbox is the queue — it survives
 * restarts; this worker keeps only what is in flight. Ops of one run go one at a time in sequence
 * order (the next is sent after the previous was acknowledged or gave up); up to
 * WEBHOOK_CONCURRENCY runs are pushed at once, shared fairly between endpoints with a circuit
 * breaker each (endpoint-scheduler.ts: a dead endpoint holds at most WEBHOOK_ENDPOINT_CONCURRENCY
 * workers, then none while its breaker is open). A failed attempt is retried after an exponential
 * backoff capped at WEBHOOK_RETRY_MAX_MS; after WEBHOOK_MAX_ATTEMPTS the op — and the later ops
 * of its run, never sent ahead of it — is marked failed (admin: GET /v1/admin/deliveries/failed).
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

  constructor(
    private readonly hot: HotStore,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
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

  onApplicationBootstrap(): void {
    this.stopped = false;
    this.wake(); // ops left pending by an earlier process
  }

  onModuleDestroy(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.shutdown.abort();
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
        const heads = await this.hot.read(pendingHeadsUnit(perEndpoint, MAX_HEADS)).finally(() => {
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
          void this.deliver(op);
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
    this.schedule(this.again ? 0 : nextIn);
    this.again = false;
  }

  /** One attempt of a run's head op, its outcome recorded; then the run's next op may go. */
  private async deliver(op: OutboxRow & { endpoint: string }): Promise<void> {
    let ok = false;
    try {
      ok = await this.attemptAndRecord(op);
    } finally {
      this.endedDuringRead?.add(op.run_id);
      this.scheduler.finished(op.run_id, op.endpoint, ok, Date.now());
      this.wake();
    }
  }

  private async attemptAndRecord(op: OutboxRow): Promise<boolean> {
    const attempts = op.attempts + 1;
    const t0 = telemetry.now();
    const result = await this.attempt(op);
    if (this.stopped) {
      return false; // cut by the shutdown, not the endpoint's answer: nothing to record
    }
    const now = Date.now();
    const log = { run_id: op.run_id, delivery_id: op.delivery_id, sequence: op.sequence, attempts };
    const outcome = result.ok ? 'delivered' : attempts >= this.config.webhooks.maxAttempts ? 'failed' : 'retry';
    telemetry.webhookAttempt(outcome, op, attempts, t0, result.status);
    try {
      if (result.ok) {
        await this.hot.write(() => webhookDeliveredUnit(op.delivery_id, attempts, now, null));
        return true;
      }
      const { maxAttempts, retryBaseMs, retryMaxMs } = this.config.webhooks;
      const error = result.error ?? 'failed';
      if (attempts >= maxAttempts) {
        const skipped = await this.hot.write(() => webhookFailedUnit(op, attempts, error));
        this.logger.error({
          ...log,
          msg: `webhook op failed after ${attempts} attempts (${error}); ${skipped} later op(s) of the run not sent`,
        });
        return false;
      }
      const wait = backoffMs(attempts, retryBaseMs, retryMaxMs);
      await this.hot.write(() => webhookRetryUnit(op.delivery_id, attempts, now + wait, error));
      this.logger.warn({ ...log, msg: `webhook attempt failed (${error}); retry in ${wait} ms` });
    } catch (e) {
      // The state write failed: the op stays pending and is tried again (same idempotency key).
      this.logger.error({ ...log, msg: `webhook state not recorded: ${e instanceof Error ? e.message : String(e)}` });
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
