/**
 * The delivery side of a run a host restart interrupted (docs/delivery.md#interrupted-runs;
 * finalised `interrupted`): the normaliser state died with the process, so what the platform was
 * left with is read back from the run's last ops. A message still being edited is ended as it
 * stands (`incomplete`), then the failure notice follows (retryable: the event may be sent again).
 */
import { noticeText } from './notices';
import { deliveryId, idempotencyKey, type DeliveryOp } from './ops';
import type { DeliveryPlan } from './plan';

/** `recent`: the run's last ops, newest first (a few are enough: the last message op and the highest sequence). */
export function interruptedOps(
  plan: DeliveryPlan,
  runId: string,
  recent: readonly DeliveryOp[],
  now: number,
): DeliveryOp[] {
  let seq = recent.reduce((n, o) => Math.max(n, o.sequence), 0);
  const ops: DeliveryOp[] = [];
  const emit = (op: DeliveryOp['op'], payload: Record<string, unknown>, target: string | null) => {
    seq++;
    ops.push({
      delivery_id: deliveryId(runId, seq),
      run_id: runId,
      sequence: seq,
      op,
      idempotency_key: idempotencyKey(runId, seq),
      reply_target: plan.reply_target,
      target_delivery_id: target,
      result_sequence: null,
      payload,
      created_at: now,
    });
  };
  const last = recent.find((o) => o.op.startsWith('message.'));
  if (plan.mode === 'edit' && last && last.op !== 'message.final') {
    const target = last.target_delivery_id ?? last.delivery_id;
    emit('message.final', { text: last.payload.text, part: last.payload.part, incomplete: true }, target);
  }
  const setting = plan.notices.failed;
  if (setting !== false) {
    emit(
      'notice.send',
      { kind: 'failed', text: typeof setting === 'string' ? setting : noticeText('failed', true), retryable: true },
      null,
    );
  }
  return ops;
}
