import { Injectable } from '@nestjs/common';
import { snapshotHash, TokenBucket, type AuthorizationSnapshot } from '@libs/authz';
import { RunsRepository } from '@libs/persistence';
import { ActiveRuns } from './active-runs';
import { RunGrants, type RunGrant } from './run-grant';

/** Most runs owned elsewhere whose grants this process keeps (least recently called dropped first). */
export const MAX_REMOTE_GRANTS = 1024;

/** What a process keeps of a run another process owns: all of it frozen at admission. */
interface RemoteEntry {
  readonly base: Omit<RunGrant, 'active' | 'cancel_requested' | 'started_at' | 'lease'>;
  readonly abort: AbortController;
}

/**
 * The host API's grants at any process (docs/scale-out.md#host-api-anywhere). A run this process
 * owns answers from its `ActiveRun` (unchanged). A run owned by another process is read from the
 * database: its row must be `running` — re-read on every call (one primary-key read), so a call
 * after the run's end committed is refused exactly as at the owner — and its snapshot, read once
 * by the run and verified against the stored hash, is kept in a bounded cache: it is frozen at
 * admission, so a cached snapshot is never stale. The per-run rate bucket of a run owned
 * elsewhere is this process's own (the limit holds per process: docs/scale-out.md).
 */
@Injectable()
export class StoredRunGrants extends RunGrants {
  private readonly remote = new Map<string, RemoteEntry>();
  private readonly loading = new Map<string, Promise<RemoteEntry | null>>();

  constructor(
    private readonly active: ActiveRuns,
    private readonly runs: RunsRepository,
  ) {
    super();
  }

  grant(runId: string): RunGrant | undefined {
    return this.active.grant(runId);
  }

  async find(runId: string): Promise<RunGrant | undefined> {
    const local = this.active.grant(runId);
    if (local) {
      return local;
    }
    const live = await this.runs.liveness(runId);
    if (live?.status !== 'running') {
      this.forget(runId);
      // It may have become this process's meanwhile (a start between the two reads).
      return this.active.grant(runId);
    }
    const entry = await this.entry(runId);
    if (!entry) {
      return undefined;
    }
    return Object.freeze({
      ...entry.base,
      // Read with the status on every call: this call's writes land only while the run still
      // runs under it (docs/scale-out.md#fenced-host-api-writes).
      lease: live.lease,
      started_at: live.started_at,
      active: true,
      cancel_requested: live.cancel_requested,
    });
  }

  /** How many grants of runs owned elsewhere are kept (bounded by MAX_REMOTE_GRANTS). */
  get cached(): number {
    return this.remote.size;
  }

  private async entry(runId: string): Promise<RemoteEntry | null> {
    const hit = this.remote.get(runId);
    if (hit) {
      // Least recently called last: the first key is the one dropped when the cache is full.
      this.remote.delete(runId);
      this.remote.set(runId, hit);
      return hit;
    }
    let pending = this.loading.get(runId);
    if (!pending) {
      pending = this.load(runId).finally(() => this.loading.delete(runId));
      this.loading.set(runId, pending);
    }
    return pending;
  }

  private async load(runId: string): Promise<RemoteEntry | null> {
    const stored = await this.runs.authorization(runId);
    const snapshot = stored?.authorization as AuthorizationSnapshot | null | undefined;
    // A snapshot that is missing or does not match its stored hash grants nothing.
    if (!stored || !snapshot || snapshot.run_id !== runId || snapshotHash(snapshot) !== stored.authorization_hash) {
      return null;
    }
    const bucket = new TokenBucket(snapshot.limits.calls_per_second, snapshot.limits.burst);
    const abort = new AbortController();
    const entry: RemoteEntry = {
      abort,
      base: {
        run_id: runId,
        plugin_id: snapshot.scope.plugin_id,
        runner_id: snapshot.scope.runner_id,
        workspace_id: snapshot.scope.workspace_id,
        snapshot,
        signal: abort.signal,
        budget: { take: () => bucket.take(), reserve: () => bucket.reserve() },
      },
    };
    this.remote.set(runId, entry);
    while (this.remote.size > MAX_REMOTE_GRANTS) {
      const oldest = this.remote.keys().next().value as string;
      this.forget(oldest);
    }
    return entry;
  }

  /** Drops a run's grant; its in-flight calls here are aborted (the run ended, or it is evicted). */
  private forget(runId: string): void {
    const entry = this.remote.get(runId);
    if (entry) {
      this.remote.delete(runId);
      entry.abort.abort(new Error(`run ${runId} is not running`));
    }
  }
}
