import type { RunEntity } from '@libs/persistence';
import type { RunStatus } from '@libs/protocol';
import { runUsage, type MeteredCall, type RunUsage } from './run-usage';

export interface RunView {
  run_id: string;
  event_id: string;
  agent_id: string;
  runner_id: string;
  conversation_id: string | null;
  thread_id: string | null;
  status: RunStatus;
  status_reason: string | null;
  error: { code: string; retryable: boolean } | null;
  usage: RunUsage;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  deadline_at: string | null;
  cancel_requested_at: string | null;
  duration_ms: number | null;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** The run record; with the host's metering of its proxied model calls when given (GET /v1/runs/{id}). */
export function runView(r: RunEntity, metered?: readonly MeteredCall[]): RunView {
  return {
    run_id: r.run_id,
    event_id: r.event_id,
    agent_id: r.agent_id,
    runner_id: r.runner_id,
    conversation_id: r.conversation_id,
    thread_id: r.thread_id,
    status: r.status,
    status_reason: r.status_reason,
    error: r.error_code ? { code: r.error_code, retryable: Boolean(r.retryable) } : null,
    usage: runUsage(r.usage, metered),
    created_at: new Date(r.created_at).toISOString(),
    started_at: iso(r.started_at),
    finished_at: iso(r.finished_at),
    deadline_at: iso(r.deadline_at),
    cancel_requested_at: iso(r.cancel_requested_at),
    duration_ms: r.started_at !== null && r.finished_at !== null ? r.finished_at - r.started_at : null,
  };
}
