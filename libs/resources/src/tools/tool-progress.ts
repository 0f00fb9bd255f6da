import { randomUUID } from 'node:crypto';

/** One progress report of a tool in flight: MCP `notifications/progress`, or a task's status. */
export interface ToolProgress {
  progress?: number;
  total?: number;
  message?: string;
  /** MCP task status (`working`, `input_required`, ...) for task-based tools. */
  task_status?: string;
}

/** A progress report as the run's live result stream shows it (`tool.call.progress`). */
export interface ToolProgressEvent extends ToolProgress {
  run_id: string;
  /** The host's id of this call: tells apart two calls of one tool in flight at once. */
  call_id: string;
  tool_name: string;
}

/** Reports forwarded per call and second at most; the last state of a burst is not lost for long. */
const MIN_INTERVAL_MS = 100;

/**
 * The forwarding side of one call's progress: at most one report per MIN_INTERVAL_MS (a server
 * may report thousands a second), except that a finished count (progress = total) and a change
 * of task status always go out. Every report still restarts the call's timeout (the caller's).
 */
export function progressReporter(
  runId: string,
  toolName: string,
  emit: (e: ToolProgressEvent) => void,
): (p: ToolProgress) => void {
  const callId = randomUUID();
  let last = 0;
  let lastStatus: string | undefined;
  return (p) => {
    const now = Date.now();
    const important =
      (p.total !== undefined && p.progress === p.total) ||
      (p.task_status !== undefined && p.task_status !== lastStatus);
    if (!important && now - last < MIN_INTERVAL_MS) {
      return;
    }
    last = now;
    lastStatus = p.task_status ?? lastStatus;
    emit({ run_id: runId, call_id: callId, tool_name: toolName, ...p });
  };
}
