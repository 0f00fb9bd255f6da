import { deliveryRequestSchema } from '@libs/delivery';
import { MAX_SUBMISSION_BYTES } from '@libs/interactions';
import {
  MAX_EPOCH_SECONDS,
  OPEN_MAP_MAX_BYTES,
  alias,
  component,
  integer,
  list,
  matching,
  object,
  oneOf,
  openMap,
  optional,
  required,
  text,
  type Infer,
} from '@libs/protocol';
import { CONCURRENCY_MODES } from './concurrency/concurrency';

/** Who triggered an event (`event.source`). */
export const TRIGGER_SOURCES = ['platform', 'webui', 'api', 'scheduler', 'system', 'host_adapter'] as const;
/** `event.event_type`: a dotted lower-case name such as `message.received`. */
export const EVENT_TYPE_PATTERN = /^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$/;
/** A platform id (`event.event_id`, `conversation.conversation_id`): 1-255 characters, not starting with white space. */
export const PLATFORM_ID_PATTERN = /^[^\s].{0,254}$/;

/*
 * The body of `POST /v1/events` (and of `POST /v1/interactions/{id}/submit`): one JSON schema, its
 * types inferred from it; the HTTP edge compiles it once into the route's validator and shows it as
 * the OpenAPI components of the document (docs/architecture.md#validation). Keyword order inside a
 * field is the order its rules are listed in a 400.
 */
const map = openMap(OPEN_MAP_MAX_BYTES);
const name = text(255);

const rawRef = component(
  'RawEventRefDto',
  object({ ref_id: text(255, true), storage_key: optional(text(1024)) }, ['ref_id']),
);

const eventContext = component(
  'EventContextDto',
  object(
    {
      event_id: optional(
        matching(PLATFORM_ID_PATTERN, 'must be 1-255 characters and not start with white space', {
          description: 'Platform event id; generated when absent. Duplicates return the original answer.',
        }),
      ),
      event_type: matching(EVENT_TYPE_PATTERN, 'must be a dotted name such as message.received', {
        example: 'message.received',
      }),
      event_time: optional(integer(0, MAX_EPOCH_SECONDS, { description: 'Epoch seconds' })),
      source: oneOf(TRIGGER_SOURCES),
      source_event_type: optional(name),
      raw_ref: optional(rawRef),
      data: optional(map),
    },
    ['event_type', 'source'],
  ),
);

const conversation = component(
  'ConversationDto',
  object(
    {
      conversation_id: matching(PLATFORM_ID_PATTERN, 'must be 1-255 characters'),
      thread_id: optional(name),
      bot_id: optional(name),
      workspace_id: optional(name),
      launcher_type: optional(name),
      launcher_id: optional(name),
      sender_id: optional(name),
      session_id: optional(name),
    },
    ['conversation_id'],
  ),
);

const actor = component(
  'ActorDto',
  object(
    {
      actor_type: text(64, true, { example: 'user' }),
      actor_id: optional(name),
      actor_name: optional(name),
      metadata: optional(map),
    },
    ['actor_type'],
  ),
);

const subject = component(
  'SubjectDto',
  object({ subject_type: text(64, true), subject_id: optional(name), data: optional(map) }, ['subject_type']),
);

const imageUrl = component('ImageUrlDto', object({ url: text(8192, true) }, ['url']));

const CONTENT_TYPES = ['text', 'image_url', 'image_base64', 'file_url', 'file_base64'] as const;
export const contentElementSchema = component(
  'ContentElementDto',
  object(
    {
      type: oneOf(CONTENT_TYPES),
      text: optional(text()),
      image_url: optional(imageUrl),
      image_base64: optional(text()),
      file_url: optional(text(8192)),
      file_base64: optional(text()),
      file_name: optional(text(1024)),
    },
    ['type'],
  ),
);

export const attachmentSchema = component(
  'AttachmentDto',
  object(
    {
      type: oneOf(['image', 'file', 'voice']),
      mime_type: optional(name),
      size: optional(integer(0, Number.MAX_SAFE_INTEGER)),
      name: optional(text(1024)),
      source: optional(oneOf(['url', 'base64', 'message_chain'])),
      url: optional(text(8192)),
      path: optional(text(8192)),
      content: optional(text()),
      id: optional(name),
    },
    ['type'],
  ),
);

/** The submission of an interaction answer (docs/interactions.md#submitting). */
export const interactionSubmissionSchema = component(
  'SubmitInteractionDto',
  object(
    {
      callback_token: text(64, false, { description: 'The one-time token of the interaction.request op (`rhit_…`)' }),
      action_id: optional(text(128), "One of the request's action ids"),
      values: optional(
        openMap(
          MAX_SUBMISSION_BYTES,
          'Values by field id: text/textarea a string, select one option value, multiselect a list of option values, number a number, boolean true/false, file a file reference string. Required fields must be present; unknown field ids are refused. At most 256 KiB.',
        ),
      ),
    },
    ['callback_token'],
  ),
);

/** `input.interaction` of an `interaction.submitted` event: the same as the submit route's body. */
const interactionInput = alias('InteractionInputDto', interactionSubmissionSchema);

const input = component(
  'InputDto',
  object({
    text: optional(text(100_000)),
    contents: optional(list(contentElementSchema, 100)),
    attachments: optional(list(attachmentSchema, 100)),
    interaction: optional(
      interactionInput,
      'event_type interaction.submitted only: the answer with its one-time token (docs/interactions.md)',
    ),
  }),
);

export const submitEventSchema = component(
  'SubmitEventDto',
  object(
    {
      agent_id: text(128, true, { description: 'The agent that handles the event' }),
      event: required(eventContext),
      conversation: optional(conversation),
      actor: optional(actor),
      subject: optional(subject),
      input: required(input),
      delivery: optional(deliveryRequestSchema),
      locale: optional(text(32, false, { example: 'en_US' })),
      timezone: optional(text(64, false, { example: 'Europe/Berlin' })),
      metadata: optional(map),
      concurrency: optional(
        oneOf(CONCURRENCY_MODES, {
          description:
            "Overrides the agent's concurrency policy for this event while its conversation is busy: steer it into the active run, queue it as the next run, interrupt the active run, or reject it (409)",
        }),
      ),
    },
    ['agent_id', 'event', 'input'],
  ),
);

/** A platform event as `POST /v1/events` accepts it (Runner Protocol v1, event-first). */
type EventBody = Infer<typeof submitEventSchema>;

/** The body of `POST /v1/interactions/{id}/submit` (and `input.interaction` of POST /v1/events). */
export type InteractionSubmission = Infer<typeof interactionSubmissionSchema>;

/**
 * `input.interaction` of an admitted `interaction.submitted` event (docs/interactions.md#submitting):
 * on POST /v1/events the platform sends the submission (`callback_token`, `action_id`, `values`); the
 * event the host then admits carries the checked submission instead (`interaction_id`,
 * `submitted_at`, never the token). A type, not an interface: it travels as a JSON object.
 */
export type InteractionInput = Omit<Partial<InteractionSubmission>, 'action_id'> & {
  interaction_id?: string;
  action_id?: string | null;
  submitted_at?: number;
};

/**
 * A platform event as admission takes it: the body of `POST /v1/events`, whose `input.interaction`
 * may be the checked submission the host builds (above).
 */
export type EventSubmission = Omit<EventBody, 'input'> & {
  input: Omit<EventBody['input'], 'interaction'> & { interaction?: InteractionInput };
};

export type ContentElementInput = Infer<typeof contentElementSchema>;
export type AttachmentInput = Infer<typeof attachmentSchema>;

/**
 * A copy fit for the event log: base64 payloads and inline attachment contents removed.
 * `text`: `JSON.stringify(sub)` when the caller already has it (the body hash): with nothing to
 * remove, the copy is parsed from it instead of stringified again (the same JSON:
 * docs/benchmarks.md#host-cpu-per-run-outside-the-database).
 */
export function redactSubmission(sub: EventSubmission, text?: string): Record<string, unknown> {
  if (
    text !== undefined &&
    !sub.input.contents?.some((c) => c.image_base64 || c.file_base64) &&
    !sub.input.attachments?.some((a) => a.content)
  ) {
    return JSON.parse(text) as Record<string, unknown>;
  }
  const contents = sub.input.contents?.map((c) =>
    c.image_base64 || c.file_base64
      ? {
          ...c,
          image_base64: c.image_base64 ? null : undefined,
          file_base64: c.file_base64 ? null : undefined,
          content_redacted: true,
        }
      : c,
  );
  const attachments = sub.input.attachments?.map((a) =>
    a.content ? { ...a, content: null, content_redacted: true } : a,
  );
  return JSON.parse(JSON.stringify({ ...sub, input: { ...sub.input, contents, attachments } })) as Record<
    string,
    unknown
  >;
}
