import { Injectable } from '@nestjs/common';
import { Observable } from 'rxjs';
import { snapshotHash, type AuthorizationSnapshot } from '@libs/authz';
import { RunsRepository, type RunListFilter } from '@libs/persistence';
import { DomainError, TERMINAL_RESULT_TYPES, isTerminal } from '@libs/protocol';
import { ActiveRuns } from './active-runs';
import { RunLifecycleService } from './run-lifecycle.service';
import { RunStreamBus, type ResultView } from './run-stream.bus';
import { runView, type RunView } from './run-view';

const REPLAY_PAGE = 500;

/** Reading runs and their result streams; cancelling them. */
@Injectable()
export class RunsQueryService {
  constructor(
    private readonly runs: RunsRepository,
    private readonly active: ActiveRuns,
    private readonly lifecycle: RunLifecycleService,
    private readonly bus: RunStreamBus,
  ) {}

  async get(runId: string): Promise<RunView> {
    const run = await this.runs.get(runId);
    if (!run) {
      throw new DomainError('not_found', `run ${runId} not found`, { run_id: runId });
    }
    return runView(run);
  }

  /** The run's frozen authorization snapshot, its stored hash, and whether the content still matches it. */
  async authorization(runId: string) {
    const run = await this.runs.get(runId);
    if (!run) {
      throw new DomainError('not_found', `run ${runId} not found`, { run_id: runId });
    }
    const snapshot = run.authorization as unknown as AuthorizationSnapshot | null;
    return {
      run_id: run.run_id,
      authorization: snapshot,
      authorization_hash: run.authorization_hash,
      hash_verified: snapshot !== null && snapshotHash(snapshot) === run.authorization_hash,
    };
  }

  async list(
    filter: RunListFilter,
    cursor: string | null,
    limit: number,
  ): Promise<{ items: RunView[]; next_cursor: string | null }> {
    const before = cursor === null ? null : Number(cursor);
    if (before !== null && (!Number.isInteger(before) || before <= 0)) {
      throw new DomainError('invalid_argument', 'cursor: must be a cursor returned by a previous page', {
        field: 'cursor',
      });
    }
    const rows = await this.runs.page(filter, before, limit + 1);
    const page = rows.slice(0, limit);
    return { items: page.map(runView), next_cursor: rows.length > limit ? String(page[page.length - 1].id) : null };
  }

  async cancel(runId: string, reason: string): Promise<RunView> {
    const run = await this.runs.get(runId);
    if (!run) {
      throw new DomainError('not_found', `run ${runId} not found`, { run_id: runId });
    }
    const active = this.active.get(runId);
    if (isTerminal(run.status) || !active) {
      throw new DomainError('conflict', `run ${runId} has already ended (${run.status})`, {
        run_id: runId,
        status: run.status,
      });
    }
    await this.lifecycle.cancel(active, reason);
    return this.get(runId);
  }

  /**
   * The run's results with sequence > `after`: persisted ones first, then live ones as they are
   * accepted; completes after the terminal result. Works during and after the run.
   */
  stream(runId: string, after: number): Observable<ResultView> {
    return new Observable<ResultView>((out) => {
      const sent = new Set<number>();
      const buffered: ResultView[] = [];
      let replaying = true;
      let liveEnded = false;
      const emit = (r: ResultView) => {
        if (out.closed || r.sequence <= after || sent.has(r.sequence)) {
          return;
        }
        sent.add(r.sequence);
        out.next(r);
        if (TERMINAL_RESULT_TYPES.includes(r.type)) {
          out.complete();
        }
      };
      // Follow first, then replay, so nothing falls between the two.
      const live = this.bus.follow(runId)?.subscribe({
        next: (r) => (replaying ? buffered.push(r) : emit(r)),
        complete: () => {
          liveEnded = true;
          if (!replaying) {
            out.complete();
          }
        },
      });
      void (async () => {
        let cursor = after;
        for (;;) {
          const rows = await this.runs.resultsAfter(runId, cursor, REPLAY_PAGE);
          for (const row of rows) {
            emit({
              run_id: row.run_id,
              sequence: row.sequence,
              type: row.type,
              data: row.data,
              usage: row.usage,
              source: row.source,
              timestamp: row.timestamp,
            });
            cursor = row.sequence;
          }
          if (rows.length < REPLAY_PAGE || out.closed) {
            break;
          }
        }
        replaying = false;
        buffered.splice(0).forEach(emit);
        if (!live || liveEnded) {
          out.complete();
        }
      })().catch((e: unknown) => out.error(e));
      return () => live?.unsubscribe();
    });
  }
}
