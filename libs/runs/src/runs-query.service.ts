import { Injectable } from '@nestjs/common';
import { snapshotHash } from '@libs/authz';
import { ModelsRepository, RunsRepository, writtenJson, type RunListFilter } from '@libs/persistence';
import { DomainError, isTerminal, parseRowCursor, readPage, type RunStatus } from '@libs/protocol';
import { ActiveRuns } from './active-runs';
import { ConversationDispatcher } from './concurrency/conversation-dispatcher';
import { RunLifecycleService } from './run-lifecycle.service';
import { DeliveryBus, OutboxStore, opJson, type DeliveryOp } from '@libs/delivery';
import type { StreamSource } from '@libs/streams';
import { RESULT_EVENTS, RunStreamBus, type ResultView } from './run-stream.bus';
import { RunFollowsService } from './run-follows.service';
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
    private readonly follows: RunFollowsService,
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
    const stored = await this.runs.authorization(runId);
    if (!stored) {
      throw new DomainError('not_found', `run ${runId} not found`, { run_id: runId });
    }
    // The snapshot as stored (JSON); the hash is recomputed from that content.
    const snapshot = stored.authorization;
    return {
      run_id: runId,
      authorization: snapshot,
      authorization_hash: stored.authorization_hash,
      hash_verified: snapshot !== null && snapshotHash(snapshot) === stored.authorization_hash,
    };
  }

  async list(
    filter: RunListFilter,
    cursor: string | null,
    limit: number,
  ): Promise<{ items: RunView[]; next_cursor: string | null }> {
    const before = parseRowCursor(cursor);
    const { rows, next_cursor } = await readPage(
      limit,
      (n) => this.runs.page(filter, before, n),
      (r) => r.id,
    );
    return { items: rows.map((r) => runView(r)), next_cursor };
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
    if (active) {
      await this.lifecycle.cancel(active, reason);
      return this.get(runId);
    }
    // Owned by another process (docs/scale-out.md#everything-from-anywhere): the request is
    // written and signalled; the answer comes once the run ended there, as it does here.
    if (!isTerminal(run.status) && this.follows.shared) {
      await this.lifecycle.cancelElsewhere(runId, reason);
      return this.get(runId);
    }
    throw new DomainError('conflict', `run ${runId} has already ended (${run.status})`, {
      run_id: runId,
      status: run.status,
    });
  }

  /**
   * The run has ended and its stream (results or delivery ops) has nothing after `after`: a reader
   * resuming there has everything, and the SSE route answers 204 so that EventSource stops reconnecting.
   * `known`: the run's status as the route read it (existingStatus); a terminal one is final.
   */
  async streamIsOver(kind: RunStreamKind, runId: string, after: number, known?: RunStatus): Promise<boolean> {
    if (this.active.get(runId)) {
      return false;
    }
    const status = await this.statusOf(runId, known);
    if (status === null || !isTerminal(status)) {
      return false;
    }
    const next =
      kind === 'results' ? await this.runs.resultsAfter(runId, after, 1) : await this.outbox.after(runId, after, 1);
    return next.length === 0;
  }

  /** not_found unless the run exists. */
  async assertExists(runId: string): Promise<void> {
    await this.existingStatus(runId);
  }

  /**
   * not_found unless the run exists; else its status as read, or undefined for a run active in
   * this process, answered from memory (an SSE reader attaching to a live run costs no database
   * read). The stream routes hand it on to `results` / `deliveryOps` / `streamIsOver`, which
   * then do not read it again when it is terminal (a terminal status never changes).
   */
  async existingStatus(runId: string): Promise<RunStatus | undefined> {
    if (this.active.get(runId)) {
      return undefined;
    }
    // Its status, not the whole record (context and snapshot): readers of an ended run ask this once each.
    const status = await this.runs.status(runId);
    if (status === null) {
      throw new DomainError('not_found', `run ${runId} not found`, { run_id: runId });
    }
    return status;
  }

  /** The run's status: `known` when it is terminal (final), else read now. */
  private async statusOf(runId: string, known: RunStatus | undefined): Promise<RunStatus | null> {
    return known !== undefined && isTerminal(known) ? known : this.runs.status(runId);
  }

  /**
   * The run's results as a stream (docs/api.md#streams): committed ones with sequence > a cursor,
   * then live ones as they are accepted; its last item is the terminal result. Works during and
   * after the run. `known`: as for `streamIsOver`.
   */
  async results(runId: string, after = 0, known?: RunStatus): Promise<StreamSource<ResultView>> {
    const fromDatabase = await this.followsFromDatabase(runId, known);
    if (!fromDatabase) {
      await this.lifecycle.followWaiting(runId, known);
    }
    /** Following the channel of a run active here (subscribed before the first page is read). */
    let onChannel = false;
    return {
      ...RESULT_EVENTS,
      // Active here: the owner's channel; anywhere else: followed from the database.
      follow: () => {
        const live = fromDatabase ? this.follows.results(runId, after) : this.bus.follow(runId);
        onChannel = !fromDatabase && live !== undefined;
        return live;
      },
      // The stored rows as they are (a StoredResult is a ResultView): readers replaying the same
      // rows share them, and so their SSE frames (RunsRepository.resultsAfter).
      page: (cursor: number, limit: number): Promise<ResultView[]> =>
        onChannel && this.nothingShownAfter(runId, cursor)
          ? Promise.resolve([])
          : this.runs.resultsAfter(runId, cursor, limit),
    };
  }

  /**
   * A run active here that has shown readers nothing after `cursor`: every result of it is
   * published on its channel in the turn it is marked shown (RunLifecycleService: `shown` then
   * `publish`; its terminal published in the turn it leaves the active runs), so a row after
   * `cursor` committed now comes on the channel its reader already follows — a replay page
   * would read nothing it does not get anyway (at c1, the SSE reader's one read per run).
   */
  private nothingShownAfter(runId: string, cursor: number): boolean {
    const run = this.active.get(runId);
    return run !== undefined && run.shown_sequence <= cursor;
  }

  /**
   * On a shared bus, a run not active in this process is followed from the database while it is
   * queued or running — wherever it runs or will start (a run queued here may be dispatched by the
   * process holding its runner): docs/scale-out.md#everything-from-anywhere-reads-cancel-steering.
   */
  private async followsFromDatabase(runId: string, known: RunStatus | undefined): Promise<boolean> {
    return this.active.get(runId) === undefined && (await this.follows.followsFromDatabase(runId, known));
  }

  /**
   * The run's delivery ops as a stream (`id` the op's sequence, `event` its type, `data` the op):
   * committed ones first, then live ones; it ends once the run ended and its last op was sent.
   */
  async deliveryOps(runId: string, after = 0, known?: RunStatus): Promise<StreamSource<DeliveryOp>> {
    const fromDatabase = await this.followsFromDatabase(runId, known);
    return {
      follow: () => (fromDatabase ? this.follows.deliveries(runId, after) : this.deliveryBus.follow(runId)),
      page: (cursor: number, limit: number) => this.outbox.after(runId, cursor, limit),
      event: (op: DeliveryOp) => {
        // A huge op's payload was serialised by the writer: its frame reuses that text (docs/delivery.md#long-answers).
        const payload = writtenJson(op.payload);
        return {
          id: op.sequence,
          event: op.op,
          data: op,
          json: payload === undefined ? undefined : opJson(op, payload),
        };
      },
      isLast: () => false,
    };
  }
}
