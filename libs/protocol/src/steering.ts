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
