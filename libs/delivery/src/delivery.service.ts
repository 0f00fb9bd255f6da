import { Injectable } from '@nestjs/common';
import { AgentsRepository, outboxLastUnit, type NewOutboxRow, type RunEntity } from '@libs/persistence';
import { telemetry } from '@libs/telemetry';
import { interruptedOps } from './interrupted';
import { DeliveryBus } from './delivery-bus';
import type { DeliveryOp } from './ops';
import { opOf, OutboxStore, outboxRows } from './outbox-store';
import type { DeliveryPlan } from './plan';
import { planOf, RunDelivery } from './run-delivery';
import type { DeliveryContext } from './surfaces';
import { WebhookWorker } from './webhook/webhook-worker';

/** Ops read back to close an interrupted run's delivery: enough to hold its last message op. */
const RECENT_OPS = 64;

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
    private readonly agents: AgentsRepository,
  ) {}

  /**
   * A run a restart interrupted: the ops that close its delivery (see interrupted.ts), as outbox
   * rows to write with its end. The plan is made again from the agent's policy and the run's stored context.
   */
  async interrupted(run: RunEntity): Promise<NewOutboxRow[]> {
    const stored = (run.context as { delivery?: DeliveryContext } | null)?.delivery;
    const agent = await this.agents.get(run.agent_id);
    const plan = planOf(
      agent?.delivery_policy,
      stored ?? {
        surface: 'api',
        supports_streaming: true,
        supports_edit: false,
        supports_reaction: false,
        platform_capabilities: {},
      },
    );
    const recent = (await this.store.hot.read(outboxLastUnit(run.run_id, RECENT_OPS))).map(opOf);
    const ops = interruptedOps(plan, run.run_id, recent, Date.now());
    return this.rows(run.agent_id, plan, ops);
  }

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
    telemetry.deliveryOps(ops);
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
