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
 * in emission order, never more than `maxBatch` per frame and never more than `maxFrameBytes`
 * of protobuf per frame (the host's gRPC server refuses a larger message and the stream breaks:
 * docs/runner-sdk.md, `io`). A result that cannot fit a frame alone is never sent: its run
 * fails `runner.result_too_large` instead.
 */

/** Where frames go: the gRPC stream (connection.ts) or the fake host (testing/). */
export type FrameWriter = (results: RunResult[]) => Promise<void>;

export const DEFAULT_MAX_BATCH = 256;
/**
 * Bytes of protobuf per frame at most. The host's gRPC receive limit is the larger of
 * HOSTAPI_MAX_PAYLOAD_BYTES and STORAGE_MAX_VALUE_BYTES plus 1 MiB (11 MiB by default,
 * docs/configuration.md); 4 MiB stays well below it and far above one result the host keeps
 * (MAX_RESULT_BYTES, 1 MiB of JSON by default).
 */
export const DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024;
/** The smallest `maxFrameBytes`: room for the run.failed that replaces a result too large. */
export const MIN_MAX_FRAME_BYTES = 4096;
/** A frame's own bytes around its results: the PluginMessage field tag and its length varint. */
export const FRAME_OVERHEAD_BYTES = 6;

/** The error code of a run whose result could not fit one frame (the runner's own failure). */
export const RESULT_TOO_LARGE = 'runner.result_too_large';

// ---- protobuf sizes (google.protobuf.Struct/Value as json.ts encodes them) ----------------------

function varintBytes(n: number): number {
  if (n < 0) {
    return 10; // a negative int64 is always ten bytes
  }
  let bytes = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    bytes += 1;
  }
  return bytes;
}

/**
 * UTF-8 bytes of a string. Short ASCII strings (keys, result types, run ids, most chunks) are
 * counted here: Buffer.byteLength's call into C++ cost more than the rest of a small result's
 * measurement (docs/runner-sdk.md#performance).
 */
function utf8Bytes(text: string): number {
  if (text.length > 256) {
    return Buffer.byteLength(text);
  }
  for (let i = 0; i < text.length; i++) {
    if (text.charCodeAt(i) >= 0x80) {
      return Buffer.byteLength(text);
    }
  }
  return text.length;
}

/** A length-delimited field (tag < 16: one byte) holding `length` bytes. */
function delimited(length: number): number {
  return 1 + varintBytes(length) + length;
}

function valueBytes(json: unknown): number {
  if (typeof json === 'number') {
    return 9; // double: tag + 8 bytes
  }
  if (typeof json === 'string') {
    return delimited(utf8Bytes(json));
  }
  if (typeof json === 'boolean') {
    return 2;
  }
  if (Array.isArray(json)) {
    let list = 0;
    for (const item of json) {
      list += delimited(valueBytes(item));
    }
    return delimited(list);
  }
  if (json instanceof Date) {
    return delimited(utf8Bytes(json.toISOString()));
  }
  if (json !== null && typeof json === 'object') {
    return delimited(structBytes(json as Record<string, unknown>));
  }
  return 2; // null (and what toValue refuses: the write reports it)
}

function structBytes(object: Record<string, unknown>): number {
  let bytes = 0;
  for (const key of Object.keys(object)) {
    const value = object[key];
    if (value !== undefined) {
      bytes += delimited(delimited(utf8Bytes(key)) + delimited(valueBytes(value)));
    }
  }
  return bytes;
}

/**
 * The bytes one result takes in a frame (a RunResult field of ResultBatch or PluginMessage, tag
 * and length included), as protobuf encodes it: exact for what toStruct produces, never below.
 */
export function resultWireBytes(result: RunResult): number {
  let bytes =
    delimited(utf8Bytes(result.run_id)) + delimited(utf8Bytes(result.type)) + delimited(structBytes(result.data ?? {}));
  if (result.usage) {
    bytes += delimited(structBytes(result.usage));
  }
  if (result.sequence !== undefined) {
    bytes += 1 + varintBytes(result.sequence);
  }
  if (result.timestamp !== undefined) {
    bytes += 1 + varintBytes(result.timestamp);
  }
  return delimited(bytes);
}

/**
 * Collects the results emitted in one tick and writes them as frames of at most `maxBatch`
 * results and `maxFrameBytes` bytes. A result larger than a frame alone (RunResults never pushes
 * one) leaves in a frame of its own.
 */
export class Outbox {
  /** The results of this tick and their wire bytes (two arrays: no wrapper object per result). */
  private pending: RunResult[] = [];
  private pendingBytes: number[] = [];
  private flushing: Promise<void> | null = null;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly write: FrameWriter,
    private readonly maxBatch = DEFAULT_MAX_BATCH,
    readonly maxFrameBytes = DEFAULT_MAX_FRAME_BYTES,
  ) {
    if (!Number.isInteger(maxBatch) || maxBatch < 1) {
      throw new RangeError(`maxBatch must be an integer >= 1 (got ${maxBatch})`);
    }
    if (!Number.isInteger(maxFrameBytes) || maxFrameBytes < MIN_MAX_FRAME_BYTES) {
      throw new RangeError(`maxFrameBytes must be an integer >= ${MIN_MAX_FRAME_BYTES} (got ${maxFrameBytes})`);
    }
  }

  /**
   * Queues one result (`bytes`: its resultWireBytes, when the caller measured it already);
   * resolves once the frame holding it has been written (backpressure).
   */
  push(result: RunResult, bytes = resultWireBytes(result)): Promise<void> {
    this.pending.push(result);
    this.pendingBytes.push(bytes);
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
    const pending = this.pending;
    const pendingBytes = this.pendingBytes;
    this.pending = [];
    this.pendingBytes = [];
    this.flushing = null;
    const budget = this.maxFrameBytes - FRAME_OVERHEAD_BYTES;
    let frame: RunResult[] = [];
    let frameBytes = 0;
    const send = (results: RunResult[]) => {
      // Frames are written one after another, in order, even when a write waits for 'drain'.
      this.chain = this.chain.then(() => this.write(results));
    };
    for (let i = 0; i < pending.length; i++) {
      const result = pending[i];
      const bytes = pendingBytes[i];
      if (frame.length > 0 && (frame.length === this.maxBatch || frameBytes + bytes > budget)) {
        send(frame);
        frame = [];
        frameBytes = 0;
      }
      frame.push(result);
      frameBytes += bytes;
    }
    if (frame.length > 0) {
      send(frame);
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
 * A message or chunk as result data, as it is (no copy). Message (types.ts) types its extra fields
 * `unknown` so that a provider's message passes through whole; they are JSON by contract, and every
 * value is checked when the result is encoded for the wire (toValue in json.ts throws on what JSON
 * cannot hold). Not walked here as well: each delta would pay the walk twice
 * (docs/runner-sdk.md#performance).
 */
function messageData(message: Message): JsonObject {
  const data: object = message;
  return data as JsonObject;
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
    private readonly outbox: Pick<Outbox, 'push' | 'maxFrameBytes'>,
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
      return this.emit('message.delta', { chunk: messageData(piece) });
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
    return this.emit('message.completed', { message: messageData(asMessage(message)) }, usage);
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
      data.message = messageData(asMessage(options.message));
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
    const result: RunResult = { run_id: this.runId, type, data, sequence: this.sequence + 1, timestamp: now() };
    if (usage) {
      result.usage = usage;
    }
    const bytes = resultWireBytes(result);
    if (bytes + FRAME_OVERHEAD_BYTES > this.outbox.maxFrameBytes) {
      return this.tooLarge(type, bytes);
    }
    this.sequence += 1;
    return this.outbox.push(result, bytes);
  }

  /**
   * A result that cannot fit one gRPC frame would break the plugin's stream (and every run on
   * it): it is not sent, and the run fails `runner.result_too_large` (not retryable: the same
   * run would emit it again) with the next sequence number.
   */
  private tooLarge(type: string, bytes: number): Promise<void> {
    this.sequence += 1;
    const result: RunResult = {
      run_id: this.runId,
      type: 'run.failed',
      data: {
        error: `a ${clip(type)} result of ${bytes} bytes does not fit one gRPC frame (maxFrameBytes ${this.outbox.maxFrameBytes}); it was not sent`,
        code: RESULT_TOO_LARGE,
        retryable: false,
      },
      sequence: this.sequence,
      timestamp: now(),
    };
    this.ended = true;
    return this.outbox.push(result);
  }
}

/** A result type as quoted in an error (an author's type may be long). */
function clip(type: string): string {
  return type.length > 100 ? `${type.slice(0, 100)}…` : type;
}
