import { hash } from 'node:crypto';

export const DELIVERY_OP_TYPES = [
  'message.send',
  'message.edit',
  'message.final',
  'attachment.send',
  'notice.send',
  'interaction.request',
  'interaction.update',
] as const;
export type DeliveryOpType = (typeof DELIVERY_OP_TYPES)[number];

/**
 * One delivery operation (docs/delivery.md#delivery-ops): what the platform should do next for a run, in order.
 *
 * - `message.send` {text, part}: send a new message (part = its index among the run's messages);
 * - `message.edit` {text, part}: replace the text of the message `target_delivery_id` sent;
 * - `message.final` {text, part, incomplete?}: the last text op of an answer — edit
 *   `target_delivery_id` to this text, or (target null) send it as a new message;
 *   `incomplete: true` when the run ended without completing the answer;
 * - `attachment.send` {attachment}: an image or file of a completed message;
 * - `notice.send` {kind, text, retryable}: a short user-facing notice (failure, cancel, timeout);
 * - `interaction.request` {interaction, presentation, callback_token, ...}: show a structured
 *   interaction (a form, or `fallback_text`), see docs/interactions.md#delivery;
 * - `interaction.update` {id, interaction_id, status}: its outcome — submitted, expired or superseded.
 */
export interface DeliveryOp {
  delivery_id: string;
  run_id: string;
  /** Per run, from 1, no gaps in a committed outbox. */
  sequence: number;
  op: DeliveryOpType;
  /** `${run_id}:${sequence}`: the same on every retry of the op (webhook duplicates carry it too). */
  idempotency_key: string;
  reply_target: Record<string, unknown> | null;
  /** For edits and finals of a message already sent: that message's delivery_id. */
  target_delivery_id: string | null;
  /** The result the op derives from; null for a timed edit flush. */
  result_sequence: number | null;
  payload: Record<string, unknown>;
  /** Milliseconds since the epoch. */
  created_at: number;
}

/**
 * A delivery id that depends only on the run and the op's sequence (a UUID-shaped SHA-256 prefix,
 * version nibble 8): the normaliser stays a pure function of its inputs.
 */
export function deliveryId(runId: string, sequence: number): string {
  const h = hash('sha256', `${runId}:${sequence}`, 'hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((parseInt(h[16], 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * The JSON text of an op whose payload was serialised already (`payloadJson`): exactly
 * `JSON.stringify(op)`, without serialising the payload again (a huge `message.final`'s text,
 * docs/delivery.md#long-answers).
 */
export function opJson(op: DeliveryOp, payloadJson: string): string {
  const fields: string[] = [];
  for (const [k, v] of Object.entries(op)) {
    if (k === 'payload') {
      fields.push(`"payload":${payloadJson}`);
    } else {
      const text = JSON.stringify(v) as string | undefined; // undefined (a field set to undefined): left out, as JSON.stringify does
      if (text !== undefined) {
        fields.push(`${JSON.stringify(k)}:${text}`);
      }
    }
  }
  return `{${fields.join(',')}}`;
}

/**
 * Ops carrying at least this much text (UTF-16 code units in all) are huge: the run path lets the
 * event loop turn between their commit and their publication (docs/delivery.md#long-answers).
 */
export const HUGE_OPS_TEXT = 1 << 20;

/** Whether ops carry at least HUGE_OPS_TEXT of text. */
export function hugeOps(ops: readonly DeliveryOp[]): boolean {
  let chars = 0;
  for (const o of ops) {
    const text = o.payload.text;
    chars += typeof text === 'string' ? text.length : 0;
  }
  return chars >= HUGE_OPS_TEXT;
}

export function idempotencyKey(runId: string, sequence: number): string {
  return `${runId}:${sequence}`;
}
