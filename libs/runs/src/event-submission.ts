import type { DeliveryRequest } from '@libs/delivery';
/** Who triggered an event (`event.source`). */
export const TRIGGER_SOURCES = ['platform', 'webui', 'api', 'scheduler', 'system', 'host_adapter'] as const;
/** `event.event_type`: a dotted lower-case name such as `message.received`. */
export const EVENT_TYPE_PATTERN = /^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$/;
/** A platform id (`event.event_id`, `conversation.conversation_id`): 1-255 characters, not starting with white space. */
export const PLATFORM_ID_PATTERN = /^[^\s].{0,254}$/;

/** A platform event as `POST /v1/events` accepts it (Runner Protocol v1, event-first). */
export interface EventSubmission {
  agent_id: string;
  event: {
    event_id?: string;
    event_type: string;
    event_time?: number;
    source: string;
    source_event_type?: string;
    raw_ref?: { ref_id: string; storage_key?: string };
    data?: Record<string, unknown>;
  };
  conversation?: {
    conversation_id: string;
    thread_id?: string;
    bot_id?: string;
    workspace_id?: string;
    launcher_type?: string;
    launcher_id?: string;
    sender_id?: string;
    session_id?: string;
  };
  actor?: { actor_type: string; actor_id?: string; actor_name?: string; metadata?: Record<string, unknown> };
  subject?: { subject_type: string; subject_id?: string; data?: Record<string, unknown> };
  input: {
    text?: string;
    contents?: ContentElementInput[];
    attachments?: AttachmentInput[];
    /**
     * `interaction.submitted` events (docs/interactions.md#submitting): on POST /v1/events the
     * platform sends `callback_token`, `action_id`, `values`; the event the host then admits
     * carries the checked submission instead (`interaction_id`, `submitted_at`, never the token).
     */
    interaction?: InteractionInput;
  };
  delivery?: DeliveryRequest;
  locale?: string;
  timezone?: string;
  metadata?: Record<string, unknown>;
  /**
   * Overrides the agent's concurrency policy for this event
   * (docs/conversations-and-steering.md#concurrency-policies).
   */
  concurrency?: 'steer' | 'queue' | 'interrupt' | 'reject';
}

/** A type, not an interface: it travels as the run context's `input.interaction` JSON object. */
export type InteractionInput = {
  interaction_id?: string;
  callback_token?: string;
  action_id?: string | null;
  values?: Record<string, unknown>;
  submitted_at?: number;
};

export interface ContentElementInput {
  type: string;
  text?: string;
  image_url?: { url: string };
  image_base64?: string;
  file_url?: string;
  file_base64?: string;
  file_name?: string;
}

export interface AttachmentInput {
  type: string;
  mime_type?: string;
  size?: number;
  name?: string;
  source?: string;
  url?: string;
  path?: string;
  content?: string;
  id?: string;
}

/** A copy fit for the event log: base64 payloads and inline attachment contents removed. */
export function redactSubmission(sub: EventSubmission): Record<string, unknown> {
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
