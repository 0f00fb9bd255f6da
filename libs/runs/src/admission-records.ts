import type { RunScope } from '@libs/authz';
import type { EventLogEntity, JsonObject, NewTranscriptRow } from '@libs/persistence';
import { redactMessage, truncate } from '@libs/conversations';
import type { EventSubmission } from './event-submission';

/** `redactSubmission(sub)`: made once per admission, shared by the event row and these rows. */
export type RedactedSubmission = Record<string, unknown>;

/** The event log row of an inbound event (redacted; the input as a ≤ 1000-character summary). */
export function eventLogRow(
  eventId: string,
  sub: EventSubmission,
  redacted: RedactedSubmission,
  scope: RunScope,
  runId: string | null,
  now: number,
): Omit<EventLogEntity, 'id'> {
  const { agent_id, conversation_id, thread_id, bot_id, workspace_id, actor_type, actor_id, subject_type, subject_id } =
    scope;
  return {
    event_id: eventId,
    event_type: sub.event.event_type,
    event_time: sub.event.event_time ?? null,
    source: sub.event.source,
    agent_id,
    conversation_id,
    thread_id,
    bot_id,
    workspace_id,
    actor_type,
    actor_id,
    actor_name: sub.actor?.actor_name ?? null,
    subject_type,
    subject_id,
    input_summary: truncate(sub.input.text ?? '', 1000),
    run_id: runId,
    runner_id: scope.runner_id,
    metadata: { input: redacted.input as JsonObject, data: sub.event.data ?? {} },
    created_at: now,
  };
}

/** The user transcript row of a message.received event with a conversation (null otherwise), keyed by the run's scope. */
export function userTranscriptRow(
  eventId: string,
  sub: EventSubmission,
  redacted: RedactedSubmission,
  scope: RunScope,
  now: number,
): NewTranscriptRow | null {
  if (sub.event.event_type !== 'message.received' || !sub.conversation) {
    return null;
  }
  const content = sub.input.contents?.length ? sub.input.contents : (sub.input.text ?? '');
  return {
    conversation_id: sub.conversation.conversation_id,
    thread_id: sub.conversation.thread_id ?? null,
    role: 'user',
    item_type: 'message',
    content: truncate(sub.input.text ?? ''),
    content_json: redactMessage({ role: 'user', content }) as JsonObject,
    attachment_refs: (redacted.input as { attachments?: JsonObject[] }).attachments ?? [],
    event_id: eventId,
    run_id: null,
    agent_id: scope.agent_id,
    workspace_id: scope.workspace_id,
    metadata: { actor_type: sub.actor?.actor_type ?? null, actor_id: sub.actor?.actor_id ?? null },
    created_at: now,
  };
}
