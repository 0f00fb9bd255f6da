import type { Json, JsonObject } from './json';
import {
  TERMINAL_RESULT_TYPES,
  type Message,
  type MessageChunk,
  type RunResult,
  type StateScope,
  type Usage,
} from './types';

/*
 * Results of runs: per-run sequencing and the terminal rule (RunResults), and batching of the
 * results of every run into frames (Outbox). The invariants, checked by property tests in
 * results.spec.ts: a run's results carry sequence 1, 2, 3, ... in emission order; exactly one
 * terminal result, and nothing after it; results emitted in the same tick leave in one frame,
 * in emission order, never more than `maxBatch` per frame.
 */

/** Where frames go: the gRPC stream (connection.ts) or the fake host (testing/). */
export type FrameWriter = (results: RunResult[]) => Promise<void>;

export const DEFAULT_MAX_BATCH = 256;

/** Collects the results emitted in one tick and writes them as frames of at most `maxBatch`. */
export class Outbox {
  private pending: RunResult[] = [];
  private flushing: Promise<void> | null = null;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly write: FrameWriter,
    private readonly maxBatch = DEFAULT_MAX_BATCH,
  ) {
    if (!Number.isInteger(maxBatch) || maxBatch < 1) {
      throw new RangeError(`maxBatch must be an integer >= 1 (got ${maxBatch})`);
    }
  }

  /** Queues one result; resolves once the frame holding it has been written (backpressure). */
  push(result: RunResult): Promise<void> {
    this.pending.push(result);
    if (!this.flushing) {
      this.flushing = new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.flush());
    }
    return this.flushing;
  }

  /** Resolves when everything pushed so far has been written. */
  idle(): Promise<void> {
    return this.flushing ?? this.chain;
  }

  private flush(): Promise<void> {
    const results = this.pending;
    this.pending = [];
    this.flushing = null;
    for (let i = 0; i < results.length; i += this.maxBatch) {
      const frame = results.slice(i, i + this.maxBatch);
      // Frames are written one after another, in order, even when a write waits for 'drain'.
      this.chain = this.chain.then(() => this.write(frame));
    }
    return this.chain;
  }
}

export interface CompletedOptions {
  finishReason?: string;
  /** A final message, delivered with the terminal result. */
  message?: Message | string;
  usage?: Usage;
}

export interface FailedOptions {
  /** Default `runner.error`. */
  code?: string;
  retryable?: boolean;
  usage?: Usage;
}

export interface ToolCallStarted {
  id: string;
  name: string;
  parameters?: JsonObject;
}

export interface ToolCallCompleted {
  id: string;
  name: string;
  result?: JsonObject | null;
  error?: string | null;
}

function now(): number {
  return Math.floor(Date.now() / 1000);
}

function asMessage(message: Message | string): Message {
  return typeof message === 'string' ? { role: 'assistant', content: message } : message;
}

/**
 * The typed result emitters of one run. Every emitter returns a promise that resolves once the
 * result has been written (await it for backpressure, or don't); none ever rejects. Once the
 * run has ended (terminal result sent) or its connection is gone, emitters do nothing.
 */
export class RunResults {
  private sequence = 0;
  private ended = false;
  private closed = false;
  /** Text streamed by delta() since the last message: completed() turns it into a message. */
  private streamed = '';
  private chunkIndex = 0;

  constructor(
    readonly runId: string,
    private readonly outbox: Pick<Outbox, 'push'>,
  ) {}

  /** True once a terminal result was sent. */
  get finished(): boolean {
    return this.ended;
  }

  /**
   * `message.delta`. A string is one piece of assistant text (an empty one sends nothing); the SDK numbers the pieces
   * (`msg_sequence`). The whole text goes out once, in the message that ends the stream
   * (message() or completed()), not on every chunk: that would make a stream's bytes quadratic.
   */
  delta(piece: string | MessageChunk): Promise<void> {
    if (typeof piece !== 'string') {
      return this.emit('message.delta', { chunk: piece as unknown as JsonObject });
    }
    if (piece === '') {
      return Promise.resolve(); // nothing to show (a stream's closing chunk)
    }
    this.streamed += piece;
    this.chunkIndex += 1;
    return this.emit('message.delta', {
      chunk: { role: 'assistant', content: piece, msg_sequence: this.chunkIndex },
    });
  }

  /** `message.completed`: one whole message (a string is an assistant message). Ends the streamed message. */
  message(message: Message | string, usage?: Usage): Promise<void> {
    this.streamed = '';
    this.chunkIndex = 0;
    return this.emit('message.completed', { message: asMessage(message) as unknown as JsonObject }, usage);
  }

  toolCallStarted(call: ToolCallStarted): Promise<void> {
    return this.emit('tool.call.started', {
      tool_call_id: call.id,
      tool_name: call.name,
      parameters: call.parameters ?? {},
    });
  }

  toolCallCompleted(call: ToolCallCompleted): Promise<void> {
    return this.emit('tool.call.completed', {
      tool_call_id: call.id,
      tool_name: call.name,
      result: call.result ?? null,
      error: call.error ?? null,
    });
  }

  /** `state.updated`: the host persists `value` under `scope`/`key`. */
  state(scope: StateScope, key: string, value: Json): Promise<void> {
    return this.emit('state.updated', { scope, key, value });
  }

  /**
   * `run.completed` (terminal). Text streamed with delta() and not yet closed by message() is
   * sent first as its `message.completed`.
   */
  async completed(options: CompletedOptions = {}): Promise<void> {
    if (this.ended || this.closed) {
      return;
    }
    if (this.streamed !== '') {
      void this.message(this.streamed);
    }
    const data: JsonObject = { finish_reason: options.finishReason ?? 'stop' };
    if (options.message !== undefined) {
      data.message = asMessage(options.message) as unknown as JsonObject;
    }
    await this.terminal('run.completed', data, options.usage);
  }

  /** `run.failed` (terminal). */
  async failed(error: string | Error, options: FailedOptions = {}): Promise<void> {
    const text = typeof error === 'string' ? error : error.message || String(error);
    await this.terminal(
      'run.failed',
      { error: text, code: options.code ?? 'runner.error', retryable: options.retryable ?? false },
      options.usage,
    );
  }

  /** Any non-terminal result type (unknown types are passed through by the host). */
  emit(type: string, data: JsonObject, usage?: Usage): Promise<void> {
    if (TERMINAL_RESULT_TYPES.has(type)) {
      throw new TypeError(`${type} is terminal: use completed() or failed()`);
    }
    return this.write(type, data, usage);
  }

  /** No more results may be sent (the connection is gone). */
  close(): void {
    this.closed = true;
  }

  private terminal(type: string, data: JsonObject, usage: Usage | undefined): Promise<void> {
    if (this.ended || this.closed) {
      return Promise.resolve();
    }
    const written = this.write(type, data, usage);
    this.ended = true;
    return written;
  }

  private write(type: string, data: JsonObject, usage: Usage | undefined): Promise<void> {
    if (this.ended || this.closed) {
      return Promise.resolve();
    }
    this.sequence += 1;
    const result: RunResult = { run_id: this.runId, type, data, sequence: this.sequence, timestamp: now() };
    if (usage) {
      result.usage = usage;
    }
    return this.outbox.push(result);
  }
}
