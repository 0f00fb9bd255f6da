import { Injectable } from '@nestjs/common';
import {
  failedPageUnit,
  HotStore,
  outboxAfterUnit,
  outboxOfRunUnit,
  outboxUnit,
  type NewOutboxRow,
  webhookRetryFailedUnit,
  type OutboxRow,
} from '@libs/persistence';
import type { DeliveryOp, DeliveryOpType } from './ops';

/** A stored op as readers see it (SSE, admin): the op without the webhook bookkeeping. */
export function opOf(r: OutboxRow): DeliveryOp {
  return {
    delivery_id: r.delivery_id,
    run_id: r.run_id,
    sequence: r.sequence,
    op: r.op as DeliveryOpType,
    idempotency_key: r.idempotency_key,
    reply_target: r.reply_target,
    target_delivery_id: r.target_delivery_id,
    result_sequence: r.result_sequence,
    payload: r.payload,
    created_at: r.created_at,
  };
}

/** Outbox rows of ops, with the run's webhook (frozen at the run's start) when it has one. */
export function outboxRows(
  ops: readonly DeliveryOp[],
  agentId: string,
  webhook: { url: string; secret_env: string } | null,
): NewOutboxRow[] {
  // Field by field, not `{ ...o, agent_id, … }`: an object spread followed by more keys is a slow
  // path of V8 (docs/benchmarks.md#host-cpu-per-run-round-9-wt-cpu9); the writer reads OUTBOX_COLUMNS.
  const url = webhook?.url ?? null;
  const secretEnv = webhook?.secret_env ?? null;
  const state = webhook ? 'pending' : 'none';
  return ops.map((o) => ({
    delivery_id: o.delivery_id,
    run_id: o.run_id,
    sequence: o.sequence,
    op: o.op,
    idempotency_key: o.idempotency_key,
    reply_target: o.reply_target,
    target_delivery_id: o.target_delivery_id,
    result_sequence: o.result_sequence,
    payload: o.payload,
    created_at: o.created_at,
    agent_id: agentId,
    webhook_url: url,
    webhook_secret_env: secretEnv,
    webhook_state: state,
  }));
}

/** Reads and writes of the outbox outside a result's unit, through the one writer. */
@Injectable()
export class OutboxStore {
  constructor(readonly hot: HotStore) {}

  write(rows: readonly NewOutboxRow[]): Promise<void> {
    return this.hot.write(() => outboxUnit(rows));
  }

  async after(runId: string, after: number, limit: number): Promise<DeliveryOp[]> {
    return (await this.hot.read(outboxAfterUnit(runId, after, limit))).map(opOf);
  }

  ofRun(runId: string, limit: number): Promise<OutboxRow[]> {
    return this.hot.read(outboxOfRunUnit(runId, limit));
  }

  /** A run's failed webhook ops back to pending (fresh attempts); how many. */
  retryFailed(runId: string): Promise<number> {
    return this.hot.write(() => webhookRetryFailedUnit(runId));
  }

  failedPage(beforeId: number, limit: number): Promise<OutboxRow[]> {
    return this.hot.read(failedPageUnit(beforeId, limit));
  }
}
