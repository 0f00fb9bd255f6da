import { setTimeout as sleep } from 'node:timers/promises';
import type { HostApi } from './host-api';
import { hostApiBench, parseBenchConfig } from './host-api-bench';
import { longAnswerDelta, parseLongAnswerConfig } from './long-answer';
import type { Logger } from './log';
import { MODES, type Mode } from './manifest';
import { fromStruct, type JsonObject } from './struct';

/*
 * The runner's behaviour, independent of gRPC: turns one run request into a series of Runner
 * Protocol v1 results. Several runs can be active at once; each has its own sequence counter and
 * its own AbortController (cancel, or loss of the stream).
 */

/** One result as plain JSON; the connection encodes `data`/`usage` as Struct. */
export interface OutgoingResult {
  run_id: string;
  type: string;
  data: JsonObject;
  usage?: JsonObject;
  /** Left out: the host assigns last+1. */
  sequence?: number;
  timestamp: number;
}

export interface ResultSink {
  /** Sends one result; resolves when the stream can take more (backpressure). */
  send(result: OutgoingResult): Promise<void>;
  /** Resolves once everything sent so far has (very likely) left the process. Used before `crash`. */
  flush(): Promise<void>;
}

export interface RunInput {
  runId: string;
  text: string;
  config: JsonObject;
  /** The run's W3C trace context (RunRequest.traceparent), sent back on host-API calls. */
  traceparent?: string;
  /** The event's type (`interaction.submitted` carries `interaction`). */
  eventType?: string;
  interaction?: JsonObject | null;
}

export interface EchoRunnerOptions {
  log: Logger;
  /** What `crash` mode does after its first delta; the real process exits with code 3. */
  crash?: () => void;
  /** The host API client (mode `host_api_bench`); without it that mode fails the run. */
  hostApi?: HostApi;
}

/** Why a run was aborted: the host cancelled it, or the stream is gone (nothing more can be sent). */
type AbortReason = { kind: 'cancel'; reason: string } | { kind: 'disconnect' };

interface ActiveRun {
  mode: string;
  controller: AbortController;
}

const TERMINAL_TYPES = new Set(['run.completed', 'run.failed']);

/** Word-ish chunks that keep all whitespace, so that `chunks.join('') === text`. */
export function splitIntoChunks(text: string): string[] {
  return text.match(/\s*\S+\s*/g) ?? (text === '' ? [] : [text]);
}

export class EchoRunner {
  private readonly runs = new Map<string, ActiveRun>();

  constructor(
    private readonly sink: ResultSink,
    private readonly options: EchoRunnerOptions,
  ) {}

  /** Ids of the runs still producing results (reported in heartbeats). */
  activeRunIds(): string[] {
    return [...this.runs.keys()];
  }

  /** Runs one request to its end. Never rejects: failures are logged. */
  async start(input: RunInput): Promise<void> {
    const { log } = this.options;
    if (this.runs.has(input.runId)) {
      log('warn', 'duplicate run request ignored', { run_id: input.runId });
      return;
    }
    const mode = typeof input.config.mode === 'string' ? input.config.mode : 'echo';
    const run: ActiveRun = { mode, controller: new AbortController() };
    this.runs.set(input.runId, run);
    log('info', 'run started', { run_id: input.runId, mode });
    const emitter = new RunEmitter(input.runId, this.sink, run.controller.signal, () => this.runs.delete(input.runId));
    try {
      await this.play(mode, input, emitter);
    } catch (err) {
      const reason = run.controller.signal.reason as AbortReason | undefined;
      if (!run.controller.signal.aborted) {
        log('error', 'run crashed', { run_id: input.runId, error: String(err) });
        await emitter.terminal('run.failed', { error: `demo runner error: ${String(err)}`, code: 'runner.error' });
      } else if (reason?.kind === 'cancel') {
        await emitter.terminal('run.failed', {
          error: `cancelled: ${reason.reason}`,
          code: 'cancelled',
          retryable: false,
        });
      }
    } finally {
      if (this.runs.get(input.runId) === run) {
        this.runs.delete(input.runId);
      }
    }
    if (emitter.finished && input.config.after_terminal === true) {
      // Deliberately wrong: a result after the terminal one, which the host must drop.
      await emitter.sendAfterTerminal('message.delta', { chunk: { role: 'assistant', content: 'too late' } });
    }
    log('info', 'run ended', { run_id: input.runId, aborted: run.controller.signal.aborted });
  }

  /** The host's cancel: stops the run, which then reports `run.failed` with code `cancelled`. */
  cancel(runId: string, reason: string): void {
    const run = this.runs.get(runId);
    if (!run) {
      this.options.log('info', 'cancel for a run that is not active', { run_id: runId, reason });
      return;
    }
    if (run.mode === 'ignore_cancel') {
      this.options.log('warn', 'cancel ignored (mode ignore_cancel)', { run_id: runId, reason });
      return;
    }
    this.options.log('info', 'cancel', { run_id: runId, reason });
    run.controller.abort({ kind: 'cancel', reason } satisfies AbortReason);
  }

  /** The stream is gone: stop every run without sending anything more. */
  abortAll(): void {
    for (const run of this.runs.values()) {
      run.controller.abort({ kind: 'disconnect' } satisfies AbortReason);
    }
    this.runs.clear();
  }

  private async play(mode: string, input: RunInput, emitter: RunEmitter): Promise<void> {
    const chunks = splitIntoChunks(input.text);
    const delayMs = typeof input.config.chunk_delay_ms === 'number' ? input.config.chunk_delay_ms : 0;
    const signal = emitter.signal;
    if (!isMode(mode)) {
      await emitter.terminal('run.failed', { error: `unknown mode "${mode}"`, code: 'runner.invalid_config' });
      return;
    }
    switch (mode) {
      case 'echo':
        await streamEcho(emitter, chunks, delayMs);
        return;
      case 'unknown_type':
        await streamDeltas(emitter, chunks, delayMs);
        await emitter.send('demo.custom', { note: 'x' }); // unknown types are passed through by the host
        await finishEcho(emitter, input.text, chunks.length);
        return;
      case 'bad_payload':
        await emitter.send('message.delta', { wrong: 1 }); // invalid for a known type: the host drops it
        await streamEcho(emitter, chunks, delayMs);
        return;
      case 'bad_sequence':
        await badSequence(emitter);
        return;
      case 'fail':
        await streamDeltas(emitter, chunks.slice(0, 1), 0);
        await emitter.terminal('run.failed', {
          error: 'demo failure requested',
          code: 'runner.error',
          retryable: false,
        });
        return;
      case 'stall':
      case 'ignore_cancel':
        await streamDeltas(emitter, chunks.slice(0, 1), 0);
        await waitForAbort(signal); // `stall` ends on cancel; `ignore_cancel` only when the stream goes
        return;
      case 'crash':
        await streamDeltas(emitter, chunks.slice(0, 1), 0);
        await this.sink.flush();
        this.options.log('error', 'crashing on purpose (mode crash)', { run_id: input.runId });
        (this.options.crash ?? (() => process.exit(3)))();
        return;
      case 'host_api_bench':
        await this.hostApiBench(input, emitter);
        return;
      case 'steer':
        await this.steer(input, emitter, chunks, delayMs);
        return;
      case 'long_answer':
        await longAnswer(emitter, input.config);
        return;
      case 'interaction':
        await askOrAnswer(input, emitter);
        return;
    }
  }

  /**
   * Mode `steer`: echoes the input, then at each turn boundary pulls the follow-ups steered into
   * the run (SteeringPull, waiting up to `steer_wait_ms` for one) and echoes each as a turn of
   * its own; ends when a pull comes back empty.
   */
  private async steer(input: RunInput, emitter: RunEmitter, chunks: string[], delayMs: number): Promise<void> {
    const hostApi = this.options.hostApi;
    if (!hostApi) {
      await emitter.terminal('run.failed', {
        error: 'steer: no host API client in this runner',
        code: 'runner.invalid_config',
      });
      return;
    }
    const waitMs = typeof input.config.steer_wait_ms === 'number' ? input.config.steer_wait_ms : 1000;
    const mode = typeof input.config.steer_mode === 'string' ? input.config.steer_mode : 'all';
    let turns = 1;
    await streamDeltas(emitter, chunks, delayMs);
    await emitter.send('message.completed', { message: { role: 'assistant', content: chunks.join('') } });
    for (;;) {
      emitter.signal.throwIfAborted();
      const { items } = await hostApi.call(
        'SteeringPull',
        { run_id: input.runId, mode, wait_ms: waitMs },
        input.traceparent,
      );
      if (items.length === 0) {
        break;
      }
      for (const item of items.map(fromStruct)) {
        const given = (item.input as JsonObject | undefined)?.text;
        const text = typeof given === 'string' ? given : '';
        this.options.log('info', 'steering item', {
          run_id: input.runId,
          item_id: item.item_id,
          position: item.position,
        });
        const turn = splitIntoChunks(text);
        await streamDeltas(emitter, turn, delayMs);
        // The message says which follow-up it answers (messages are open objects).
        await emitter.send('message.completed', {
          message: { role: 'assistant', content: text, steering_item_id: item.item_id ?? null },
        });
        turns++;
      }
    }
    this.options.log('info', 'steer run done', { run_id: input.runId, turns });
    await emitter.terminal('run.completed', { finish_reason: 'stop' });
  }

  /** Calls the host API many times and reports the latency seen here (see host-api-bench.ts). */
  private async hostApiBench(input: RunInput, emitter: RunEmitter): Promise<void> {
    const config = parseBenchConfig(input.config);
    if (typeof config === 'string' || !this.options.hostApi) {
      const error = typeof config === 'string' ? config : 'no host API client in this runner';
      await emitter.terminal('run.failed', { error: `host_api_bench: ${error}`, code: 'runner.invalid_config' });
      return;
    }
    const send = (type: string, data: JsonObject) => emitter.send(type, data);
    const stats = await hostApiBench(this.options.hostApi, input.runId, config, send, emitter.signal);
    this.options.log('info', 'host api bench', {
      run_id: input.runId,
      api: stats.api,
      calls: stats.calls,
      concurrency: stats.concurrency,
      p50_us: stats.latency.p50_us,
      p99_us: stats.latency.p99_us,
      calls_per_second: stats.calls_per_second,
    });
    await emitter.terminal('run.completed', { finish_reason: 'stop' });
  }
}

/**
 * Mode `interaction` (docs/interactions.md#demo): a message asks the user through a form (its
 * expiry `interaction_expires_in` seconds, default the host's 30 min) and ends the run; the
 * `interaction.submitted` event that answers it continues the conversation with the values.
 */
async function askOrAnswer(input: RunInput, emitter: RunEmitter): Promise<void> {
  if (input.eventType === 'interaction.submitted') {
    const s = input.interaction ?? {};
    const text = `received ${JSON.stringify(s.interaction_id)}: action=${JSON.stringify(s.action_id ?? null)} values=${JSON.stringify(s.values ?? {})}`;
    await emitter.send('message.completed', { message: { role: 'assistant', content: text } });
    await emitter.terminal('run.completed', { finish_reason: 'stop' });
    return;
  }
  const expiresIn =
    typeof input.config.interaction_expires_in === 'number' ? input.config.interaction_expires_in : null;
  await emitter.send('action.requested', {
    // `action` config: another action name, which the host records and ignores.
    action: typeof input.config.action === 'string' ? input.config.action : 'interaction.requested',
    target: { ignored: true },
    payload: {
      interaction_id: typeof input.config.interaction_id === 'string' ? input.config.interaction_id : 'profile',
      kind: 'form',
      title: 'Tell me about you',
      description: `You said: ${input.text}`,
      fields: [
        { id: 'name', label: 'Name', type: 'text', required: true },
        {
          id: 'color',
          label: 'Favourite colour',
          type: 'select',
          options: [
            { value: 'red', label: 'Red' },
            { value: 'green', label: 'Green' },
          ],
        },
        { id: 'agree', label: 'I agree', type: 'boolean' },
      ],
      actions: [
        { id: 'submit', label: 'Submit', style: 'primary' },
        { id: 'cancel', label: 'Cancel', style: 'danger' },
      ],
      ...(expiresIn !== null ? { expires_at: Math.floor(Date.now() / 1000) + expiresIn } : {}),
      fallback_text: 'Please tell me your name and favourite colour (red or green).',
    },
  });
  await emitter.terminal('run.completed', { finish_reason: 'interaction_requested' });
}

function isMode(mode: string): mode is Mode {
  return (MODES as readonly string[]).includes(mode);
}

async function streamDeltas(emitter: RunEmitter, chunks: string[], delayMs: number): Promise<void> {
  let soFar = '';
  for (const [i, piece] of chunks.entries()) {
    if (i > 0 && delayMs > 0) {
      await sleep(delayMs, undefined, { signal: emitter.signal });
    }
    soFar += piece;
    await emitter.send('message.delta', {
      chunk: { role: 'assistant', content: piece, all_content: soFar, msg_sequence: i + 1 },
    });
  }
}

/** Mode `long_answer` (long-answer.ts): content-only deltas, then run.completed without a message. */
async function longAnswer(emitter: RunEmitter, config: JsonObject): Promise<void> {
  const c = parseLongAnswerConfig(config);
  if (typeof c === 'string') {
    await emitter.terminal('run.failed', { error: `long_answer: ${c}`, code: 'runner.invalid_config' });
    return;
  }
  for (let i = 0; i < c.deltas; i++) {
    await emitter.send('message.delta', {
      chunk: { role: 'assistant', content: longAnswerDelta(i, c), msg_sequence: i + 1 },
    });
  }
  await emitter.terminal('run.completed', { finish_reason: 'stop' });
}

async function finishEcho(emitter: RunEmitter, text: string, tokens: number): Promise<void> {
  await emitter.send('message.completed', { message: { role: 'assistant', content: text } });
  await emitter.terminal(
    'run.completed',
    { finish_reason: 'stop' },
    { prompt_tokens: tokens, completion_tokens: tokens, total_tokens: 2 * tokens },
  );
}

async function streamEcho(emitter: RunEmitter, chunks: string[], delayMs: number): Promise<void> {
  await streamDeltas(emitter, chunks, delayMs);
  await finishEcho(emitter, chunks.join(''), chunks.length);
}

/** Sequences 1, 1 (duplicate), 3 (gap), then three results without a sequence (host assigns last+1). */
async function badSequence(emitter: RunEmitter): Promise<void> {
  const pieces = ['one', ' two', ' three', ' four'];
  const delta = (i: number) => ({
    chunk: { role: 'assistant', content: pieces[i], all_content: pieces.slice(0, i + 1).join('') },
  });
  await emitter.send('message.delta', delta(0), { sequence: 1 });
  await emitter.send('message.delta', delta(1), { sequence: 1 });
  await emitter.send('message.delta', delta(2), { sequence: 3 });
  await emitter.send('message.delta', delta(3), { sequence: null });
  await emitter.send(
    'message.completed',
    { message: { role: 'assistant', content: pieces.join('') } },
    { sequence: null },
  );
  await emitter.terminal('run.completed', { finish_reason: 'stop' }, undefined, { sequence: null });
}

function waitForAbort(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => {
    const fail = () => reject(new Error('aborted'));
    if (signal.aborted) {
      fail();
    } else {
      signal.addEventListener('abort', fail, { once: true });
    }
  });
}

/** `sequence`: a number to send exactly that one, `null` to leave it out; default: the run's next. */
interface SendOptions {
  sequence?: number | null;
}

/** Builds the results of one run: sequence numbers from 1, timestamps, and the terminal rule. */
class RunEmitter {
  private nextSequence = 1;
  finished = false;

  constructor(
    private readonly runId: string,
    private readonly sink: ResultSink,
    readonly signal: AbortSignal,
    private readonly onTerminal: () => void,
  ) {}

  /** Sends a non-terminal result; throws once the run has been aborted, which ends its script. */
  async send(type: string, data: JsonObject, options: SendOptions = {}): Promise<void> {
    this.signal.throwIfAborted();
    await this.write(type, data, undefined, options);
  }

  /** Sends run.completed / run.failed, unless the run already ended or the stream is gone. */
  async terminal(type: string, data: JsonObject, usage?: JsonObject, options: SendOptions = {}): Promise<void> {
    const reason = this.signal.reason as AbortReason | undefined;
    if (this.finished || reason?.kind === 'disconnect' || !TERMINAL_TYPES.has(type)) {
      return;
    }
    this.finished = true;
    this.onTerminal(); // no longer active: a cancel from now on is ignored
    await this.write(type, data, usage, options);
  }

  async sendAfterTerminal(type: string, data: JsonObject): Promise<void> {
    await this.write(type, data, undefined, {});
  }

  private async write(type: string, data: JsonObject, usage: JsonObject | undefined, options: SendOptions) {
    const sequence = options.sequence === undefined ? this.nextSequence++ : (options.sequence ?? undefined);
    const timestamp = Math.floor(Date.now() / 1000);
    await this.sink.send({ run_id: this.runId, type, data, usage, sequence, timestamp });
  }
}
