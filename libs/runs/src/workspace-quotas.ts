import { Injectable } from '@nestjs/common';
import { TokenBucket, WorkspacesService, type WorkspaceQuotas } from '@libs/authz';
import { WorkspacesRepository, type ActiveQuota } from '@libs/persistence';
import { DomainError } from '@libs/protocol';

const DAY_MS = 86_400_000;

/** How long the counted quotas (steering queue, storage, tokens) are read from the database at most. */
const COUNT_TTL_MS = 1000;

/** 429 naming the quota, with when to try again (docs/tenancy.md#quotas). */
export function quotaExceeded(workspace: string, quota: keyof WorkspaceQuotas, limit: number, retryAfterMs: number) {
  return new DomainError(
    'rate_limited',
    `workspace ${workspace}: quota ${quota} (${limit}) reached; retry after ${Math.ceil(retryAfterMs / 1000)} s`,
    { workspace_id: workspace, quota, limit, retry_after_ms: retryAfterMs },
    true,
  );
}

/**
 * Per-workspace quotas (docs/tenancy.md#quotas), checked at the edge of admission and in the host
 * API. The rate is a token bucket; active runs are counted over the database by the admission
 * unit (every process's, race-free: activeQuota); the counted quotas
 * (steering queue, storage bytes, tokens per day) read the database at most once a second per
 * workspace, and only when the quota is set: a workspace without quotas costs a map lookup.
 */
@Injectable()
export class WorkspaceQuotaGate {
  private readonly buckets = new Map<string, TokenBucket>();
  private readonly counts = new Map<string, { at: number; value: Promise<Counts> }>();

  constructor(
    private readonly workspaces: WorkspacesService,
    private readonly repo: WorkspacesRepository,
  ) {
    workspaces.onChange((id) => {
      this.buckets.delete(id);
      this.counts.delete(id);
    });
  }

  /** Admission: runs per second (throws 429); the active runs are the admission unit's (activeQuota). */
  admit(workspace: string, now = Date.now()): void {
    const q = this.workspaces.quotas(workspace);
    if (q.runs_per_second !== undefined) {
      const bucket = this.bucket(workspace, q.runs_per_second, q.runs_burst ?? q.runs_per_second);
      if (!bucket.take(now)) {
        throw quotaExceeded(workspace, 'runs_per_second', q.runs_per_second, Math.ceil(1000 / q.runs_per_second));
      }
    }
  }

  /**
   * The workspace's `max_active_runs` for the admission unit, which counts the running runs of
   * every process over the database under the workspace's lock (admission-unit.ts); null: none.
   */
  activeQuota(workspace: string): ActiveQuota | null {
    const max = this.workspaces.quotas(workspace).max_active_runs;
    return max === undefined ? null : { workspace_id: workspace, max };
  }

  /** Admission of a conversation's event: the steering queue (throws 429). */
  async admitFollowUp(workspace: string): Promise<void> {
    const q = this.workspaces.quotas(workspace);
    if (q.max_steering_queue !== undefined && (await this.count(workspace)).queued >= q.max_steering_queue) {
      throw quotaExceeded(workspace, 'max_steering_queue', q.max_steering_queue, 1000);
    }
  }

  /** A storage write of `bytes` more (throws 429). */
  async storage(workspace: string, bytes: number): Promise<void> {
    const q = this.workspaces.quotas(workspace);
    if (
      q.max_storage_bytes !== undefined &&
      (await this.count(workspace, true)).storage + bytes > q.max_storage_bytes
    ) {
      throw quotaExceeded(workspace, 'max_storage_bytes', q.max_storage_bytes, 60_000);
    }
  }

  /** A model call (throws 429 once the day's tokens are spent). */
  async modelCall(workspace: string, now = Date.now()): Promise<void> {
    const q = this.workspaces.quotas(workspace);
    if (
      q.max_model_tokens_per_day !== undefined &&
      (await this.count(workspace)).tokens >= q.max_model_tokens_per_day
    ) {
      throw quotaExceeded(workspace, 'max_model_tokens_per_day', q.max_model_tokens_per_day, DAY_MS - (now % DAY_MS));
    }
  }

  /** Tokens left in the admission bucket (null: no rate quota). */
  runsLeft(workspace: string): number | null {
    const q = this.workspaces.quotas(workspace);
    return q.runs_per_second === undefined
      ? null
      : this.bucket(workspace, q.runs_per_second, q.runs_burst ?? q.runs_per_second).available();
  }

  private bucket(workspace: string, rate: number, burst: number): TokenBucket {
    let b = this.buckets.get(workspace);
    if (!b) {
      b = new TokenBucket(rate, burst);
      this.buckets.set(workspace, b);
    }
    return b;
  }

  private count(workspace: string, fresh = false): Promise<Counts> {
    const now = Date.now();
    const hit = this.counts.get(workspace);
    if (hit && !fresh && now - hit.at < COUNT_TTL_MS) {
      return hit.value;
    }
    const value = this.repo.usage(workspace, now - (now % DAY_MS)).then((u) => ({
      queued: u.queued_steering_items,
      storage: u.storage_bytes,
      tokens: u.model_tokens_today,
    }));
    this.counts.set(workspace, { at: now, value });
    value.catch(() => this.counts.delete(workspace));
    return value;
  }
}

interface Counts {
  queued: number;
  storage: number;
  tokens: number;
}
