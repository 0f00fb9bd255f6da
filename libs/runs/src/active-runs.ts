import { Injectable } from '@nestjs/common';
import { conversationKey } from '@libs/persistence';
import { ReleasingMap } from '@libs/streams';
import type { ActiveRun } from './active-run';
import type { RunGrant } from './run-grant';
import { telemetry } from '@libs/telemetry';

function keyOf(run: ActiveRun): string | null {
  const s = run.snapshot.scope;
  return s.conversation_id === null
    ? null
    : conversationKey(s.agent_id, s.workspace_id, s.conversation_id, s.thread_id);
}

/**
 * The runs active in this process, by id (and by conversation). Runs are added and removed by
 * their lifecycle only; the host API looks them up as grants (`RunGrants`: StoredRunGrants).
 */
@Injectable()
export class ActiveRuns {
  // ReleasingMaps: an ended run is not kept for the young-generation GC (libs/streams releasing-map.ts).
  private readonly runs = new ReleasingMap<string, ActiveRun>();
  /** The active run of each conversation (at most one runs at a time), by conversation key. */
  private readonly byConversation = new ReleasingMap<string, ActiveRun>();

  constructor() {
    telemetry.sample('active_runs', () => this.runs.size);
  }

  add(run: ActiveRun): ActiveRun {
    this.runs.set(run.run_id, run);
    const key = keyOf(run);
    if (key !== null) {
      this.byConversation.set(key, run);
    }
    return run;
  }

  /** The conversation's run active here that can take steering now; null when none. */
  steerableIn(conversationKey: string): string | null {
    const run = this.byConversation.get(conversationKey);
    return run && !run.ended && run.snapshot.available_apis.steering_pull ? run.run_id : null;
  }

  /** Whether the conversation has a run active here that has not ended. */
  inConversation(conversationKey: string): boolean {
    const run = this.byConversation.get(conversationKey);
    return run !== undefined && !run.ended;
  }

  /** Every run active here (a copy). */
  all(): ActiveRun[] {
    return [...this.runs.values()];
  }

  get(runId: string): ActiveRun | undefined {
    return this.runs.get(runId);
  }

  grant(runId: string): RunGrant | undefined {
    return this.runs.get(runId)?.grant;
  }

  remove(runId: string): void {
    const run = this.runs.get(runId);
    this.runs.delete(runId);
    const key = run ? keyOf(run) : null;
    if (key !== null && this.byConversation.get(key) === run) {
      this.byConversation.delete(key);
    }
  }

  onSession(sessionId: string): ActiveRun[] {
    return [...this.runs.values()].filter((r) => r.session.session_id === sessionId);
  }
}
