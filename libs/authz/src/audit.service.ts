import { Injectable } from '@nestjs/common';
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
  constructor(private readonly stores: StoresRepository) {}

  /**
   * `lease`: the row records a write call made for a leased run, and lands only while the run
   * still runs under it (FencedError otherwise: docs/scale-out.md#fenced-host-api-writes).
   */
  async record(entry: AuditRecord, lease: RunLease | null = null): Promise<void> {
    await this.stores.appendAudit({ ...entry, created_at: Date.now() }, lease);
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
