import { Injectable } from '@nestjs/common';
import type { OutboxRow } from '@libs/persistence';
import { DomainError, MAX_ROW_ID, parseRowCursor, readPage } from '@libs/protocol';
import { OutboxStore } from './outbox-store';
import { WebhookWorker } from './webhook/webhook-worker';

/** The admin listing of one run's ops is bounded (a run streaming edits may have thousands). */
const RUN_OPS_LIMIT = 10_000;

export interface OutboxPage {
  items: OutboxRow[];
  next_cursor: string | null;
}

/**
 * What the admin API reads of the outbox — failed webhook pushes, paged, and one run's ops with their
 * push state — and its one write: a retry of a run's failed pushes.
 */
@Injectable()
export class DeliveryAdminService {
  constructor(
    private readonly outbox: OutboxStore,
    private readonly webhooks: WebhookWorker,
  ) {}

  /** Ops whose webhook push failed, newest first; `cursor` is the `next_cursor` of the previous page. */
  async failed(cursor: string | undefined, limit: number): Promise<OutboxPage> {
    // Outbox ids are INTEGER (SERIAL on PostgreSQL): the first page of a newest-first listing starts above the largest.
    const before = parseRowCursor(cursor) ?? MAX_ROW_ID;
    const { rows, next_cursor } = await readPage(
      limit,
      (n) => this.outbox.failedPage(before, n),
      (r) => r.id,
    );
    return { items: rows, next_cursor };
  }

  /**
   * Sends a run's failed webhook ops again, in order, each with a fresh attempt budget (the run's
   * webhook URL and secret are those frozen at its start). `409` when the run has none failed.
   */
  async retry(runId: string): Promise<number> {
    const retried = await this.outbox.retryFailed(runId);
    if (retried === 0) {
      throw new DomainError('conflict', `run_id: run ${runId} has no failed webhook ops to retry`, {
        field: 'run_id',
      });
    }
    this.webhooks.wake();
    return retried;
  }

  ofRun(runId: string): Promise<OutboxRow[]> {
    return this.outbox.ofRun(runId, RUN_OPS_LIMIT);
  }
}
