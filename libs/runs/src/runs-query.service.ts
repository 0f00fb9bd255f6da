import type { Writable } from 'node:stream';
import { Injectable } from '@nestjs/common';
import { snapshotHash, type AuthorizationSnapshot } from '@libs/authz';
import { RunsRepository, type RunListFilter } from '@libs/persistence';
import { DomainError, isTerminal } from '@libs/protocol';
import { ActiveRuns } from './active-runs';
import { ConversationDispatcher } from './conversations/conversation-dispatcher';
import { RunLifecycleService } from './run-lifecycle.service';
import { RunEventStream, type EventStreamLimits, type StreamEnd } from './run-event-stream';
import { RunStreamBus, type ResultView } from './run-stream.bus';
import { runView, type RunView } from './run-view';

/** Reading runs and their result streams; cancelling them. */
@Injectable()
export class RunsQueryService {
  constructor(
    private readonly runs: RunsRepository,
    private readonly active: ActiveRuns,
    private readonly lifecycle: RunLifecycleService,
    private readonly bus: RunStreamBus,
    private readonly dispatcher: ConversationDispatcher,
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
    // A run waiting in its conversation ends before it starts (if it starts meanwhile: cancelled as active).
    if (run.status === 'queued' && (await this.dispatcher.cancelWaiting(runId, reason))) {
      return this.get(runId);
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
   * not_found unless the run exists. A run active in this process is answered from memory: an SSE
   * reader attaching to a live run costs no database read.
   */
  async assertExists(runId: string): Promise<void> {
    if (this.active.get(runId)) {
      return;
    }
    if (!(await this.runs.get(runId))) {
      throw new DomainError('not_found', `run ${runId} not found`, { run_id: runId });
    }
  }

  /**
   * A run waiting in its conversation (`queued`) has no live channel yet when this process did
   * not queue it (e.g. after a restart): one is opened, so its readers follow it until it ends.
   */
  private async followWaiting(runId: string): Promise<void> {
    if (this.bus.follow(runId) || (await this.runs.status(runId)) !== 'queued') {
      return;
    }
    this.bus.open(runId);
    // It may have ended between the read and the open: then nothing would ever end the channel.
    const now = await this.runs.status(runId);
    if (now !== 'queued' && now !== 'running') {
      this.bus.end(runId);
    }
  }

  /**
   * Writes the run's results with sequence > `after` to `out` as SSE frames: persisted ones first
   * (paged from the database as the socket drains), then live ones as they are accepted; ends
   * `out` after the terminal result. Works during and after the run. Resolves with how it ended.
   */
  async stream(runId: string, after: number, out: Writable, limits: EventStreamLimits): Promise<StreamEnd> {
    await this.followWaiting(runId);
    const source = {
      follow: () => this.bus.follow(runId),
      page: async (cursor: number, limit: number): Promise<ResultView[]> =>
        (await this.runs.resultsAfter(runId, cursor, limit)).map((row) => ({
          run_id: row.run_id,
          sequence: row.sequence,
          type: row.type,
          data: row.data,
          usage: row.usage,
          source: row.source,
          timestamp: row.timestamp,
        })),
    };
    return new RunEventStream(out, after, source, limits).run();
  }
}
