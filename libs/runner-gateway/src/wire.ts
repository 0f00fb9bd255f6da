import type {
  HostMessage,
  RunContext as WireRunContext,
  RunRequest as WireRunRequest,
  RunResult as WireRunResult,
} from '@libs/proto';
import type { RunContext, RunDispatch, RunnerCommand, RunnerResult } from '@libs/protocol';

/*
 * The Connect stream's edge (docs/architecture.md#conventions: adapters convert, services decide):
 * the generated proto types of proto/runnerhost/v1/gateway.proto stop here. Inside the host a run
 * context, a command to a runner and a runner's result are the schemas' types of libs/protocol.
 */

/**
 * The run context as its wire message. The schema follows context.proto field by field
 * (libs/runner-gateway/src/wire.spec.ts keeps them in step), so the conversion is the type check.
 */
export function toWireContext(context: RunContext): WireRunContext {
  return context;
}

function toWireRun(run: RunDispatch): WireRunRequest {
  return {
    runner_id: run.runner_id,
    runner_name: run.runner_name,
    context: toWireContext(run.context),
    traceparent: run.traceparent,
  };
}

/** A command to a runner as the `HostMessage` its stream carries. */
export function toHostMessage(command: RunnerCommand): HostMessage {
  if (command.run) {
    return { run: toWireRun(command.run) };
  }
  return { cancel: { run_id: command.cancel.run_id, reason: command.cancel.reason } };
}

/** A runner's result off the wire. What it may hold is decided by the result rules (libs/runs). */
export function fromWireResult(result: WireRunResult): RunnerResult {
  return {
    run_id: result.run_id,
    type: result.type,
    data: result.data ?? undefined,
    usage: result.usage ?? undefined,
    sequence: result.sequence ?? undefined,
    timestamp: result.timestamp ?? undefined,
  };
}
