import * as grpc from '@grpc/grpc-js';
import { EchoRunner, type OutgoingResult, type ResultSink } from './echo-runner';
import type { Logger } from './log';
import type { ConnectCall, GatewayClient, HostMessage, PluginMessage, RunRequest, RunResult, Welcome } from './proto';
import { fromStruct, toStruct, type JsonObject } from './struct';

/*
 * One connection to the host: a single RunnerGatewayService/Connect bidi stream.
 *
 *   plugin -> host: hello (first), then result / heartbeat / pong, interleaved for all runs
 *   host -> plugin: welcome, then run / cancel / ping
 *
 * The session ends when the host closes the stream or it breaks; `done` then resolves with the
 * gRPC status, and main.ts decides whether to reconnect. This is the demo runner's former raw
 * grpc-js connection, kept as bench/dispatch's floor (bench/dispatch/README.md).
 */

export const PLUGIN_VERSION = '0.1.0';
export const PROTOCOL_VERSION = '1';

export interface SessionOptions {
  token: string;
  author: string;
  plugin: string;
  /** Runner Protocol v1 manifests as JSON (sent as Struct in hello). */
  manifests: JsonObject[];
  log: Logger;
}

export interface SessionEnd {
  code: grpc.status;
  details: string;
  /** True when the host had accepted the hello, i.e. the connection worked. */
  welcomed: boolean;
}

export class Session implements ResultSink {
  /** Resolves when the stream has ended, however it ended. */
  readonly done: Promise<SessionEnd>;
  private readonly call: ConnectCall;
  private readonly runner: EchoRunner;
  private readonly log: Logger;
  private welcomed = false;
  private closed = false;
  private heartbeat: NodeJS.Timeout | undefined;
  private drainWaiters: (() => void)[] = [];

  constructor(client: GatewayClient, options: SessionOptions) {
    this.log = options.log;
    this.runner = new EchoRunner(this, options.log);

    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${options.token}`);
    this.call = client.Connect(metadata);

    this.done = new Promise((resolve) => {
      // grpc-js always emits 'status' last (after 'error' for a non-OK status).
      this.call.on('status', (status: grpc.StatusObject) => {
        this.shutDown();
        resolve({ code: status.code, details: status.details, welcomed: this.welcomed });
      });
    });
    this.call.on('error', () => undefined); // reported through 'status'
    this.call.on('drain', () => this.releaseDrainWaiters());
    this.call.on('data', (message: HostMessage) => this.onMessage(message));

    // The first message must be hello.
    void this.write({
      hello: {
        plugin_author: options.author,
        plugin_name: options.plugin,
        plugin_version: PLUGIN_VERSION,
        protocol_version: PROTOCOL_VERSION,
        manifests: options.manifests.map((manifest) => toStruct(manifest)),
      },
    });
  }

  /** Graceful stop: no more results, half-close our side; the host then ends the stream. */
  stop(): void {
    if (!this.closed) {
      this.shutDown();
      this.call.end();
    }
  }

  /** Hard stop (when the host does not end the stream after stop()). */
  cancel(): void {
    this.call.cancel();
  }

  // ---- ResultSink: what EchoRunner writes through -------------------------------------------

  /**
   * Results sent in the same tick go out as one frame (`results`), a single one as `result`:
   * under load the host handles fewer, larger messages.
   */
  send(result: OutgoingResult): Promise<void> {
    const wire: RunResult = {
      run_id: result.run_id,
      type: result.type,
      data: toStruct(result.data),
      usage: result.usage ? toStruct(result.usage) : undefined,
      sequence: result.sequence,
      timestamp: result.timestamp,
    };
    if (!this.outbox) {
      const batch: RunResult[] = [];
      const written = new Promise<void>((resolve) =>
        setImmediate(() => {
          this.outbox = null;
          const frame: PluginMessage = batch.length === 1 ? { result: batch[0] } : { results: { results: batch } };
          void this.write(frame).then(resolve);
        }),
      );
      this.outbox = { batch, written };
    }
    this.outbox.batch.push(wire);
    return this.outbox.written;
  }

  private outbox: { batch: RunResult[]; written: Promise<void> } | null = null;

  // ---- Host messages -------------------------------------------------------------------------

  private onMessage(message: HostMessage): void {
    switch (message.msg) {
      case 'welcome':
        this.onWelcome(message.welcome);
        return;
      case 'ping':
        void this.write({ pong: { nonce: message.ping.nonce } });
        return;
      case 'run':
        this.onRun(message.run);
        return;
      case 'cancel':
        this.runner.cancel(message.cancel.run_id, message.cancel.reason);
        return;
    }
  }

  private onWelcome(welcome: Welcome): void {
    this.welcomed = true;
    this.log('info', 'welcome', {
      session_id: welcome.session_id,
      host_version: welcome.host_version,
      runners: welcome.runners,
      rejected: welcome.rejected,
    });
    for (const rejected of welcome.rejected) {
      this.log('warn', 'manifest rejected', { ...rejected });
    }
    // The line to wait for (README, Quick start): the host accepted the plugin and its runners.
    this.log('info', 'connected', { runners: welcome.runners.map((r) => r.runner_id) });
    if (welcome.heartbeat_interval_ms > 0 && !this.heartbeat) {
      this.heartbeat = setInterval(() => {
        void this.write({ heartbeat: { active_run_ids: this.runner.activeRunIds() } });
      }, welcome.heartbeat_interval_ms);
    }
  }

  private onRun(request: RunRequest): void {
    const context = request.context;
    if (!context?.run_id) {
      this.log('error', 'run request without context.run_id ignored', { runner_id: request.runner_id });
      return;
    }
    void this.runner.start({
      runId: context.run_id,
      text: context.input?.text ?? '',
      config: fromStruct(context.config),
    });
  }

  // ---- Writing -------------------------------------------------------------------------------

  /** Writes one message; waits for 'drain' when the stream buffer is full. Never rejects. */
  private write(message: PluginMessage): Promise<void> {
    if (this.closed) {
      return Promise.resolve(); // the stream is gone (or we are stopping): drop it
    }
    if (this.call.write(message)) {
      return Promise.resolve();
    }
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private releaseDrainWaiters(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    waiters.forEach((resolve) => resolve());
  }

  /** No more writes: stops the heartbeat and every run, and wakes up blocked writers. */
  private shutDown(): void {
    this.closed = true;
    clearInterval(this.heartbeat);
    this.runner.abortAll();
    this.releaseDrainWaiters();
  }
}
