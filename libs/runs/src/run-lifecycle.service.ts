import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import type { AuthorizationSnapshot } from '@libs/authz';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { RunsRepository, type JsonObject } from '@libs/persistence';
import type { RunStatus } from '@libs/protocol';
import type { RunnerSession } from '@libs/runner-gateway';
import { ActiveRuns, type ActiveRun } from './active-runs';
import { ResultEffectsService } from './result-effects.service';
import { RunStreamBus, type ResultView } from './run-stream.bus';

/** The host's own verdicts on a run, each written as a final `run.failed` result. */
export interface HostVerdict {
  status: Extract<RunStatus, 'failed' | 'cancelled' | 'timeout' | 'interrupted'>;
  code: string;
  error: string;
  retryable: boolean;
}

const MAX_TIMER_MS = 2_147_483_647;

function resultRow(r: ResultView) {
  return { ...r, data: r.data as JsonObject, usage: r.usage as JsonObject | null, created_at: Date.now() };
}

interface Outcome {
  status: RunStatus;
  status_reason: string | null;
  error_code: string | null;
  retryable: boolean | null;
  usage: Record<string, unknown> | null;
}

/** Run state transitions: start, results persisted, deadline, cancel, disconnect, finalisation, recovery. */
@Injectable()
export class RunLifecycleService implements OnApplicationBootstrap {
  private readonly logger = new Logger('RunLifecycle');

  constructor(
    private readonly runs: RunsRepository,
    private readonly active: ActiveRuns,
    private readonly bus: RunStreamBus,
    private readonly effects: ResultEffectsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** SPEC §8: runs a previous process left active are finalised `interrupted`. */
  async onApplicationBootstrap(): Promise<void> {
    for (const row of await this.runs.listActive()) {
      const sequence = (await this.runs.lastSequence(row.run_id)) + 1;
      const verdict: HostVerdict = {
        status: 'interrupted',
        code: 'host.interrupted',
        error: 'the host stopped while the run was active',
        retryable: true,
      };
      await this.runs.finish(resultRow(this.verdictResult(row.run_id, sequence, verdict)), {
        ...this.finalOf(verdict),
        usage: null,
        finished_at: Date.now(),
      });
      this.logger.warn({ run_id: row.run_id, msg: 'run interrupted by a host restart' });
    }
  }

  /** Registers a dispatched run and arms its deadline. */
  start(
    run_id: string,
    agent: { agent_id: string },
    session: RunnerSession,
    snapshot: AuthorizationSnapshot,
  ): ActiveRun {
    const run = this.active.add(run_id, agent.agent_id, session, snapshot);
    this.bus.open(run_id);
    if (snapshot.deadline_at_ms !== null) {
      this.armDeadline(run, snapshot.deadline_at_ms);
    }
    return run;
  }

  enqueue(run: ActiveRun, step: () => Promise<void>): void {
    run.chain = run.chain.then(step).catch((e: unknown) => {
      this.logger.error({ run_id: run.run_id, msg: `run step failed: ${e instanceof Error ? e.stack : String(e)}` });
    });
  }

  /** Persists a non-terminal result, applies what it implies (state, transcript), then shows it to live readers. */
  async persist(run: ActiveRun, row: ResultView): Promise<void> {
    await this.runs.insertResult(resultRow(row));
    await this.effects.apply(run, row);
    this.bus.publish(row);
  }

  /** The runner's terminal result decides the outcome, except that a cancelled run stays cancelled. */
  async finishFromRunner(run: ActiveRun, row: ResultView): Promise<void> {
    const data = row.data;
    if (row.type === 'run.completed') {
      const reason = typeof data.finish_reason === 'string' ? data.finish_reason : 'stop';
      return this.finish(run, row, {
        status: 'completed',
        status_reason: reason,
        error_code: null,
        retryable: null,
        usage: row.usage,
      });
    }
    const cancelled = run.cancel_requested || data.code === 'cancelled';
    await this.finish(run, row, {
      status: cancelled ? 'cancelled' : 'failed',
      status_reason: typeof data.error === 'string' ? data.error : null,
      error_code: typeof data.code === 'string' ? data.code : 'runner.error',
      retryable: cancelled ? false : Boolean(data.retryable),
      usage: row.usage,
    });
  }

  /** Ends an active run with the host's verdict: a final run.failed result, then the status. */
  conclude(run: ActiveRun, verdict: HostVerdict): void {
    if (run.ended) {
      return;
    }
    run.ended = true;
    this.enqueue(run, () =>
      this.finish(run, this.verdictResult(run.run_id, run.last_sequence + 1, verdict), this.finalOf(verdict)),
    );
  }

  onDisconnected(session: RunnerSession, reason: string): void {
    for (const run of this.active.onSession(session.session_id)) {
      this.logger.warn({ run_id: run.run_id, msg: `runner disconnected mid-run: ${reason}` });
      this.conclude(
        run,
        run.cancel_requested
          ? {
              status: 'cancelled',
              code: 'cancelled',
              error: `cancelled; the runner disconnected (${reason})`,
              retryable: false,
            }
          : { status: 'failed', code: 'runner.disconnected', error: `runner disconnected: ${reason}`, retryable: true },
      );
    }
  }

  /**
   * Sends a cancel to the runner, waits up to the grace period for its `run.failed {code:
   * cancelled}`, then finalises `cancelled` regardless.
   */
  async cancel(run: ActiveRun, reason: string): Promise<void> {
    if (!run.cancel_requested) {
      run.cancel_requested = true;
      run.abort.abort();
      await this.runs.markCancelRequested(run.run_id, Date.now());
      run.session.send({ cancel: { run_id: run.run_id, reason } });
      this.logger.log({ run_id: run.run_id, msg: `cancel sent to the runner: ${reason}` });
      run.grace_timer = setTimeout(() => {
        this.conclude(run, {
          status: 'cancelled',
          code: 'cancelled',
          error: `cancelled (${reason}); the runner did not confirm within ${this.config.runs.cancelGraceMs} ms`,
          retryable: false,
        });
      }, this.config.runs.cancelGraceMs);
    }
    await run.finished;
  }

  private armDeadline(run: ActiveRun, deadlineAtMs: number): void {
    const remaining = deadlineAtMs - Date.now();
    if (remaining > MAX_TIMER_MS) {
      run.deadline_timer = setTimeout(() => this.armDeadline(run, deadlineAtMs), MAX_TIMER_MS);
      return;
    }
    run.deadline_timer = setTimeout(
      () => {
        if (run.ended) {
          return;
        }
        run.session.send({ cancel: { run_id: run.run_id, reason: 'deadline exceeded' } });
        this.logger.warn({ run_id: run.run_id, msg: 'run deadline exceeded' });
        this.conclude(run, {
          status: 'timeout',
          code: 'runner.timeout',
          error: 'the run exceeded its deadline',
          retryable: true,
        });
      },
      Math.max(0, remaining),
    );
  }

  /**
   * Writes the terminal result and the run's final status in one transaction, then shows the
   * result to live readers: whoever sees the terminal result also reads the final status.
   */
  private async finish(run: ActiveRun, terminal: ResultView, final: Outcome): Promise<void> {
    clearTimeout(run.deadline_timer);
    clearTimeout(run.grace_timer);
    run.ended = true;
    run.abort.abort();
    try {
      await this.runs.finish(resultRow(terminal), {
        ...final,
        usage: final.usage as JsonObject | null,
        finished_at: Date.now(),
      });
      await this.effects.apply(run, terminal);
      if (final.status === 'completed') {
        await this.effects.finish(run);
      }
      this.bus.publish(terminal);
      this.logger.log({
        run_id: run.run_id,
        msg: `run ${final.status}${final.error_code ? ` (${final.error_code})` : ''}`,
      });
    } finally {
      this.active.remove(run.run_id);
      this.bus.end(run.run_id);
      run.markFinished();
    }
  }

  private verdictResult(run_id: string, sequence: number, v: HostVerdict): ResultView {
    return {
      run_id,
      sequence,
      type: 'run.failed',
      data: { error: v.error, code: v.code, retryable: v.retryable },
      usage: null,
      source: 'host',
      timestamp: Math.floor(Date.now() / 1000),
    };
  }

  private finalOf(v: HostVerdict): Outcome {
    return { status: v.status, status_reason: v.error, error_code: v.code, retryable: v.retryable, usage: null };
  }
}
