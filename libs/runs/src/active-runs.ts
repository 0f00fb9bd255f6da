import { Injectable } from '@nestjs/common';
import type { AuthorizationSnapshot } from '@libs/authz';
import type { RunnerSession } from '@libs/runner-gateway';
import { ActiveRun } from './active-run';
import { telemetry } from '@libs/telemetry';

/** The runs active in this process, by id. */
@Injectable()
export class ActiveRuns {
  private readonly runs = new Map<string, ActiveRun>();

  constructor() {
    telemetry.sample('active_runs', () => this.runs.size);
  }

  add(run_id: string, agent_id: string, session: RunnerSession, snapshot: AuthorizationSnapshot): ActiveRun {
    const run = new ActiveRun(run_id, agent_id, session, snapshot);
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
