import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from './log';
import type { JsonObject } from './struct';

/*
 * The floor runner's behaviour (bench/dispatch --runner raw), independent of gRPC: mode `echo`
 * only, as the demo runner (apps/demo-runner) answers it — one `message.delta` per word (its
 * `content` and `msg_sequence`), `message.completed`, `run.completed` with usage — with
 * `chunk_delay_ms` between deltas, and `run.failed {code: cancelled}` on the host's cancel.
 * Each result is awaited (one frame per tick, results of runs of the same tick batched).
 */

/** One result as plain JSON; the connection encodes `data`/`usage` as Struct. */
export interface OutgoingResult {
  run_id: string;
  type: string;
  data: JsonObject;
  usage?: JsonObject;
  sequence: number;
  timestamp: number;
}

export interface ResultSink {
  /** Sends one result; resolves when the stream can take more (backpressure). */
  send(result: OutgoingResult): Promise<void>;
}

export interface RunInput {
  runId: string;
  text: string;
  config: JsonObject;
}

/** Why a run was aborted: the host cancelled it, or the stream is gone (nothing more can be sent). */
type AbortReason = { kind: 'cancel'; reason: string } | { kind: 'disconnect' };

/** Word-ish chunks that keep all whitespace, so that `chunks.join('') === text`. */
export function splitIntoChunks(text: string): string[] {
  return text.match(/\s*\S+\s*/g) ?? (text === '' ? [] : [text]);
}

export class EchoRunner {
  private readonly runs = new Map<string, AbortController>();

  constructor(
    private readonly sink: ResultSink,
    private readonly log: Logger,
  ) {}

  /** Ids of the runs still producing results (reported in heartbeats). */
  activeRunIds(): string[] {
    return [...this.runs.keys()];
  }

  /** Runs one request to its end. Never rejects: failures are logged. */
  async start(input: RunInput): Promise<void> {
    if (this.runs.has(input.runId)) {
      this.log('warn', 'duplicate run request ignored', { run_id: input.runId });
      return;
    }
    const controller = new AbortController();
    this.runs.set(input.runId, controller);
    let sequence = 0;
    const send = async (type: string, data: JsonObject, usage?: JsonObject) => {
      sequence += 1;
      await this.sink.send({
        run_id: input.runId,
        type,
        data,
        usage,
        sequence,
        timestamp: Math.floor(Date.now() / 1000),
      });
    };
    const mode = input.config.mode ?? 'echo';
    const delayMs = typeof input.config.chunk_delay_ms === 'number' ? input.config.chunk_delay_ms : 0;
    try {
      if (mode !== 'echo') {
        await send('run.failed', {
          error: `the raw floor runner has mode "echo" only, not ${JSON.stringify(mode)}`,
          code: 'runner.invalid_config',
        });
        return;
      }
      const chunks = splitIntoChunks(input.text);
      for (const [i, piece] of chunks.entries()) {
        if (i > 0 && delayMs > 0) {
          await sleep(delayMs, undefined, { signal: controller.signal });
        }
        controller.signal.throwIfAborted();
        await send('message.delta', { chunk: { role: 'assistant', content: piece, msg_sequence: i + 1 } });
      }
      controller.signal.throwIfAborted();
      const n = chunks.length;
      await send('message.completed', { message: { role: 'assistant', content: chunks.join('') } });
      this.runs.delete(input.runId);
      await send(
        'run.completed',
        { finish_reason: 'stop' },
        { prompt_tokens: n, completion_tokens: n, total_tokens: 2 * n },
      );
    } catch (err) {
      const reason = controller.signal.reason as AbortReason | undefined;
      if (!controller.signal.aborted) {
        this.log('error', 'run crashed', { run_id: input.runId, error: String(err) });
        await send('run.failed', { error: `raw runner error: ${String(err)}`, code: 'runner.error' });
      } else if (reason?.kind === 'cancel') {
        await send('run.failed', { error: `cancelled: ${reason.reason}`, code: 'cancelled', retryable: false });
      }
    } finally {
      if (this.runs.get(input.runId) === controller) {
        this.runs.delete(input.runId);
      }
    }
  }

  /** The host's cancel: stops the run, which then reports `run.failed` with code `cancelled`. */
  cancel(runId: string, reason: string): void {
    this.runs.get(runId)?.abort({ kind: 'cancel', reason } satisfies AbortReason);
  }

  /** The stream is gone: stop every run without sending anything more. */
  abortAll(): void {
    for (const controller of this.runs.values()) {
      controller.abort({ kind: 'disconnect' } satisfies AbortReason);
    }
    this.runs.clear();
  }
}
