import { randomUUID } from 'node:crypto';
import type {
  AdmissionRows,
  EventEntity,
  NewEventLog,
  NewResult,
  NewRun,
  NewTranscriptRow,
  RunEnd,
} from '@libs/persistence';

/** Rows of the run path (admission, results, the end of a run) for the hot store suites. */

export const T0 = 1_764_700_000_000;

export function newRun(overrides: Partial<NewRun> = {}): NewRun {
  return {
    run_id: `run_${randomUUID()}`,
    event_id: `evt_${randomUUID()}`,
    agent_id: 'agent-1',
    runner_id: 'acme/echo/echo',
    conversation_id: 'conv-1',
    thread_id: null,
    workspace_id: null,
    status: 'running',
    status_reason: null,
    error_code: null,
    retryable: null,
    context: { protocol: 'v1' },
    usage: null,
    authorization: null,
    authorization_hash: null,
    created_at: T0,
    started_at: T0,
    finished_at: null,
    deadline_at: null,
    cancel_requested_at: null,
    ...overrides,
  };
}

export function newEvent(overrides: Partial<EventEntity> = {}): EventEntity {
  return {
    event_id: `evt_${randomUUID()}`,
    agent_id: 'agent-1',
    event_type: 'message.created',
    conversation_id: 'conv-1',
    thread_id: null,
    idempotency_key: null,
    body_hash: 'a'.repeat(64),
    payload: { text: 'hello' },
    disposition: 'started',
    run_id: null,
    received_at: T0,
    ...overrides,
  };
}

/** The event-log row admission writes for `e` (and its run). */
export function logOf(e: EventEntity, overrides: Partial<NewEventLog> = {}): NewEventLog {
  return {
    event_id: e.event_id,
    event_type: e.event_type,
    event_time: null,
    source: 'api',
    agent_id: e.agent_id,
    conversation_id: e.conversation_id,
    thread_id: e.thread_id,
    bot_id: null,
    workspace_id: null,
    actor_type: null,
    actor_id: null,
    actor_name: null,
    subject_type: null,
    subject_id: null,
    input_summary: 'hello',
    run_id: e.run_id,
    runner_id: 'acme/echo/echo',
    metadata: {},
    created_at: e.received_at,
    ...overrides,
  };
}

export function transcriptRow(
  role: 'user' | 'assistant',
  content: string,
  overrides: Partial<NewTranscriptRow> = {},
): NewTranscriptRow {
  return {
    conversation_id: 'conv-1',
    thread_id: null,
    workspace_id: null,
    role,
    item_type: 'message',
    content,
    content_json: { role, content },
    attachment_refs: [],
    event_id: `evt_${randomUUID()}`,
    run_id: null,
    agent_id: 'agent-1',
    metadata: {},
    created_at: T0,
    ...overrides,
  };
}

/** A new admission of `event` (run, event log row, optional user row), not a retry. */
export function admission(event: EventEntity, run: NewRun, user: NewTranscriptRow | null = null): AdmissionRows {
  return { event, run, log: logOf(event), user, terminal: null, readmit: false };
}

/** An event and its run, linked both ways. */
export function eventWithRun(
  eventOverrides: Partial<EventEntity> = {},
  runOverrides: Partial<NewRun> = {},
): { event: EventEntity; run: NewRun } {
  const run = newRun(runOverrides);
  const event = newEvent({ event_id: run.event_id, run_id: run.run_id, ...eventOverrides });
  return { event, run: { ...run, event_id: event.event_id } };
}

export function newResult(runId: string, sequence: number, overrides: Partial<NewResult> = {}): NewResult {
  return {
    run_id: runId,
    sequence,
    type: 'message.delta',
    data: { n: sequence },
    usage: null,
    source: 'runner',
    timestamp: T0 + sequence,
    created_at: T0 + sequence,
    ...overrides,
  };
}

export function completed(at = T0 + 1000): RunEnd {
  return {
    status: 'completed',
    status_reason: null,
    error_code: null,
    retryable: null,
    usage: { tokens: 3 },
    finished_at: at,
  };
}

/** The end the dead-owner sweep writes for a run whose process stopped (the fence and lease suites). */
export const interruptedEnd: RunEnd = {
  status: 'interrupted',
  status_reason: 'the host process running it stopped',
  error_code: 'host.interrupted',
  retryable: true,
  usage: null,
  finished_at: T0 + 100,
};
