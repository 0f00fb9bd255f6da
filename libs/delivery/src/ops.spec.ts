import { createHash } from 'node:crypto';
import { HUGE_OPS_TEXT, deliveryId, hugeOps, opJson, type DeliveryOp } from './ops';

describe('deliveryId', () => {
  it('is the same UUID-shaped SHA-256 prefix as before the one-shot hash (ids already stored stay valid)', () => {
    expect(deliveryId('run-1', 3)).toBe('079a48da-131d-8c13-9829-d7e124b50bf1');
    const h = createHash('sha256').update('run-1:3').digest('hex');
    expect(deliveryId('run-1', 3).replace(/-/g, '').slice(0, 12)).toBe(h.slice(0, 12));
  });

  it('depends only on the run and the sequence', () => {
    expect(deliveryId('run-1', 3)).toBe(deliveryId('run-1', 3));
    expect(deliveryId('run-1', 4)).not.toBe(deliveryId('run-1', 3));
    expect(deliveryId('run-2', 3)).not.toBe(deliveryId('run-1', 3));
  });
});

describe('opJson: an op serialised around a payload serialised already', () => {
  const op = (payload: Record<string, unknown>, extra: Partial<DeliveryOp> = {}): DeliveryOp => ({
    delivery_id: deliveryId('run-1', 1),
    run_id: 'run-1',
    sequence: 1,
    op: 'message.final',
    idempotency_key: 'run-1:1',
    reply_target: { chat_id: 7, thread: null },
    target_delivery_id: null,
    result_sequence: 3,
    payload,
    created_at: 1_700_000_000_000,
    ...extra,
  });

  it('is exactly JSON.stringify of the op (key order, nulls, escapes, surrogate pairs)', () => {
    const payloads = [
      { text: 'plain', part: 0 },
      { text: 'quotes " \\ \n\t \u2028 👍 \u0000', part: 2, incomplete: true },
      { kind: 'failed', text: 'x', retryable: false },
      {},
    ];
    for (const p of payloads) {
      for (const o of [op(p), op(p, { target_delivery_id: deliveryId('run-1', 0), reply_target: null })]) {
        expect(opJson(o, JSON.stringify(o.payload))).toBe(JSON.stringify(o));
      }
    }
  });

  it('leaves out a field set to undefined, as JSON.stringify does', () => {
    const o = { ...op({ text: 'a' }), result_sequence: undefined } as unknown as DeliveryOp;
    expect(opJson(o, '{"text":"a"}')).toBe(JSON.stringify(o));
  });
});

describe('hugeOps', () => {
  const withText = (text: string): DeliveryOp => ({ payload: { text, part: 0 } }) as unknown as DeliveryOp;

  it('counts the text of all the ops against HUGE_OPS_TEXT', () => {
    expect(hugeOps([])).toBe(false);
    expect(hugeOps([withText('x'.repeat(HUGE_OPS_TEXT - 1))])).toBe(false);
    expect(hugeOps([withText('x'.repeat(HUGE_OPS_TEXT))])).toBe(true);
    expect(hugeOps([withText('x'.repeat(HUGE_OPS_TEXT / 2)), withText('y'.repeat(HUGE_OPS_TEXT / 2))])).toBe(true);
    expect(hugeOps([{ payload: { attachment: { url: 'u' } } } as unknown as DeliveryOp])).toBe(false);
  });
});
