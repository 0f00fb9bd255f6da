import type { AuthorizationSnapshot } from '@libs/authz';

/** A run's host API call budget (its token bucket: `calls_per_second`, `burst`). */
export interface CallBudget {
  /** Takes a call now; false when the budget is spent (the call is refused `rate_limited`). */
  take(): boolean;
  /** Takes or reserves the next call: how many ms the caller waits first (0: at once). */
  reserve(): number;
}

/**
 * What the host API may know of an active run (docs/architecture.md#the-life-of-a-run): who may
 * call for it, what it is granted, and whether it still runs. Read-only: the run's transitions
 * belong to its lifecycle, never to a host API call.
 */
export interface RunGrant {
  readonly run_id: string;
  /** The caller identity: the plugin whose session runs it (a call of any other plugin is refused). */
  readonly plugin_id: string;
  readonly runner_id: string;
  /** The run's workspace (null: the default one), for quotas. */
  readonly workspace_id: string | null;
  /** The frozen grants every call is checked against. */
  readonly snapshot: AuthorizationSnapshot;
  /** Aborted when the run ends or its cancel is requested: in-flight resource calls stop. */
  readonly signal: AbortSignal;
  readonly budget: CallBudget;
  /** When the run started (epoch ms). */
  readonly started_at: number;
  /** False once the run's end is decided: no call is served for it any more. */
  readonly active: boolean;
  readonly cancel_requested: boolean;
}

/** The host API's one way to a run (docs/scale-out.md#host-api-anywhere). */
export abstract class RunGrants {
  /** The grant of a run active in this process (its owner); undefined when it is not here. */
  abstract grant(runId: string): RunGrant | undefined;
  /**
   * The grant of a run wherever it runs: this process's own, else built from the database for a
   * run another process owns (a runner's unary calls may reach any process); undefined when the
   * run is unknown or not running.
   */
  abstract find(runId: string): Promise<RunGrant | undefined>;
}
