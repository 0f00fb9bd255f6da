import { Injectable } from '@nestjs/common';
import type { NewOutboxRow } from '@libs/persistence';
import { DeliveryBus } from './delivery-bus';
import type { DeliveryOp } from './ops';
import { OutboxStore, outboxRows } from './outbox-store';
import type { DeliveryPlan } from './plan';
import { RunDelivery } from './run-delivery';
import { WebhookWorker } from './webhook/webhook-worker';

/** What the run path gives the delivery of a run: its identity and its ordered step queue. */
export interface DeliveryHost {
  run_id: string;
  agent_id: string;
  /** Queues a step behind the run's earlier ones (publishing stays in result order). */
  enqueue(step: () => Promise<void>): void;
}

/**
 * The run path's entry into delivery: opens a run's delivery (its normaliser state, owned by the
 * returned `RunDelivery`), turns ops into outbox rows written with their result, and once they
 * are committed shows them to SSE readers and wakes the webhook worker.
 */
@Injectable()
export class DeliveryService {
  constructor(
    private readonly bus: DeliveryBus,
    private readonly store: OutboxStore,
    private readonly webhooks: WebhookWorker,
  ) {}

  open(run: DeliveryHost, plan: DeliveryPlan): RunDelivery {
    this.bus.open(run.run_id);
    const delivery: RunDelivery = new RunDelivery(plan, run.run_id, () => {
      // A coalesced edit came due: written on its own, published in the run's order.
      const ops = delivery.tick();
      if (ops.length > 0) {
        const written = this.store.write(this.rows(run.agent_id, plan, ops));
        run.enqueue(async () => {
          await written;
          this.published(ops, plan);
        });
      }
    });
    return delivery;
  }

  rows(agentId: string, plan: DeliveryPlan, ops: readonly DeliveryOp[]): NewOutboxRow[] {
    return outboxRows(ops, agentId, plan.webhook);
  }

  /** Committed ops: to live readers, and to the webhook when the run has one. */
  published(ops: readonly DeliveryOp[], plan: DeliveryPlan | null): void {
    for (const op of ops) {
      this.bus.publish(op);
    }
    if (ops.length > 0 && plan?.webhook) {
      this.webhooks.wake();
    }
  }

  /** The run ended (its last ops published): live readers finish. */
  end(runId: string): void {
    this.bus.end(runId);
  }
}
