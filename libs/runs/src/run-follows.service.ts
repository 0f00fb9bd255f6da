import { Inject, Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { OutboxStore, type DeliveryOp } from '@libs/delivery';
import { RunsRepository } from '@libs/persistence';
import { isTerminal, type RunStatus } from '@libs/protocol';
import type { Observable } from 'rxjs';
import { SIGNAL_PORT, type SignalPort } from './concurrency/signal-port';
import { DatabaseFollows } from './database-follows';
import { RESULT_EVENTS, type ResultView } from './run-stream.bus';

/**
 * A results stream ends at its terminal result: its end is checked only now and then (a run
 * always has one); a delivery stream has no last op, its end is the run's (every idle poll tick).
 */
const RESULTS_END_CHECK_EVERY = 10;
const DELIVERIES_END_CHECK_EVERY = 1;

/**
 * Live follow of runs owned by another process (docs/scale-out.md#everything-from-anywhere): one
 * database follower per run and stream kind in this process, woken by the owner's `results`
 * signal and polled every SIGNAL_POLL_MS behind it; each follower announces itself (`follow`) when
 * it starts and at each poll tick, since the owner signals only runs someone follows.
 */
@Injectable()
export class RunFollowsService implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('RunFollows');
  private readonly resultFollows: DatabaseFollows<ResultView>;
  private readonly deliveryFollows: DatabaseFollows<DeliveryOp>;
  private unsubscribe?: () => void;
  /** Whether runs of this database may be owned by another process (a shared signal bus). */
  readonly shared: boolean;

  constructor(
    private readonly runs: RunsRepository,
    private readonly outbox: OutboxStore,
    @Inject(SIGNAL_PORT) private readonly signals: SignalPort,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.shared = signals.pollMs !== undefined;
    const pollMs = signals.pollMs ?? config.cluster.pollMs;
    const onError = (runId: string, e: unknown) =>
      this.logger.warn({ run_id: runId, msg: `following the run from the database: ${String(e)}` });
    // The owner sends the run's `results` signals only while someone announces it follows the run.
    const announce = (runId: string) => this.signals.publish({ kind: 'follow', run_id: runId });
    const ended = async (runId: string) => {
      const status = await this.runs.status(runId);
      return status === null || isTerminal(status);
    };
    this.resultFollows = new DatabaseFollows<ResultView>(
      {
        // The stored rows as they are (a StoredResult has a ResultView's fields, in its order): shared
        // with the readers replaying the same rows (RunsRepository.resultsAfter).
        read: (runId, after, limit) => this.runs.resultsAfter(runId, after, limit),
        ended,
        isLast: RESULT_EVENTS.isLast,
      },
      { pollMs, endCheckEvery: RESULTS_END_CHECK_EVERY, onError, announce },
    );
    this.deliveryFollows = new DatabaseFollows<DeliveryOp>(
      { read: (runId, after, limit) => this.outbox.after(runId, after, limit), ended, isLast: () => false },
      { pollMs, endCheckEvery: DELIVERIES_END_CHECK_EVERY, onError, announce },
    );
  }

  onModuleInit(): void {
    this.unsubscribe = this.signals.subscribe('results', (s) => {
      this.resultFollows.wake(s.run_id);
      this.deliveryFollows.wake(s.run_id);
    });
  }

  onModuleDestroy(): void {
    this.unsubscribe?.();
    this.resultFollows.closeAll();
    this.deliveryFollows.closeAll();
  }

  /**
   * Whether a reader of a run not active here follows it from the database: the run may still
   * produce rows (queued or running) and another process may own it. `known`: its status as just
   * read; a terminal one is final and is not read again.
   */
  async followsFromDatabase(runId: string, known?: RunStatus): Promise<boolean> {
    if (!this.shared) {
      return false;
    }
    const status = known !== undefined && isTerminal(known) ? known : await this.runs.status(runId);
    return status !== null && !isTerminal(status);
  }

  results(runId: string, after: number): Observable<ResultView> {
    return this.resultFollows.follow(runId, after);
  }

  deliveries(runId: string, after: number): Observable<DeliveryOp> {
    return this.deliveryFollows.follow(runId, after);
  }
}
