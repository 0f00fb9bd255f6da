import type { DeliveryOp } from './ops';
import { outboxRows } from './outbox-store';

const op = (sequence: number, extra: Partial<DeliveryOp> = {}): DeliveryOp => ({
  delivery_id: `d-${sequence}`,
  run_id: 'run-1',
  sequence,
  op: 'message.send',
  idempotency_key: `run-1:${sequence}`,
  reply_target: sequence === 1 ? { channel: 'c' } : null,
  target_delivery_id: sequence === 2 ? 'd-1' : null,
  result_sequence: sequence,
  payload: { text: `part ${sequence}`, part: sequence - 1 },
  created_at: 1_700_000_000_000 + sequence,
  ...extra,
});

describe('outboxRows', () => {
  it('carries every field of each op, the agent and the webhook frozen at the run start', () => {
    const ops = [op(1), op(2, { op: 'message.edit' })];
    const rows = outboxRows(ops, 'agent-1', { url: 'https://hooks.example/x', secret_env: 'HOOK_SECRET' });
    expect(rows).toStrictEqual(
      ops.map((o) => ({
        ...o,
        agent_id: 'agent-1',
        webhook_url: 'https://hooks.example/x',
        webhook_secret_env: 'HOOK_SECRET',
        webhook_state: 'pending',
      })),
    );
    // The payload is the op's own object (the writer may reuse its JSON text, docs/delivery.md#long-answers).
    expect(rows[0].payload).toBe(ops[0].payload);
  });

  it('without a webhook: no URL, no secret, state none', () => {
    const [row] = outboxRows([op(3)], 'agent-2', null);
    expect(row).toStrictEqual({
      ...op(3),
      agent_id: 'agent-2',
      webhook_url: null,
      webhook_secret_env: null,
      webhook_state: 'none',
    });
  });
});
