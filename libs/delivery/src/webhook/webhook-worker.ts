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
import { signature, WEBHOOK_HEADERS } from './signature';
import { postWebhook, type WebhookAttempt } from './webhook-sender';

/** Longest sleep between two looks at the outbox when nothing woke the worker. */
const IDLE_POLL_MS = 5000;

/**
 * Pushes the outbox to agents' webhooks (issue 10). The outbox is the queue — it survives
 * restarts; this worker keeps only what is in flight. Ops of one run go one at a time in sequence
 * order (the next is sent after the previous was acknowledged or gave up); up to
 * WEBHOOK_CONCURRENCY runs are pushed at once. A failed attempt is retried after an exponential
 * backoff capped at WEBHOOK_RETRY_MAX_MS; after WEBHOOK_MAX_ATTEMPTS the op — and the later ops
 * of its run, never sent ahead of it — is marked failed (admin: GET /v1/admin/deliveries/failed).
 */
@Injectable()
export class WebhookWorker implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Webhooks');
  private readonly inflight = new Set<string>();
  private timer?: NodeJS.Timeout;
  private passing = false;
  private again = false;
  private stopped = true;

  constructor(
    private readonly hot: HotStore,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
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

  /** One look at the outbox: starts every due head op of a run not already in flight. */
  private async pass(): Promise<void> {
    if (this.passing) {
      this.again = true;
      return;
    }
    this.passing = true;
    let nextIn = IDLE_POLL_MS;
    try {
      const { concurrency } = this.config.webhooks;
      const heads = await this.hot.read(pendingHeadsUnit(concurrency * 4 + this.inflight.size));
      const now = Date.now();
      for (const op of heads) {
        if (this.inflight.has(op.run_id)) {
          continue;
        }
        const due = op.next_attempt_at ?? op.created_at;
        if (due > now) {
          nextIn = Math.min(nextIn, due - now);
          continue;
        }
        if (this.inflight.size >= concurrency) {
          break; // a finishing op wakes the worker
        }
        this.inflight.add(op.run_id);
        void this.deliver(op).finally(() => {
          this.inflight.delete(op.run_id);
          this.wake();
        });
      }
    } catch (e) {
      this.logger.error({ msg: `webhook outbox read failed: ${e instanceof Error ? e.message : String(e)}` });
    } finally {
      this.passing = false;
    }
    this.schedule(this.again ? 0 : nextIn);
    this.again = false;
  }

  private async deliver(op: OutboxRow): Promise<void> {
    const attempts = op.attempts + 1;
    const t0 = telemetry.now();
    const result = await this.attempt(op);
    const now = Date.now();
    const log = { run_id: op.run_id, delivery_id: op.delivery_id, sequence: op.sequence, attempts };
    const outcome = result.ok ? 'delivered' : attempts >= this.config.webhooks.maxAttempts ? 'failed' : 'retry';
    telemetry.webhookAttempt(outcome, op, attempts, t0, result.status);
    try {
      if (result.ok) {
        await this.hot.write(() => webhookDeliveredUnit(op.delivery_id, attempts, now, null));
        return;
      }
      const { maxAttempts, retryBaseMs, retryMaxMs } = this.config.webhooks;
      const error = result.error ?? 'failed';
      if (attempts >= maxAttempts) {
        const skipped = await this.hot.write(() => webhookFailedUnit(op, attempts, error));
        this.logger.error({
          ...log,
          msg: `webhook op failed after ${attempts} attempts (${error}); ${skipped} later op(s) of the run not sent`,
        });
        return;
      }
      const wait = backoffMs(attempts, retryBaseMs, retryMaxMs);
      await this.hot.write(() => webhookRetryUnit(op.delivery_id, attempts, now + wait, error));
      this.logger.warn({ ...log, msg: `webhook attempt failed (${error}); retry in ${wait} ms` });
    } catch (e) {
      // The state write failed: the op stays pending and is tried again (same idempotency key).
      this.logger.error({ ...log, msg: `webhook state not recorded: ${e instanceof Error ? e.message : String(e)}` });
    }
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
      { timeoutMs: this.config.webhooks.timeoutMs, allowPrivate: this.config.webhooks.allowPrivate },
    );
  }
}
