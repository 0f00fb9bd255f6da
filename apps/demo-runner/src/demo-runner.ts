import { setTimeout as sleep } from 'node:timers/promises';
import {
  defineRunner,
  HostApiError,
  type JsonObject,
  type Logger,
  type RunContext,
  type RunIO,
  type RunnerDefinition,
} from '@runner-host/runner-sdk';
import { protocolFaults } from '@runner-host/runner-sdk/testing';
import { hostApiBench, parseBenchConfig } from './host-api-bench';
import { longAnswerDelta, parseLongAnswerConfig } from './long-answer';
import { demoManifest, MODES, type Mode } from './manifest';

/*
 * The demo runner's behaviour on libs/runner-sdk: one `run(ctx, io)` handler whose config `mode`
 * picks a script (apps/demo-runner/README.md has the table). The SDK does the protocol work —
 * sequencing, batching, one terminal result, cancel (`io.signal`, then `run.failed {code:
 * cancelled}`), steering pulls, the host API. The fault modes that must break those rules
 * (`bad_sequence`, `after_terminal`, `ignore_cancel`) go through the SDK's protocol fault hooks
 * (docs/runner-sdk.md#protocol-fault-hooks), nowhere else.
 */

export interface DemoRunnerOptions {
  log: Logger;
  /** DEMO_STEERING=1: the manifest declares `capabilities.steering`. */
  steering?: boolean;
  /** DEMO_LOG_RUNS=1: one `run executing` log line per run handed to the runner (tests count executions). */
  logRuns?: boolean;
  /** What `crash` mode does after its first delta has left; the real process exits with code 3. */
  crash?: () => void;
  /** How long `crash` waits for its delta to reach the socket before crashing (ms, default 200). */
  crashGraceMs?: number;
}

/** Word-ish chunks that keep all whitespace, so that `chunks.join('') === text`. */
export function splitIntoChunks(text: string): string[] {
  return text.match(/\s*\S+\s*/g) ?? (text === '' ? [] : [text]);
}

function isMode(mode: string): mode is Mode {
  return (MODES as readonly string[]).includes(mode);
}

const num = (value: unknown, fallback: number): number => (typeof value === 'number' ? value : fallback);
const str = (value: unknown, fallback: string): string => (typeof value === 'string' ? value : fallback);

export function demoRunner(options: DemoRunnerOptions): RunnerDefinition {
  const { log } = options;
  return defineRunner({
    name: 'default',
    ...demoManifest({ steering: options.steering }),
    async run(ctx, io) {
      const mode = str(ctx.config.mode, 'echo');
      if (options.logRuns) {
        log('info', 'run executing', { run_id: io.runId });
      }
      try {
        await play(mode, ctx, io, options);
      } catch (err) {
        if (io.signal.aborted) {
          return; // cancelled, past the deadline or disconnected: the SDK has answered for the run
        }
        if (err instanceof HostApiError) {
          throw err; // the SDK reports it (its code), or `cancelled` when the host is cancelling the run
        }
        log('error', 'run crashed', { run_id: io.runId, error: String(err) });
        await io.failed(`demo runner error: ${String(err)}`, { code: 'runner.error' });
        return;
      }
      if (ctx.config.after_terminal === true && !io.signal.aborted) {
        // Deliberately wrong: a result after the terminal one, which the host must drop.
        await protocolFaults(io).sendRaw({
          type: 'message.delta',
          data: { chunk: { role: 'assistant', content: 'too late' } },
        });
      }
    },
  });
}

async function play(mode: string, ctx: RunContext, io: RunIO, options: DemoRunnerOptions): Promise<void> {
  const text = ctx.input?.text ?? '';
  const chunks = splitIntoChunks(text);
  const delayMs = num(ctx.config.chunk_delay_ms, 0);
  const cumulative = ctx.config.cumulative === true;
  if (!isMode(mode)) {
    await io.failed(`unknown mode "${mode}"`, { code: 'runner.invalid_config' });
    return;
  }
  switch (mode) {
    case 'echo':
      await streamDeltas(io, chunks, delayMs, cumulative);
      await finishEcho(io, text, chunks.length);
      return;
    case 'unknown_type':
      await streamDeltas(io, chunks, delayMs, cumulative);
      await io.emit('demo.custom', { note: 'x' }); // unknown types are passed through by the host
      await finishEcho(io, text, chunks.length);
      return;
    case 'bad_payload':
      await io.emit('message.delta', { wrong: 1 }); // invalid for a known type: the host drops it
      await streamDeltas(io, chunks, delayMs, cumulative);
      await finishEcho(io, text, chunks.length);
      return;
    case 'bad_sequence':
      await badSequence(io);
      return;
    case 'fail':
      await streamDeltas(io, chunks.slice(0, 1), 0);
      await io.failed('demo failure requested', { code: 'runner.error', retryable: false });
      return;
    case 'ignore_cancel':
      protocolFaults(io).ignoreCancel();
      options.log('info', 'cancel and deadline will be ignored (mode ignore_cancel)', { run_id: io.runId });
      await streamDeltas(io, chunks.slice(0, 1), 0);
      await aborted(io.signal); // only a lost stream (or the runner stopping) ends it
      return;
    case 'stall':
      await streamDeltas(io, chunks.slice(0, 1), 0);
      await aborted(io.signal); // ends on cancel (the SDK answers it) or the deadline
      return;
    case 'crash':
      await streamDeltas(io, chunks.slice(0, 1), 0);
      // The write has been handed to grpc-js; give HTTP/2 a moment to put it on the socket.
      await sleep(options.crashGraceMs ?? 200);
      options.log('error', 'crashing on purpose (mode crash)', { run_id: io.runId });
      (options.crash ?? (() => process.exit(3)))();
      await aborted(io.signal); // a crash hook that returns (tests) leaves the run open, as a crash does
      return;
    case 'host_api_bench':
      await benchHostApi(ctx, io, options.log);
      return;
    case 'steer':
      await steer(ctx, io, delayMs, options.log);
      return;
    case 'long_answer':
      await longAnswer(io, ctx.config);
      return;
    case 'interaction':
      await askOrAnswer(ctx, io);
      return;
  }
}

/**
 * One `message.delta` per chunk: its text (`content`) and `msg_sequence`, without `all_content`.
 * The host and every reader append `content` (docs/protocol.md#the-text-of-a-message), and the
 * `message.completed` that follows carries the whole text once; `all_content` on every delta would
 * make an answer of L characters O(L²) bytes to send and to parse. Config `cumulative: true` sends
 * it on every delta all the same, as a cumulative runner does, for tests of the host's handling of
 * one (docs/durability.md#cumulative-deltas). Each delta is awaited (backpressure): the SDK's frames
 * are bounded in results, not bytes, and a cumulative delta grows with the text.
 */
async function streamDeltas(io: RunIO, chunks: string[], delayMs: number, cumulative = false): Promise<void> {
  let soFar = '';
  for (const [i, piece] of chunks.entries()) {
    if (i > 0 && delayMs > 0) {
      await sleep(delayMs, undefined, { signal: io.signal });
    }
    if (cumulative) {
      soFar += piece;
      await io.delta({ role: 'assistant', content: piece, all_content: soFar, msg_sequence: i + 1 });
    } else {
      await io.delta({ role: 'assistant', content: piece, msg_sequence: i + 1 });
    }
  }
}

async function finishEcho(io: RunIO, text: string, tokens: number): Promise<void> {
  void io.message({ role: 'assistant', content: text });
  await io.completed({
    finishReason: 'stop',
    usage: { prompt_tokens: tokens, completion_tokens: tokens, total_tokens: 2 * tokens },
  });
}

/** Sequences 1, 1 (duplicate), 3 (gap), then three results without a sequence (the host assigns last+1). */
async function badSequence(io: RunIO): Promise<void> {
  const faults = protocolFaults(io);
  const pieces = ['one', ' two', ' three', ' four'];
  const delta = (i: number): JsonObject => ({
    chunk: { role: 'assistant', content: pieces[i], all_content: pieces.slice(0, i + 1).join('') },
  });
  await faults.sendRaw({ type: 'message.delta', data: delta(0), sequence: 1 });
  await faults.sendRaw({ type: 'message.delta', data: delta(1), sequence: 1 });
  await faults.sendRaw({ type: 'message.delta', data: delta(2), sequence: 3 });
  await faults.sendRaw({ type: 'message.delta', data: delta(3), sequence: null });
  await faults.sendRaw({
    type: 'message.completed',
    data: { message: { role: 'assistant', content: pieces.join('') } },
    sequence: null,
  });
  await faults.sendRaw({ type: 'run.completed', data: { finish_reason: 'stop' }, sequence: null });
}

/**
 * Mode `steer`: echoes the input, then at each turn boundary pulls the follow-ups steered into
 * the run (io.turns: SteeringPull waiting up to `steer_wait_ms`, mode `steer_mode`) and echoes
 * each as a turn of its own; ends when a pull comes back empty (or at once when the run may not
 * pull: the SDK's fallback to one turn).
 */
async function steer(ctx: RunContext, io: RunIO, delayMs: number, log: Logger): Promise<void> {
  const waitMs = num(ctx.config.steer_wait_ms, 1000);
  const mode = str(ctx.config.steer_mode, 'all') as 'all' | 'one';
  let turns = 0;
  for await (const turn of io.turns({ waitMs, mode })) {
    if (turn.item) {
      log('info', 'steering item', { run_id: io.runId, item_id: turn.item.item_id, position: turn.item.position });
    }
    const chunks = splitIntoChunks(turn.text);
    await streamDeltas(io, chunks, delayMs, ctx.config.cumulative === true);
    // A follow-up's message says which one it answers (messages are open objects).
    await io.message({
      role: 'assistant',
      content: turn.text,
      ...(turn.item ? { steering_item_id: turn.item.item_id ?? null } : {}),
    });
    turns++;
  }
  log('info', 'steer run done', { run_id: io.runId, turns });
  await io.completed({ finishReason: 'stop' });
}

/** Calls the host API many times and reports the latency seen here (host-api-bench.ts). */
async function benchHostApi(ctx: RunContext, io: RunIO, log: Logger): Promise<void> {
  const config = parseBenchConfig(ctx.config);
  if (typeof config === 'string') {
    await io.failed(`host_api_bench: ${config}`, { code: 'runner.invalid_config' });
    return;
  }
  const stats = await hostApiBench(io.host, config, (type, data) => io.emit(type, data), io.signal);
  log('info', 'host api bench', {
    run_id: io.runId,
    api: stats.api,
    calls: stats.calls,
    concurrency: stats.concurrency,
    p50_us: stats.latency.p50_us,
    p99_us: stats.latency.p99_us,
    calls_per_second: stats.calls_per_second,
  });
  await io.completed({ finishReason: 'stop' });
}

/** Mode `long_answer` (long-answer.ts): content-only deltas, then run.completed without a message. */
async function longAnswer(io: RunIO, config: JsonObject): Promise<void> {
  const c = parseLongAnswerConfig(config);
  if (typeof c === 'string') {
    await io.failed(`long_answer: ${c}`, { code: 'runner.invalid_config' });
    return;
  }
  for (let i = 0; i < c.deltas && !io.signal.aborted; i++) {
    // A chunk object, not a string: the SDK then keeps no copy of the text for a closing message.
    await io.delta({ role: 'assistant', content: longAnswerDelta(i, c), msg_sequence: i + 1 });
  }
  await io.completed({ finishReason: 'stop' });
}

/**
 * Mode `interaction` (docs/interactions.md#demo): a message asks the user through a form (its
 * expiry `interaction_expires_in` seconds, default the host's 30 min) and ends the run; the
 * `interaction.submitted` event that answers it continues the conversation with the values.
 */
async function askOrAnswer(ctx: RunContext, io: RunIO): Promise<void> {
  const config = ctx.config;
  if (ctx.event?.event_type === 'interaction.submitted') {
    const s = ctx.input?.interaction ?? {};
    const text = `received ${JSON.stringify(s.interaction_id)}: action=${JSON.stringify(s.action_id ?? null)} values=${JSON.stringify(s.values ?? {})}`;
    void io.message({ role: 'assistant', content: text });
    await io.completed({ finishReason: 'stop' });
    return;
  }
  const expiresIn = typeof config.interaction_expires_in === 'number' ? config.interaction_expires_in : null;
  void io.emit('action.requested', {
    // `action` config: another action name, which the host records and ignores.
    action: str(config.action, 'interaction.requested'),
    target: { ignored: true },
    payload: {
      interaction_id: str(config.interaction_id, 'profile'),
      kind: 'form',
      title: 'Tell me about you',
      description: `You said: ${ctx.input?.text ?? ''}`,
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
  await io.completed({ finishReason: 'interaction_requested' });
}

/** Resolves when the signal fires (a stalled run's wait). */
function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
    } else {
      signal.addEventListener('abort', () => resolve(), { once: true });
    }
  });
}
