import type { Writable } from 'node:stream';
import { Injectable } from '@nestjs/common';
import { snapshotHash, type AuthorizationSnapshot } from '@libs/authz';
import { ModelsRepository, RunsRepository, type RunListFilter } from '@libs/persistence';
import { DomainError, isTerminal } from '@libs/protocol';
import { ActiveRuns } from './active-runs';
import { ConversationDispatcher } from './conversations/conversation-dispatcher';
import { RunLifecycleService } from './run-lifecycle.service';
import { DeliveryBus, OutboxStore, type DeliveryOp } from '@libs/delivery';
import { cachedFrame, RunEventStream, type EventStreamLimits, type StreamEnd } from './run-event-stream';
import { RunStreamBus, type ResultView } from './run-stream.bus';
import { runView, type RunView } from './run-view';

/** Reading runs and their result streams; cancelling them. */
/** What a run's SSE stream carries: its results (`/events`) or its delivery ops (`/deliveries`). */
export type RunStreamKind = 'results' | 'deliveries';

@Injectable()
export class RunsQueryService {
  constructor(
    private readonly runs: RunsRepository,
    private readonly active: ActiveRuns,
    private readonly lifecycle: RunLifecycleService,
    private readonly bus: RunStreamBus,
    private readonly deliveryBus: DeliveryBus,
    private readonly outbox: OutboxStore,
    private readonly models: ModelsRepository,
    private readonly dispatcher: ConversationDispatcher,
  ) {}

  async get(runId: string): Promise<RunView> {
    const run = await this.runs.get(runId);
    if (!run) {
      throw new DomainError('not_found', `run ${runId} not found`, { run_id: runId });
    }
    return runView(run, await this.models.usageOfRun(runId));
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
    return {
      items: page.map((r) => runView(r)),
      next_cursor: rows.length > limit ? String(page[page.length - 1].id) : null,
    };
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
   * The run has ended and its stream (results or delivery ops) has nothing after `after`: a reader
   * resuming there has everything, and the SSE route answers 204 so that EventSource stops reconnecting.
   */
  async streamIsOver(kind: RunStreamKind, runId: string, after: number): Promise<boolean> {
    if (this.active.get(runId)) {
      return false;
    }
    const run = await this.runs.get(runId);
    if (run === null || !isTerminal(run.status)) {
      return false;
    }
    const next =
      kind === 'results' ? await this.runs.resultsAfter(runId, after, 1) : await this.outbox.after(runId, after, 1);
    return next.length === 0;
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
   * Writes the run's results with sequence > `after` to `out` as SSE frames: persisted ones first
   * (paged from the database as the socket drains), then live ones as they are accepted; ends
   * `out` after the terminal result. Works during and after the run. Resolves with how it ended.
   */
  async stream(runId: string, after: number, out: Writable, limits: EventStreamLimits): Promise<StreamEnd> {
    await this.lifecycle.followWaiting(runId);
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

  /**
   * Writes the run's delivery ops with sequence > `after` to `out` as SSE frames (`id:` the op's
   * sequence, `event:` its type, `data:` the op): committed ones first, then live ones, with the
   * same paging, backpressure and resumption as the result stream; ends `out` once the run ended
   * and its last op was written.
   */
  deliveries(runId: string, after: number, out: Writable, limits: EventStreamLimits): Promise<StreamEnd> {
    const source = {
      follow: () => this.deliveryBus.follow(runId),
      page: (cursor: number, limit: number) => this.outbox.after(runId, cursor, limit),
      frame: (op: DeliveryOp) =>
        cachedFrame(op, (o) => `id: ${o.sequence}\nevent: ${o.op}\ndata: ${JSON.stringify(o)}\n\n`),
      isLast: () => false,
    };
    return new RunEventStream(out, after, source, limits).run();
  }
}
