import { Injectable } from '@nestjs/common';
import { Subject, type Observable } from 'rxjs';
import type { StoredResult } from '@libs/persistence';

/**
 * A persisted result as clients see it (SSE, API): the stored result, without its row metadata.
 * `ephemeral` marks host telemetry for live readers only (tool progress): never persisted, it
 * carries the run's last sequence and goes out as an SSE frame without an id.
 */
export type ResultView = StoredResult & { ephemeral?: true };

/** In-process fan-out of each active run's persisted results to live readers. */
@Injectable()
export class RunStreamBus {
  private readonly subjects = new Map<string, Subject<ResultView>>();

  publish(result: ResultView): void {
    this.subjects.get(result.run_id)?.next(result);
  }

  /** Opens the live channel of a run when it becomes active (or is queued); its readers stay on it when it starts. */
  open(runId: string): void {
    if (!this.subjects.has(runId)) {
      this.subjects.set(runId, new Subject<ResultView>());
    }
  }

  /** Live results of an active run from now on; null when the run is not active here. */
  follow(runId: string): Observable<ResultView> | null {
    return this.subjects.get(runId)?.asObservable() ?? null;
  }

  end(runId: string): void {
    this.subjects.get(runId)?.complete();
    this.subjects.delete(runId);
  }
}
