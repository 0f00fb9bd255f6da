import { Injectable } from '@nestjs/common';
import { Subject, type Observable } from 'rxjs';

/** A persisted result as clients see it (SSE, API). */
export interface ResultView {
  run_id: string;
  sequence: number;
  type: string;
  data: Record<string, unknown>;
  usage: Record<string, unknown> | null;
  source: 'runner' | 'host';
  timestamp: number | null;
}

/** In-process fan-out of each active run's persisted results to live readers. */
@Injectable()
export class RunStreamBus {
  private readonly subjects = new Map<string, Subject<ResultView>>();

  publish(result: ResultView): void {
    this.subjects.get(result.run_id)?.next(result);
  }

  /** Opens the live channel of a run when it becomes active. */
  open(runId: string): void {
    this.subjects.set(runId, new Subject<ResultView>());
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
