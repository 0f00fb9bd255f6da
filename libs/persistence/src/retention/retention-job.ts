import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { HotStore } from '../hot/hot-store';
import { retentionBatchUnit, type RetentionTable } from './retention-units';

/** Batches one pass deletes per table at most; the rest waits for the next pass. */
const MAX_BATCHES_PER_PASS = 200;

export type RetentionCounts = Record<RetentionTable, number>;

/**
 * The periodic retention job (docs/durability.md, "Retention"): every RETENTION_INTERVAL_MS it
 * deletes settled delivery ops older than RETENTION_DELIVERED_OPS_HOURS and, when
 * RETENTION_RUN_DATA_DAYS is set, results and event-log rows older than that — in batches of
 * RETENTION_BATCH_SIZE rows, each its own short transaction on the one writer, yielding to the
 * event loop between batches, so run-path writes interleave with it. Only rows of runs that have
 * ended are deleted; pending and failed webhook ops are never deleted.
 */
@Injectable()
export class RetentionJob implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Retention');
  private timer?: NodeJS.Timeout;
  private running: Promise<RetentionCounts> | null = null;
  private stopped = false;

  constructor(
    private readonly hot: HotStore,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    const { deliveredOpsMs, runDataMs, intervalMs } = this.config.retention;
    if (deliveredOpsMs === 0 && runDataMs === 0) {
      return; // everything is kept
    }
    this.timer = setInterval(() => void this.runOnce().catch(() => undefined), intervalMs);
    this.timer.unref();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }

  /** One pass over every table with a retention (one at a time: a pass still going is joined). */
  runOnce(now = Date.now()): Promise<RetentionCounts> {
    this.running ??= this.pass(now).finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async pass(now: number): Promise<RetentionCounts> {
    const { deliveredOpsMs, runDataMs } = this.config.retention;
    const counts: RetentionCounts = { delivered_ops: 0, results: 0, event_log: 0 };
    const plan: Array<[RetentionTable, number]> = [];
    if (deliveredOpsMs > 0) {
      plan.push(['delivered_ops', now - deliveredOpsMs]);
    }
    if (runDataMs > 0) {
      plan.push(['results', now - runDataMs], ['event_log', now - runDataMs]);
    }
    try {
      for (const [table, cutoff] of plan) {
        counts[table] = await this.deleteOlder(table, cutoff);
      }
    } catch (e) {
      this.logger.error({ msg: `retention pass failed: ${e instanceof Error ? e.message : String(e)}`, ...counts });
      throw e;
    }
    if (counts.delivered_ops + counts.results + counts.event_log > 0) {
      this.logger.log({ msg: 'retention pass deleted old rows', ...counts });
    }
    return counts;
  }

  private async deleteOlder(table: RetentionTable, cutoff: number): Promise<number> {
    const { batchSize } = this.config.retention;
    let total = 0;
    for (let i = 0; i < MAX_BATCHES_PER_PASS && !this.stopped; i++) {
      const deleted = await this.hot.write(() => retentionBatchUnit(table, cutoff, batchSize));
      total += deleted;
      if (deleted < batchSize) {
        break;
      }
      await new Promise((resolve) => setImmediate(resolve)); // let the run path's writes in
    }
    return total;
  }
}
