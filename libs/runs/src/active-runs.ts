import { Injectable } from '@nestjs/common';
import { TokenBucket, type AuthorizationSnapshot } from '@libs/authz';
import type { RunnerSession } from '@libs/runner-gateway';

/** What the host keeps in memory about a run while it is active in this process. */
export interface ActiveRun {
  run_id: string;
  runner_id: string;
  agent_id: string;
  started_at: number;
  session: RunnerSession;
  /** Aborted when the run ends or a cancel is requested: in-flight resource calls stop. */
  abort: AbortController;
  /** The frozen grants every host API call of this run is checked against. */
  snapshot: AuthorizationSnapshot;
  /** Per-run host API rate limit. */
  bucket: TokenBucket;
  /** The assistant transcript row: written once; streamed text kept for runs that only stream. */
  assistant: { written: boolean; streamed: string };
  /** Highest sequence accepted so far. */
  last_sequence: number;
  seen: Set<number>;
  /** Set as soon as a terminal result is accepted or the host decides the outcome. */
  ended: boolean;
  cancel_requested: boolean;
  deadline_timer?: NodeJS.Timeout;
  grace_timer?: NodeJS.Timeout;
  /** Serialises the handling of this run's results. */
  chain: Promise<void>;
  /** Resolved once the run is finalised. */
  finished: Promise<void>;
  markFinished: () => void;
}

@Injectable()
export class ActiveRuns {
  private readonly runs = new Map<string, ActiveRun>();

  add(run_id: string, agent_id: string, session: RunnerSession, snapshot: AuthorizationSnapshot): ActiveRun {
    let markFinished = () => {};
    const finished = new Promise<void>((resolve) => (markFinished = resolve));
    const run: ActiveRun = {
      run_id,
      runner_id: snapshot.scope.runner_id,
      agent_id,
      started_at: Date.now(),
      session,
      abort: new AbortController(),
      snapshot,
      bucket: new TokenBucket(snapshot.limits.calls_per_second, snapshot.limits.burst),
      assistant: { written: false, streamed: '' },
      last_sequence: 0,
      seen: new Set(),
      ended: false,
      cancel_requested: false,
      chain: Promise.resolve(),
      finished,
      markFinished,
    };
    this.runs.set(run_id, run);
    return run;
  }

  get(runId: string): ActiveRun | undefined {
    return this.runs.get(runId);
  }

  remove(runId: string): void {
    this.runs.delete(runId);
  }

  onSession(sessionId: string): ActiveRun[] {
    return [...this.runs.values()].filter((r) => r.session.session_id === sessionId);
  }

  all(): ActiveRun[] {
    return [...this.runs.values()];
  }
}
