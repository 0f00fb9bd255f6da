import { Injectable, Logger } from '@nestjs/common';
import { readPage } from '@libs/protocol';
import { StoresRepository, type RunLease } from '@libs/persistence';

export interface AuditRecord {
  run_id: string;
  runner_id: string | null;
  plugin_id: string | null;
  action: string;
  resource: string | null;
  scope: string | null;
  outcome: 'allowed' | 'denied' | 'failed';
  error_code: string | null;
  duration_us: number;
}

export interface AuditView extends Omit<AuditRecord, never> {
  id: number;
  created_at: string;
}

/** The per-run audit log of host API calls. Entries carry names and ids only, never payloads. */
@Injectable()
export class AuditService {
  private readonly logger = new Logger('Audit');

  constructor(private readonly stores: StoresRepository) {}

  /**
   * Resolves once the row is committed. `lease`: the row records a write call made for a leased run, and lands only while the run
   * still runs under it (FencedError otherwise: docs/scale-out.md#fenced-host-api-writes).
   */
  async record(entry: AuditRecord, lease: RunLease | null = null): Promise<void> {
    await this.stores.appendAudit({ ...entry, created_at: Date.now() }, lease);
  }

  /**
   * The row of an answered read call, written behind its answer (docs/durability.md#audit-rows-of-read-calls):
   * queued now, in call order, and committed with the writer's next group commit (the next turn
   * of the event loop). Returns null when the caller may answer at once, or the commit to wait
   * for when the rows queued this way and not yet committed reached their bound (MAX_DEFERRED).
   * A row that fails to commit after its call was answered is logged.
   */
  recordAfterAnswer(entry: AuditRecord): Promise<void> | null {
    const { committed, wait } = this.stores.appendAuditDeferred({ ...entry, created_at: Date.now() });
    if (wait) {
      return committed;
    }
    committed.catch((err: unknown) =>
      this.logger.error({ run_id: entry.run_id, msg: `audit write failed: ${String(err)}` }),
    );
    return null;
  }

  async list(
    runId: string,
    afterId: number,
    limit: number,
  ): Promise<{ items: AuditView[]; next_cursor: string | null }> {
    const { rows, next_cursor } = await readPage(
      limit,
      (n) => this.stores.auditOf(runId, afterId, n),
      (r) => r.id,
    );
    const items = rows.map((r) => ({
      id: r.id,
      run_id: r.run_id,
      runner_id: r.runner_id,
      plugin_id: r.plugin_id,
      action: r.action,
      resource: r.resource,
      scope: r.scope,
      outcome: r.outcome,
      error_code: r.error_code,
      duration_us: r.duration_us,
      created_at: new Date(r.created_at).toISOString(),
    }));
    return { items, next_cursor };
  }
}
