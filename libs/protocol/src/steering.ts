import { z } from 'zod';
import {
  actorContextSchema,
  contentElementSchema,
  eventContextSchema,
  inputAttachmentSchema,
  subjectContextSchema,
} from './run-context';

/*
 * The SteeringInputItem a runner pulls (docs/protocol.md#steering-pull): a follow-up message
 * steered into a running run, with the follow-up's whole input. Written by admission, stored as
 * JSON, handed out by SteeringPull (`google.protobuf.Struct` on the wire).
 */
export const steeringItemSchema = z.object({
  /** The follow-up's event id. */
  item_id: z.string(),
  /** Set by the admission unit, which knows the run it steers into. */
  claimed_run_id: z.string(),
  runner_id: z.string(),
  /** Unix seconds. */
  claimed_at: z.number().int(),
  /** The item's place in the run's queue, set by the admission unit. */
  position: z.number().int(),
  event: eventContextSchema,
  conversation: z
    .object({
      conversation_id: z.string(),
      thread_id: z.string().optional(),
      bot_id: z.string().optional(),
      workspace_id: z.string().optional(),
    })
    .nullable(),
  actor: actorContextSchema.nullable(),
  subject: subjectContextSchema.nullable(),
  input: z.object({
    text: z.string().optional(),
    contents: z.array(contentElementSchema).optional(),
    attachments: z.array(inputAttachmentSchema).optional(),
    interaction: z.record(z.string(), z.unknown()).optional(),
  }),
  /** The W3C trace context of the follow-up's admission, while the host exports traces. */
  traceparent: z.string().optional(),
});
export type SteeringItem = z.infer<typeof steeringItemSchema>;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The steering items of a pull as admission stored them (JSON built as a `SteeringItem`:
 * libs/runs admission-rows.ts), typed by a cheap check of the fields a runner relies on (ids,
 * position, event type, input) rather than a full parse per pull (docs/benchmarks.md#steering).
 * A stored item that fails it is a broken row, not a runner's mistake: an internal error naming it.
 */
export function steeringItemsOf(stored: readonly unknown[]): SteeringItem[] {
  for (let i = 0; i < stored.length; i++) {
    const fault = steeringItemFault(stored[i]);
    if (fault !== null) {
      throw new Error(`stored steering item ${i}: ${fault}`);
    }
  }
  return stored as SteeringItem[];
}

function steeringItemFault(v: unknown): string | null {
  if (!isObject(v)) {
    return 'not an object';
  }
  for (const k of ['item_id', 'claimed_run_id', 'runner_id'] as const) {
    if (typeof v[k] !== 'string') {
      return `${k} is not a string`;
    }
  }
  if (!Number.isInteger(v.position) || !Number.isInteger(v.claimed_at)) {
    return 'position or claimed_at is not an integer';
  }
  if (!isObject(v.event) || typeof v.event.event_type !== 'string') {
    return 'event.event_type is not a string';
  }
  if (!isObject(v.input)) {
    return 'input is not an object';
  }
  return null;
}
