import type { ChatMessage, LocalAgentHostPort, ToolCall, ToolDefinition, Usage } from '../host-port';
import { errorMessage, isRunDeadlineError, RunStopped, type RunControls } from '../run/controls';
import { newCallId, ToolCallAccumulator } from './tool-call-accumulator';

/*
 * One model turn with fallback (docs/local-agent.md#model-calls-and-fallback). Before the run has a
 * committed model, candidates are tried in order; the model that answers is committed and every
 * later turn uses only it. Streaming falls back only before the first visible output (non-blank
 * text, a tool call, or LP's empty final "stop"); after it a failure ends the run, since the user
 * already saw output.
 */

export class ModelCallError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    readonly deadline = false,
    override readonly cause?: unknown,
  ) {
    super(message);
    this.name = 'ModelCallError';
  }
}

export interface ModelTurn {
  model_id: string;
  message: ChatMessage;
  tool_calls: ToolCall[];
  usage: Usage | null;
  /** Visible text of this turn. */
  text: string;
}

export interface TurnRequest {
  messages: ChatMessage[];
  tools: ToolDefinition[];
}

export interface CallerDeps {
  port: LocalAgentHostPort;
  controls: RunControls;
  removeThink: boolean;
  warn: (message: string) => void;
}

/** Called with the turn's accumulated text after every visible chunk, and once with `final`. */
export type OnText = (text: string, final: boolean) => Promise<void>;

function normalizeCalls(calls: unknown): ToolCall[] {
  if (!Array.isArray(calls)) {
    return [];
  }
  return calls
    .filter((c): c is ToolCall => !!c && typeof c === 'object')
    .map((c) => ({
      ...c,
      id: typeof c.id === 'string' && c.id !== '' ? c.id : newCallId(),
      type: c.type || 'function',
      function: { name: c.function?.name ?? '', arguments: c.function?.arguments ?? '' },
    }));
}

function assistantMessage(text: string, calls: ToolCall[], fields: Record<string, unknown> | null): ChatMessage {
  const m: ChatMessage = { role: 'assistant', content: text };
  if (calls.length > 0) {
    m.tool_calls = calls;
  }
  if (fields && Object.keys(fields).length > 0) {
    m.provider_specific_fields = fields;
  }
  return m;
}

const textOf = (content: ChatMessage['content']): string =>
  typeof content === 'string'
    ? content
    : Array.isArray(content)
      ? content.map((c) => (c.type === 'text' && typeof c.text === 'string' ? c.text : '')).join('')
      : '';

function failure(deps: CallerDeps, e: unknown): ModelCallError | RunStopped | null {
  if (e instanceof RunStopped) {
    return e;
  }
  if (isRunDeadlineError(e, deps.controls)) {
    return new ModelCallError(errorMessage(e), true, true, e);
  }
  return null;
}

/** Non-streaming turn: invoke with fallback until committed, then the committed model only. */
export async function invokeTurn(
  deps: CallerDeps,
  candidates: string[],
  committed: boolean,
  req: TurnRequest,
): Promise<ModelTurn> {
  if (candidates.length === 0) {
    throw new ModelCallError('No model configured', false);
  }
  let last: unknown = null;
  for (const model_id of candidates) {
    try {
      const r = await deps.controls.race(
        deps.port.invokeModel({ model_id, messages: req.messages, tools: req.tools, remove_think: deps.removeThink }),
      );
      const raw = r?.message ?? { role: 'assistant', content: '' };
      const calls = normalizeCalls(raw.tool_calls);
      const text = textOf(raw.content);
      return {
        model_id,
        message: assistantMessage(text, calls, raw.provider_specific_fields ?? null),
        tool_calls: calls,
        usage: r?.usage ?? null,
        text,
      };
    } catch (e) {
      const stop = failure(deps, e);
      if (stop) {
        throw stop;
      }
      if (committed) {
        throw new ModelCallError(`LLM call in tool loop failed: ${errorMessage(e)}`, true, false, e);
      }
      last = e;
      deps.warn(`LLM model failed; falling back to next configured model: ${model_id}`);
    }
  }
  throw new ModelCallError(`All models failed. Last error: ${errorMessage(last)}`, true, false, last);
}

/** Streaming turn: fallback only before the first visible output; `onText` sees the turn's text. */
export async function streamTurn(
  deps: CallerDeps,
  candidates: string[],
  req: TurnRequest,
  onText: OnText,
): Promise<ModelTurn> {
  if (candidates.length === 0) {
    throw new ModelCallError('No model configured', false);
  }
  let last: unknown = null;
  for (const model_id of candidates) {
    const it = deps.port
      .streamModel({ model_id, messages: req.messages, tools: req.tools, remove_think: deps.removeThink })
      [Symbol.asyncIterator]();
    const acc = new ToolCallAccumulator();
    let text = '';
    let reasoning = '';
    let fields: Record<string, unknown> = {};
    let usage: Usage | null = null;
    let visible = false;
    let final = false;
    let done = false;
    try {
      for (;;) {
        const r = await deps.controls.race(it.next());
        if (r.done) {
          done = true;
          break;
        }
        const item = r.value;
        if (!item || typeof item !== 'object') {
          continue;
        }
        if (item.usage && typeof item.usage === 'object') {
          usage = item.usage;
        }
        const delta = typeof item.delta === 'string' ? item.delta : '';
        text += delta;
        reasoning += typeof item.reasoning_delta === 'string' ? item.reasoning_delta : '';
        acc.push(item.tool_calls);
        if (item.provider_specific_fields) {
          fields = { ...fields, ...item.provider_specific_fields };
        }
        const isFinal = item.is_final === true;
        if (isFinal) {
          final = true;
        }
        if (!visible && (text.trim() !== '' || acc.size > 0 || (isFinal && item.finish_reason === 'stop'))) {
          visible = true;
        }
        if (visible && (delta !== '' || isFinal)) {
          await onText(text, isFinal);
        }
      }
      if (!visible) {
        throw new Error(`Model ${model_id} stream ended before first chunk`);
      }
      if (!final) {
        throw new Error('the stream ended without a final chunk');
      }
      const calls = acc.result();
      const msgFields = reasoning ? { ...fields, reasoning_content: reasoning } : fields;
      return { model_id, message: assistantMessage(text, calls, msgFields), tool_calls: calls, usage, text };
    } catch (e) {
      if (!done) {
        void it.return?.()?.catch(() => undefined); // close the provider stream we stop reading
      }
      const stop = failure(deps, e);
      if (stop instanceof RunStopped) {
        throw stop;
      }
      if (visible) {
        throw stop
          ? new ModelCallError(
              `Model ${model_id} exceeded run deadline after first chunk: ${errorMessage(e)}`,
              true,
              true,
              e,
            )
          : new ModelCallError(
              `Model ${model_id} failed after first chunk (no fallback possible): ${errorMessage(e)}`,
              false,
              false,
              e,
            );
      }
      if (stop) {
        throw stop;
      }
      last = e;
      deps.warn(`LLM model failed before first chunk; falling back to next configured model: ${model_id}`);
    }
  }
  throw new ModelCallError(
    `All models failed during streaming setup. Last error: ${errorMessage(last)}`,
    true,
    false,
    last,
  );
}
