import type { AgentResult, ChatMessage, JsonObject, LocalAgentHostPort, ToolCall } from '../host-port';
import { errorCode, errorMessage, isRunDeadlineError, RunStopped, type RunControls } from '../run/controls';
import type { LocalTool } from './definitions';
import type { Gate } from './approval';
import { boundToolResult, eventResult, isTerminate, toolReportedError } from './results';

/*
 * One tool batch (docs/local-agent.md#batches): calls prepared in source order, executed in parallel
 * (starts in source order, completions as they finish) or serially (never overlapping), and
 * their tool messages returned in source order whatever the completion order was.
 */

export interface PreparedCall {
  id: string;
  name: string;
  parameters: JsonObject;
  /** Set when the call must not run (invalid arguments). */
  error: string | null;
}

export interface ToolOutcome {
  call: PreparedCall;
  error: string | null;
  terminate: boolean;
  message: ChatMessage;
  /** Not executed: it needs a person's approval, which the loop asks for (docs/interactions.md#tool-approval-local-agent). */
  awaiting?: boolean;
}

/** A failure that aborts the batch: the run deadline (runner.timeout) or anything unexpected. */
export class ToolBatchError extends Error {
  constructor(
    message: string,
    readonly deadline: boolean,
  ) {
    super(message);
    this.name = 'ToolBatchError';
  }
}

export interface BatchDeps {
  port: LocalAgentHostPort;
  controls: RunControls;
  emit: (r: AgentResult) => Promise<void>;
  maxChars: number;
  mode: 'parallel' | 'serial';
  localTools: ReadonlyMap<string, LocalTool>;
  /** Names offered to the model, for the "not authorized" message. */
  allowed: readonly string[];
  /** Granted host tools: a host tool wins over a local tool of the same name. */
  hostTools: ReadonlySet<string>;
  /** Whether a call may run now, must be asked for, or is refused (tool approval); absent: all run. */
  gate?: (call: PreparedCall) => Gate;
}

export function prepareCall(call: ToolCall): PreparedCall {
  const name = call.function?.name ?? '';
  const args = call.function?.arguments ?? '';
  const base = { id: call.id, name, parameters: {} as JsonObject, error: null as string | null };
  if (args.trim() === '') {
    return base;
  }
  try {
    const parsed: unknown = JSON.parse(args);
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
      return { ...base, error: `Invalid JSON arguments for tool '${name}': expected object` };
    }
    return { ...base, parameters: parsed as JsonObject };
  } catch (e) {
    return { ...base, error: `Invalid JSON arguments for tool '${name}': ${errorMessage(e)}` };
  }
}

async function execute(deps: BatchDeps, call: PreparedCall): Promise<{ raw: unknown; error: string | null }> {
  if (call.error !== null) {
    return { raw: null, error: call.error };
  }
  try {
    const local = deps.localTools.get(call.name);
    const raw = await deps.controls.race(
      local && !deps.hostTools.has(call.name)
        ? local.run(call.parameters)
        : deps.port.callTool(call.name, call.parameters),
    );
    return { raw, error: toolReportedError(raw) };
  } catch (e) {
    if (e instanceof RunStopped) {
      throw e;
    }
    if (isRunDeadlineError(e, deps.controls)) {
      throw new ToolBatchError(errorMessage(e), true);
    }
    if (errorCode(e) === 'unauthorized') {
      return { raw: null, error: `Tool '${call.name}' is not authorized. Allowed tools: [${deps.allowed.join(', ')}]` };
    }
    return { raw: null, error: `Tool execution failed: ${errorMessage(e)}` };
  }
}

async function runOne(deps: BatchDeps, call: PreparedCall): Promise<ToolOutcome> {
  const { raw, error } = await execute(deps, call);
  const bounded = boundToolResult(raw, error, deps.maxChars);
  await deps.emit({
    type: 'tool.call.completed',
    data: { tool_call_id: call.id, tool_name: call.name, result: eventResult(raw, bounded, error), error },
  });
  return {
    call,
    error,
    terminate: error === null && isTerminate(raw),
    message: { role: 'tool', tool_call_id: call.id, content: bounded.content },
  };
}

const started = (call: PreparedCall): AgentResult => ({
  type: 'tool.call.started',
  data: { tool_call_id: call.id, tool_name: call.name, parameters: call.parameters },
});

/** Runs the batch; outcomes in source order. Throws RunStopped or ToolBatchError to abort. */
export async function runToolBatch(deps: BatchDeps, calls: readonly ToolCall[]): Promise<ToolOutcome[]> {
  const prepared = calls.map((c) => {
    const call = prepareCall(c);
    const gate = call.error === null && deps.gate ? deps.gate(call) : { run: true as const };
    if (gate.run) {
      return { call, awaiting: false };
    }
    return gate.ask ? { call, awaiting: true } : { call: { ...call, error: gate.refusal }, awaiting: false };
  });
  const awaiting = (call: PreparedCall): ToolOutcome => ({
    call,
    error: null,
    terminate: false,
    awaiting: true,
    message: { role: 'tool', tool_call_id: call.id, content: '' },
  });
  if (deps.mode === 'serial') {
    const out: ToolOutcome[] = [];
    for (const p of prepared) {
      if (p.awaiting) {
        out.push(awaiting(p.call));
        continue;
      }
      deps.controls.check();
      await deps.emit(started(p.call));
      out.push(await runOne(deps, p.call));
    }
    return out;
  }
  for (const p of prepared) {
    if (!p.awaiting) {
      await deps.emit(started(p.call));
    }
  }
  return Promise.all(prepared.map((p) => (p.awaiting ? Promise.resolve(awaiting(p.call)) : runOne(deps, p.call))));
}
