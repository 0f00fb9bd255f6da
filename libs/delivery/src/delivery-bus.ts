import { Injectable } from '@nestjs/common';
import { Subject, type Observable } from 'rxjs';
import type { DeliveryOp } from './ops';

/** In-process fan-out of each active run's committed delivery ops to live SSE readers. */
@Injectable()
export class DeliveryBus {
  private readonly subjects = new Map<string, Subject<DeliveryOp>>();

  open(runId: string): void {
    this.subjects.set(runId, new Subject<DeliveryOp>());
  }

  publish(op: DeliveryOp): void {
    this.subjects.get(op.run_id)?.next(op);
  }

  /** Live ops of an active run from now on; null when the run is not active here. */
  follow(runId: string): Observable<DeliveryOp> | null {
    return this.subjects.get(runId)?.asObservable() ?? null;
  }

  end(runId: string): void {
    this.subjects.get(runId)?.complete();
    this.subjects.delete(runId);
  }
}
