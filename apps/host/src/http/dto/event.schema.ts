import { ACTION_STYLES, FIELD_TYPES, MAX_SUBMISSION_BYTES } from '@libs/interactions';
import {
  CONCURRENCY_MODES,
  EVENT_TYPE_PATTERN,
  PLATFORM_ID_PATTERN,
  TRIGGER_SOURCES,
  type EventSubmission,
  type InteractionInput,
} from '@libs/runs';
import { INT32_MAX, MAX_EPOCH_SECONDS, OPEN_MAP_MAX_BYTES } from './rules';
import { CompiledBody } from '../compiled-body';
import {
  component,
  integer,
  list,
  matching,
  object,
  oneOf,
  openApiComponents,
  openMap,
  optional,
  required,
  text,
} from '../schema-builders';

/**
 * The body of `POST /v1/events` (and of `POST /v1/interactions/{id}/submit`): one JSON schema,
 * compiled once into the route's validator and shown as the OpenAPI components of the document
 * (docs/architecture.md#validation). Keyword order inside a field is the order its rules are
 * listed in a 400.
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
const contentElement = component(
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

const attachment = component(
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
const interactionInput = component('InteractionInputDto', { ...interactionSubmissionSchema });

const input = component(
  'InputDto',
  object({
    text: optional(text(100_000)),
    contents: optional(list(contentElement, 100)),
    attachments: optional(list(attachment, 100)),
    interaction: optional(
      interactionInput,
      'event_type interaction.submitted only: the answer with its one-time token (docs/interactions.md)',
    ),
  }),
);

const interactionCapabilities = component(
  'InteractionCapabilitiesDto',
  object({
    field_types: optional(
      list(oneOf(FIELD_TYPES), FIELD_TYPES.length, { description: 'Field types it renders (default all)' }),
    ),
    action_styles: optional(
      list(oneOf(ACTION_STYLES), ACTION_STYLES.length, { description: 'Action styles it renders (default all)' }),
    ),
    supports_updates: optional({
      type: 'boolean',
      description: 'It can update a shown interaction (read-only after the outcome)',
    }),
    max_fields: optional(integer(0, 50, { description: 'Most fields it renders in one interaction' })),
  }),
);

const delivery = component(
  'DeliveryDto',
  object({
    surface: optional(text(64, false, { default: 'api' })),
    reply_target: optional(map),
    supports_streaming: optional({ type: 'boolean', default: true }),
    supports_edit: optional({ type: 'boolean', default: false }),
    supports_reaction: optional({ type: 'boolean', default: false }),
    max_message_size: optional(integer(1, INT32_MAX)),
    platform_capabilities: optional(map),
    interactions: optional(
      interactionCapabilities,
      'What the surface renders of an interaction; absent: fallback_text only',
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
      delivery: optional(delivery),
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

/** Compiled once at boot (module load). */
export const submitEventBody = new CompiledBody<EventSubmission>(submitEventSchema);
export const submitInteractionBody = new CompiledBody<InteractionInput>(interactionSubmissionSchema);

/** The OpenAPI components of the compiled bodies (added to the document by apps/host/src/openapi). */
export function compiledBodyComponents(): Record<string, Record<string, unknown>> {
  return { ...openApiComponents(submitEventSchema), ...openApiComponents(interactionSubmissionSchema) };
}

/** `@ApiBody` of a route whose body is one of these components. */
export const bodyRef = (name: 'SubmitEventDto' | 'SubmitInteractionDto') => ({
  schema: { $ref: `#/components/schemas/${name}` },
});
