import { createHmac, timingSafeEqual } from 'node:crypto';

/** Header names of a webhook request (docs/delivery.md#webhooks). */
export const WEBHOOK_HEADERS = {
  signature: 'x-runnerhost-signature',
  timestamp: 'x-runnerhost-timestamp',
  deliveryId: 'x-runnerhost-delivery-id',
  idempotencyKey: 'idempotency-key',
} as const;

/** The exact string signed: `${timestamp}.${body}` (timestamp = Unix seconds as sent, body = raw bytes). */
export function signedString(timestamp: string, body: string): string {
  return `${timestamp}.${body}`;
}

/** `sha256=<hex HMAC-SHA256 of the signed string under the secret>`. */
export function signature(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(signedString(timestamp, body)).digest('hex')}`;
}

/** What a receiver does (and the tests): constant-time comparison of the header with the expected value. */
export function verifySignature(secret: string, timestamp: string, body: string, header: string): boolean {
  const expected = Buffer.from(signature(secret, timestamp, body));
  const got = Buffer.from(header);
  return expected.length === got.length && timingSafeEqual(expected, got);
}
