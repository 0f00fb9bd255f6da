import { Subject, type Observable } from 'rxjs';
import { ReleasingMap } from './releasing-map';

/**
 * In-process fan-out of each active run's committed items (results, delivery ops) to live readers:
 * one channel per run, opened when the run becomes active (or is queued) and ended with it.
 * Readers replay what was committed before they joined from the database (docs/durability.md).
 */
export class RunChannels<T extends { run_id: string }> {
  /** Long-lived, with a value per active run: a ReleasingMap (releasing-map.ts). */
  private readonly subjects = new ReleasingMap<string, Subject<T>>();

  /** Opens the run's channel; a channel already open (a queued run that starts) is kept with its readers. */
  open(runId: string): void {
    if (!this.subjects.has(runId)) {
      this.subjects.set(runId, new Subject<T>());
    }
  }

  publish(item: T): void {
    this.subjects.get(item.run_id)?.next(item);
  }

  /** Live items of an active run from now on; null when the run is not active here. */
  follow(runId: string): Observable<T> | null {
    return this.subjects.get(runId)?.asObservable() ?? null;
  }

  /** Ends the run's channel: its readers finish after what they were sent. */
  end(runId: string): void {
    this.subjects.get(runId)?.complete();
    this.subjects.delete(runId);
  }
}
