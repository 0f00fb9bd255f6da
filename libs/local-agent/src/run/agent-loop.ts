import type { AgentRunContext, ChatMessage, LocalAgentHostPort, ToolCall } from '../host-port';
import type { AgentConfig } from '../config';
import { overflowRetryBudget } from '../context/budget';
import { compactFrame, splitTurn, type UsageAnchor } from '../context/compactor';
import { buildUserMessage, stripThink } from '../context/messages';
import { invokeTurn, ModelCallError, streamTurn, type ModelTurn } from '../model/model-caller';
import { isContextOverflow } from '../model/overflow';
import { usageTotal, UsageTracker } from '../model/usage';
import {
  approvedTurn,
  askApproval,
  currentTurn,
  needsApproval,
  REFUSED,
  type ApprovalPolicy,
  type ApprovalResume,
  type Gate,
} from '../tools/approval';
import { runToolBatch, ToolBatchError, type PreparedCall } from '../tools/batch';
import type { Assembly } from './assembly';
import { errorCode, errorMessage, RunStopped, type RunControls } from './controls';
import { DeltaStream, type ResultSink } from './result-sink';

/*
 * The agent loop (docs/local-agent.md#the-loop) as a bounded state machine: model turn → tool batch → model
 * turn ..., bounded by max-tool-iterations, the deadline and cancel. Steering is pulled after
 * every tool batch and after every final answer; a run ends only after a pull returned nothing.
 */

export const ITERATION_LIMIT_TOOL_TEXT =
  'Tool call was not executed because the runner tool iteration limit was reached.';
export const ITERATION_LIMIT_TEXT = 'Tool call iteration limit reached. I stopped before calling more tools.';
/**
 * Follow-up turns one run may take for steering after final answers (the external runners' bound):
 * past it nothing more is pulled, and what is still queued stays with the host (audited as dropped).
 */
export const MAX_STEERING_FOLLOW_UPS = 256;

/** Room for what surrounds a call's arguments in its request and its tool.call.started result. */
const ARGUMENT_ENVELOPE_BYTES = 512;

export interface LoopDeps {
  port: LocalAgentHostPort;
  controls: RunControls;
  sink: ResultSink;
  context: AgentRunContext;
  config: AgentConfig;
  assembly: Assembly;
  usage: UsageTracker;
  clock: () => number;
  warn: (m: string) => void;
  /** Runs one turn (the host traces it: docs/observability.md#traces); `(n, fn) => fn(() => {})` when not traced. */
  traceTurn: TraceTurn;
  /** Tool approval (docs/interactions.md#tool-approval-local-agent): the policy, and what this run resumes. */
  approval?: { policy: ApprovalPolicy; resume: ApprovalResume | null };
}

/** What a turn reports to its trace span when its model call is done. */
export interface TurnNote {
  model?: string | null;
  inputTokens?: number | null;
  outputTokens?: number | null;
  toolCalls?: number;
}

/** Wraps a turn (number `n`, from 1) of the loop; the host's tracing passes one, otherwise it just runs it. */
export type TraceTurn = <T>(n: number, fn: (note: (n: TurnNote) => void) => Promise<T>) => Promise<T>;

/** A failure that ends the run with this code. */
class LoopFailure extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

export class AgentLoop {
  private messages: ChatMessage[];
  private committed: string | null = null;
  private iterations = 0;
  private prefix = '';
  private anchor: UsageAnchor | null = null;
  private lastAnswer: ChatMessage | null = null;
  private fresh = true;
  private followUps = 0;
  /** Calls a person approved: they run without asking again. */
  private readonly approved = new Set<string>();
  /** The run ends waiting for a person's approval. */
  private waiting = false;
  private readonly deltas: DeltaStream;

  constructor(private readonly d: LoopDeps) {
    this.messages = d.assembly.messages.map((m) => ({ ...m }));
    this.deltas = new DeltaStream(d.sink, d.clock);
  }

  /** Runs to the end; emits everything but the terminal result, which it returns (or throws RunStopped). */
  async run(): Promise<
    { ok: true; answer: ChatMessage | null; waiting?: boolean } | { ok: false; failure: LoopFailure }
  > {
    try {
      // An approved call of the resumed turn runs first, before any model turn.
      const resume = this.d.approval?.resume;
      const approved = approvedTurn(resume);
      if (resume && approved) {
        this.messages.push(...approved);
        resume.calls.forEach((c) => this.approved.add(c.id));
        if (this.iterations >= this.d.config['max-tool-iterations']) {
          await this.iterationLimit(resume.calls);
          return { ok: true, answer: this.lastAnswer };
        }
        this.iterations += 1;
        if (await this.toolBatch(resume.calls)) {
          return { ok: true, answer: null, waiting: this.waiting };
        }
      }
      for (let n = 1; ; n++) {
        const step = await this.d.traceTurn(n, (note) => this.turn(note));
        if (step.done) {
          return { ok: true, answer: step.answer, ...(this.waiting ? { waiting: true } : {}) };
        }
      }
    } catch (e) {
      if (e instanceof RunStopped) {
        throw e;
      }
      if (e instanceof LoopFailure) {
        return { ok: false, failure: e };
      }
      return { ok: false, failure: new LoopFailure(errorMessage(e) || 'Agent run failed', 'runner.error', false) };
    }
  }

  /**
   * One turn: a model round trip, then the tool calls it asked for (and the steering pull after
   * them), or the final answer (and the pull for follow-ups). `done` when the run has its answer.
   */
  private async turn(
    note: (n: TurnNote) => void,
  ): Promise<{ done: false } | { done: true; answer: ChatMessage | null }> {
    const turn = await this.modelTurn();
    note({
      model: turn.model_id,
      inputTokens: turn.usage?.prompt_tokens ?? null,
      outputTokens: turn.usage?.completion_tokens ?? null,
      toolCalls: turn.tool_calls.length,
    });
    if (turn.tool_calls.length > 0) {
      this.checkArgumentSizes(turn.tool_calls);
      this.messages.push({ ...turn.message, content: stripThink(turn.text) });
      this.prefix += turn.text;
      this.anchor = { total_tokens: usageTotal(turn.usage), message_count: this.messages.length };
      if (this.iterations >= this.d.config['max-tool-iterations']) {
        await this.iterationLimit(turn.tool_calls);
        return { done: true, answer: this.lastAnswer };
      }
      this.iterations += 1;
      if (await this.toolBatch(turn.tool_calls)) {
        return { done: true, answer: null };
      }
      return { done: false };
    }
    this.messages.push(turn.message);
    this.lastAnswer = turn.message;
    const before = this.messages.length;
    if (this.followUps < MAX_STEERING_FOLLOW_UPS && (await this.pullSteering())) {
      this.followUps += 1;
      this.anchor = { total_tokens: usageTotal(turn.usage), message_count: before };
      return { done: false }; // a follow-up arrived while answering: answer it too, with the committed model
    }
    return { done: true, answer: this.lastAnswer };
  }

  /** Appends pulled steering input as user messages; true when there was any. */
  private async pullSteering(): Promise<boolean> {
    if (!this.d.context.context?.available_apis?.steering_pull) {
      return false;
    }
    let items;
    try {
      items = await this.d.controls.race(this.d.port.steeringPull({ mode: 'all' }));
    } catch (e) {
      if (e instanceof RunStopped) {
        throw e;
      }
      return false; // denied or failed: no follow-ups this time
    }
    const messages = (items ?? []).map((it) => buildUserMessage(it?.input)).filter((m): m is ChatMessage => m !== null);
    this.messages.push(...messages);
    return messages.length > 0;
  }

  /** Compacts the flat message list before a model call (with the previous turn's usage as anchor). */
  private async compactTurn(budget = this.d.assembly.budget, anchor: UsageAnchor | null = null) {
    const frame = splitTurn(this.messages);
    return compactFrame(
      frame,
      { budget, count: this.d.assembly.counter(), summarize: this.d.assembly.summarize },
      anchor,
    );
  }

  private async modelTurn(): Promise<ModelTurn> {
    const a = this.d.assembly;
    if (a.budget.enabled && !this.fresh) {
      this.messages = (await this.compactTurn(a.budget, this.anchor)).messages;
    }
    this.fresh = false; // the first turn's context is the assembly's, compacted already
    this.anchor = null;
    const candidates = this.committed ? [this.committed] : a.modelIds;
    const deps = {
      port: this.d.port,
      controls: this.d.controls,
      removeThink: this.d.config['remove-think'],
      warn: this.d.warn,
    };
    let retried = false;
    for (;;) {
      let visible = false;
      try {
        const req = { messages: this.messages, tools: a.tools };
        let turn: ModelTurn;
        if (a.streaming) {
          this.deltas.startTurn(this.prefix);
          turn = await streamTurn(deps, candidates, req, async (text, final) => {
            visible = true;
            await this.deltas.update(this.prefix + text, final);
          });
        } else {
          turn = await invokeTurn(deps, candidates, this.committed !== null, req);
        }
        this.committed = turn.model_id;
        this.d.usage.record(turn.usage);
        return turn;
      } catch (e) {
        if (!(e instanceof ModelCallError)) {
          throw e;
        }
        if (!e.deadline && !visible && !retried && a.budget.enabled && isContextOverflow(e)) {
          retried = true;
          const r = await this.compactTurn(overflowRetryBudget(a.budget));
          if (r.compacted && r.tokens_after < r.tokens_before) {
            this.messages = r.messages;
            continue; // exactly one retry, same candidates, no new turn
          }
        }
        if (!e.deadline && errorCode(e.cause) === 'payload_too_large') {
          // The host refused the request for its size: the same conversation fails the same way.
          throw new LoopFailure(
            `the model request is larger than the host API accepts: ${e.message}`,
            'runner.request_too_large',
            false,
          );
        }
        throw e.deadline
          ? new LoopFailure(e.message, 'runner.timeout', true)
          : new LoopFailure(e.message, 'runner.llm_error', e.retryable);
      }
    }
  }

  /**
   * Tool calls whose arguments the host cannot take (the tool.call request or the
   * tool.call.started result would exceed its limits) are not made: the run fails, not retryable
   * (the next model request would carry the same arguments), naming the tool and the sizes.
   */
  private checkArgumentSizes(calls: ToolCall[]): void {
    const limits = this.d.port.limits;
    if (!limits) {
      return;
    }
    const max = Math.min(limits.max_request_bytes, limits.max_result_bytes) - ARGUMENT_ENVELOPE_BYTES;
    for (const call of calls) {
      const bytes = Buffer.byteLength(call.function.arguments ?? '');
      if (bytes > max) {
        throw new LoopFailure(
          `the model called tool '${call.function.name}' with ${bytes} bytes of arguments; ` +
            `the host takes at most ${max} bytes of tool-call arguments: the call was not made`,
          'runner.tool_arguments_too_large',
          false,
        );
      }
    }
  }

  /** One batch; true when every outcome asked to terminate the run. */
  private async toolBatch(calls: ToolCall[]): Promise<boolean> {
    const a = this.d.assembly;
    let outcomes;
    try {
      outcomes = await runToolBatch(
        {
          port: this.d.port,
          controls: this.d.controls,
          emit: (r) => this.d.sink.emit(r),
          maxChars: this.d.config['max-tool-result-chars'],
          mode: this.d.config['tool-execution-mode'],
          localTools: a.localTools,
          allowed: a.tools.map((t) => t.function.name),
          hostTools: a.hostTools,
          gate: (call) => this.gate(call),
        },
        calls,
      );
    } catch (e) {
      if (e instanceof ToolBatchError) {
        throw e.deadline
          ? new LoopFailure(e.message, 'runner.timeout', true)
          : new LoopFailure(e.message, 'runner.tool_error', false);
      }
      if (e instanceof RunStopped) {
        throw e;
      }
      throw new LoopFailure(errorMessage(e), 'runner.tool_error', false);
    }
    const asked = outcomes.filter((o) => o.awaiting);
    this.messages.push(...outcomes.filter((o) => !o.awaiting).map((o) => o.message));
    if (asked.length > 0) {
      const toAsk = calls.filter((c) => asked.some((o) => o.call.id === c.id));
      if (await this.askApproval(toAsk)) {
        return true; // the run ends here; the answer starts the next one
      }
      this.messages.push(
        ...toAsk.map((c) => ({ role: 'tool', tool_call_id: c.id, content: `Error: ${REFUSED.cannotAsk}` })),
      );
    }
    if (outcomes.length > 0 && outcomes.every((o) => o.terminate)) {
      // Not pulled: queued follow-ups stay with the host (audited as dropped) instead of being
      // consumed and never answered, as the reference does.
      return true;
    }
    await this.pullSteering();
    return false;
  }

  /** Tool approval: approved calls run; calls of tools needing approval are asked for (or refused when this run cannot ask). */
  private gate(call: PreparedCall): Gate {
    const approval = this.d.approval;
    if (!approval || this.approved.has(call.id)) {
      return { run: true };
    }
    if (!needsApproval(approval.policy, call.name, this.d.context.resources?.tools ?? [])) {
      return { run: true };
    }
    const canAsk = this.d.port.interactions === true && this.d.context.context?.available_apis?.state === true;
    return canAsk ? { run: false, ask: true } : { run: false, ask: false, refusal: REFUSED.cannotAsk };
  }

  /** Saves the turn and asks; true when asked (the run then ends waiting). */
  private async askApproval(calls: ToolCall[]): Promise<boolean> {
    const asked = await askApproval(
      {
        port: this.d.port,
        controls: this.d.controls,
        emit: (r) => this.d.sink.emit(r),
        runId: this.d.context.run_id,
        warn: this.d.warn,
      },
      this.d.approval!.policy,
      currentTurn(this.messages),
      calls,
      this.d.clock(),
    );
    this.waiting = asked;
    return asked;
  }

  /** The limit is reached while the model still wants tools: tell it why, answer with a notice, end cleanly. */
  private async iterationLimit(calls: ToolCall[]): Promise<void> {
    for (const c of calls) {
      this.messages.push({ role: 'tool', tool_call_id: c.id, content: ITERATION_LIMIT_TOOL_TEXT });
    }
    const notice: ChatMessage = { role: 'assistant', content: ITERATION_LIMIT_TEXT };
    this.messages.push(notice);
    this.lastAnswer = notice;
    if (this.d.assembly.streaming) {
      this.deltas.startTurn('');
      await this.deltas.update(ITERATION_LIMIT_TEXT, true);
    }
  }
}
