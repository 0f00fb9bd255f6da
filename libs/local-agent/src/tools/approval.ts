import { chatMessageSchema, chatToolCallSchema } from '@libs/protocol';
import { z } from 'zod';
import type { AgentConfig } from '../config';
import type { AgentRunContext, ChatMessage, JsonObject, LocalAgentHostPort, ToolCall, ToolGrant } from '../host-port';
import { RunStopped, type RunControls } from '../run/controls';

/*
 * Tool approval (docs/interactions.md#tool-approval-local-agent): tools the agent's config marks
 * (by name, or every tool of a source) are not executed when the model calls them; the agent asks
 * a person through a structured interaction (a confirmation showing the calls and their
 * arguments), saves the turn in the conversation's state and ends the run. The submission starts
 * the next run of the conversation (`interaction.submitted`): it resumes the saved turn, executes
 * the approved calls exactly once (the state record is consumed before they run) or tells the
 * model they were refused, and the conversation continues. An approval that expired (or was
 * replaced) reaches the model as a refusal in the conversation's next run.
 */

/** The conversation-state key of the one approval a conversation waits for. */
export const APPROVAL_STATE_KEY = 'local-agent.tool-approval';
export const APPROVAL_SCHEMA = 1;
/** The interaction ids the agent uses start with this. */
export const APPROVAL_ID_PREFIX = 'tool-approval:';
export const APPROVE_ACTION = 'approve';
export const REJECT_ACTION = 'reject';
/** The model's refusals, by cause. */
export const REFUSED = {
  rejected: 'The user rejected this tool call: it was not executed.',
  expired: 'The approval request for this tool call expired unanswered: it was not executed.',
  replaced: 'This tool call was not executed: the conversation moved on before it was approved.',
  cannotAsk:
    "This tool needs a person's approval, and this run cannot ask for it (interactions are not enabled for the agent): it was not executed.",
  alreadyHandled: 'This approved tool call was already handled by an earlier run: it is not executed again.',
} as const;

/** Longest argument text shown per call in the confirmation. */
const MAX_SHOWN_ARGUMENTS = 2000;

export type Gate = { run: true } | { run: false; ask: true } | { run: false; ask: false; refusal: string };

/** The approval policy of the agent's config. */
export interface ApprovalPolicy {
  tools: ReadonlySet<string>;
  sources: ReadonlySet<string>;
  expiresIn: number | null;
}

export function approvalPolicy(config: AgentConfig): ApprovalPolicy {
  const names = (v: unknown[]) => new Set(v.filter((x): x is string => typeof x === 'string' && x.trim() !== ''));
  return {
    tools: names(config['approval-tools']),
    sources: names(config['approval-sources']),
    expiresIn: config['approval-expires-in'],
  };
}

/** Whether a call of `name` needs approval: named, or granted from a named source. */
export function needsApproval(policy: ApprovalPolicy, name: string, grants: readonly ToolGrant[]): boolean {
  if (policy.tools.has(name)) {
    return true;
  }
  if (policy.sources.size === 0) {
    return false;
  }
  const grant = grants.find((g) => g.tool_name === name);
  return !!grant && [grant.source_id, grant.source].some((s) => typeof s === 'string' && policy.sources.has(s));
}

/** What the conversation's state holds while an approval is asked for (parsed when read back). */
const approvalRecordSchema = z.looseObject({
  schema_version: z.literal(APPROVAL_SCHEMA),
  interaction_id: z.string(),
  /** The run that asked. */
  run_id: z.string(),
  /** `pending` until a run takes it; then `taken` (by `taken_by`) before any call executes. */
  status: z.enum(['pending', 'taken']),
  taken_by: z.string().optional(),
  /** Epoch seconds. */
  expires_at: z.number(),
  /** The turn so far: the assistant's tool calls and the results the model already has. */
  turn: z.array(chatMessageSchema),
  /** The calls awaiting approval (ids of tool calls in `turn`). */
  calls: z.array(chatToolCallSchema),
});
export type ApprovalRecord = z.infer<typeof approvalRecordSchema>;

/** What a run resumes from an approval: the saved turn and, per call, run it or the refusal. */
export interface ApprovalResume {
  interaction_id: string;
  turn: ChatMessage[];
  calls: ToolCall[];
  /** The refusal text when the calls are not to run; null: approved. */
  refusal: string | null;
  /** True when this run answers the interaction (an `interaction.submitted` event). */
  submitted: boolean;
}

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The stored record, or null when the state holds nothing usable (another version, a foreign value). */
function readRecord(v: unknown): ApprovalRecord | null {
  const parsed = approvalRecordSchema.safeParse(v);
  return parsed.success ? parsed.data : null;
}

/** The submission a run carries, if it answers an interaction. */
function submissionOf(context: AgentRunContext): { interaction_id: string; action_id: string | null } | null {
  if (context.event?.event_type !== 'interaction.submitted') {
    return null;
  }
  const s = context.input?.interaction;
  if (!isObject(s) || typeof s.interaction_id !== 'string') {
    return null;
  }
  return { interaction_id: s.interaction_id, action_id: typeof s.action_id === 'string' ? s.action_id : null };
}

/**
 * At a run's start: the approval the conversation waits for, if any, and what to do with it.
 * The record is taken (and the state rewritten) before anything executes: a second run with the
 * same submission (a retry, a replay) finds it taken and executes nothing.
 */
export async function takeApproval(
  port: LocalAgentHostPort,
  controls: RunControls,
  context: AgentRunContext,
  nowMs: number,
  warn: (m: string) => void,
  policy: ApprovalPolicy,
): Promise<ApprovalResume | null> {
  const submission = submissionOf(context);
  // Only an agent with an approval policy (or a run answering one) looks: no extra call otherwise.
  const asks = policy.tools.size > 0 || policy.sources.size > 0;
  if (
    !context.context?.available_apis?.state ||
    (!asks && !submission?.interaction_id.startsWith(APPROVAL_ID_PREFIX))
  ) {
    return null;
  }
  let record: ApprovalRecord | null;
  try {
    record = readRecord(await controls.race(port.stateGet('conversation', APPROVAL_STATE_KEY)));
  } catch (e) {
    if (e instanceof RunStopped) {
      throw e;
    }
    warn('tool approval: state.get failed; no approval resumed');
    return null;
  }
  if (!record) {
    return null;
  }
  const answers = submission !== null && submission.interaction_id === record.interaction_id;
  if (record.status !== 'pending') {
    if (!answers) {
      return null;
    }
    return {
      interaction_id: record.interaction_id,
      turn: record.turn,
      calls: record.calls,
      refusal: REFUSED.alreadyHandled,
      submitted: true,
    };
  }
  let refusal: string | null;
  if (answers) {
    refusal = submission.action_id === APPROVE_ACTION ? null : REFUSED.rejected;
  } else if (submission !== null && submission.interaction_id.startsWith(APPROVAL_ID_PREFIX)) {
    return null; // an answer to an older approval (it was replaced): nothing to resume
  } else {
    // A new message while the approval is asked for: past its expiry it is refused; before it,
    // the conversation moves on and the request is superseded by the host when a new one comes.
    refusal = record.expires_at * 1000 <= nowMs ? REFUSED.expired : REFUSED.replaced;
  }
  const taken: ApprovalRecord = { ...record, status: 'taken', taken_by: context.run_id };
  try {
    await controls.race(port.stateSet('conversation', APPROVAL_STATE_KEY, taken));
  } catch (e) {
    if (e instanceof RunStopped) {
      throw e;
    }
    // Not taken: executing would risk a second execution by a retry, so nothing runs.
    warn('tool approval: state.set failed; the approved calls are not executed');
    refusal = refusal ?? 'The approval could not be recorded: this tool call was not executed.';
  }
  return { interaction_id: record.interaction_id, turn: record.turn, calls: record.calls, refusal, submitted: answers };
}

function shownArguments(call: ToolCall): string {
  const text = call.function.arguments?.trim() || '{}';
  return text.length > MAX_SHOWN_ARGUMENTS ? `${text.slice(0, MAX_SHOWN_ARGUMENTS)}…` : text;
}

/** The confirmation the agent asks: each call with its arguments, approve or reject. */
export function approvalRequest(
  interactionId: string,
  calls: readonly ToolCall[],
  expiresAt: number | null,
): JsonObject {
  const lines = calls.map((c) => `- ${c.function.name}(${shownArguments(c)})`).join('\n');
  const names = [...new Set(calls.map((c) => c.function.name))].join(', ');
  const title = `Approve ${calls.length === 1 ? 'tool call' : `${calls.length} tool calls`}: ${names}`;
  return {
    interaction_id: interactionId,
    kind: 'confirmation',
    title: title.length > 1000 ? `${title.slice(0, 999)}…` : title,
    description: `The assistant wants to run:\n${lines}`.slice(0, 10_000),
    fields: [],
    actions: [
      { id: APPROVE_ACTION, label: 'Approve', style: 'primary' },
      { id: REJECT_ACTION, label: 'Reject', style: 'danger' },
    ],
    expires_at: expiresAt,
    fallback_text:
      `Approval needed. The assistant wants to run:\n${lines}\nAnswer "${APPROVE_ACTION}" or "${REJECT_ACTION}".`.slice(
        0,
        20_000,
      ),
  };
}

/**
 * Asks for approval of `calls`: saves the record (the turn so far) in the conversation's state,
 * then emits the `interaction.requested` action. False when the record cannot be saved (then the
 * calls are refused instead of asked for).
 */
export async function askApproval(
  deps: {
    port: LocalAgentHostPort;
    controls: RunControls;
    emit: (r: { type: 'action.requested'; data: JsonObject }) => Promise<void>;
    runId: string;
    warn: (m: string) => void;
  },
  policy: ApprovalPolicy,
  turn: ChatMessage[],
  calls: ToolCall[],
  nowMs: number,
): Promise<boolean> {
  const interactionId = `${APPROVAL_ID_PREFIX}${deps.runId}:${calls[0].id}`.slice(0, 255);
  const expiresAt = policy.expiresIn !== null ? Math.floor(nowMs / 1000) + policy.expiresIn : null;
  const record: ApprovalRecord = {
    schema_version: APPROVAL_SCHEMA,
    interaction_id: interactionId,
    run_id: deps.runId,
    status: 'pending',
    // The host's default expiry (30 min) when the config sets none.
    expires_at: expiresAt ?? Math.floor(nowMs / 1000) + 30 * 60,
    turn,
    calls,
  };
  try {
    await deps.controls.race(deps.port.stateSet('conversation', APPROVAL_STATE_KEY, record));
  } catch (e) {
    if (e instanceof RunStopped) {
      throw e;
    }
    deps.warn(`tool approval: the turn could not be saved (${e instanceof Error ? e.message : String(e)})`);
    return false;
  }
  await deps.emit({
    type: 'action.requested',
    data: { action: 'interaction.requested', target: null, payload: approvalRequest(interactionId, calls, expiresAt) },
  });
  return true;
}

/**
 * The current part of a resumed run's context: the saved turn, the refusals when the calls do not
 * run, then the run's own message (a new message; an approval's answer has none). An approved
 * turn is not part of it: its calls have no results yet (the context's sanitizer would drop them),
 * so the loop appends the turn and executes the calls (`approvedTurn`).
 */
export function resumedMessages(resume: ApprovalResume, user: ChatMessage | null): ChatMessage[] {
  if (approvedTurn(resume)) {
    return user ? [user] : [];
  }
  const refusals: ChatMessage[] =
    resume.refusal === null
      ? []
      : resume.calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: `Error: ${resume.refusal}` }));
  return [...resume.turn.map((m) => ({ ...m })), ...refusals, ...(user ? [user] : [])];
}

/** The saved turn whose calls this run executes (an approval), or null. */
export function approvedTurn(resume: ApprovalResume | null | undefined): ChatMessage[] | null {
  return resume && resume.submitted && resume.refusal === null ? resume.turn.map((m) => ({ ...m })) : null;
}

/** The turn to save: the messages after the last user message (the assistant's calls and the results so far). */
export function currentTurn(messages: readonly ChatMessage[]): ChatMessage[] {
  let i = messages.length;
  while (i > 0 && messages[i - 1].role !== 'user') {
    i--;
  }
  return messages.slice(i).map((m) => ({ ...m }));
}
