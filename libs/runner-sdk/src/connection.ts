import * as grpc from '@grpc/grpc-js';
import { decodeContext } from './context';
import type { HostApiTransport } from './host-api';
import { toStruct, type JsonObject } from './json';
import { Outbox } from './results';
import { RunDispatcher, type Logger, type RunnerDefinition } from './runner';
import type { RunnerManifest, RunResult } from './types';
import type { ConnectCall, WireHostMessage, WirePluginMessage, WireRunResult, WireWelcome } from './wire';

/*
 * One connection to the host: one RunnerGatewayService/Connect bidi stream.
 *   plugin -> host: hello (first), then results / heartbeat / pong
 *   host -> plugin: welcome, then run / cancel / ping
 * `done` resolves with the final gRPC status however the stream ends; plugin.ts reconnects.
 */

export const PROTOCOL_VERSION = '1';

export interface SessionOptions {
  token: string;
  author: string;
  plugin: string;
  version: string;
  runners: RunnerDefinition[];
  /** The runners' manifests (types.ts), and any raw ones a protocol test sends (plugin.ts `extraManifests`). */
  manifests: (RunnerManifest | JsonObject)[];
  transport: HostApiTransport;
  log: Logger;
  maxBatch?: number;
  maxFrameBytes?: number;
  onWelcome?: (welcome: WireWelcome) => void;
}

export interface SessionEnd {
  code: grpc.status;
  details: string;
  /** The host had accepted the hello: the connection worked. */
  welcomed: boolean;
}

/** A result as the gateway stream carries it (google.protobuf.Struct for data and usage). */
export function toWire(result: RunResult): WireRunResult {
  return {
    run_id: result.run_id,
    type: result.type,
    data: toStruct(result.data),
    usage: result.usage ? toStruct(result.usage) : undefined,
    sequence: result.sequence,
    timestamp: result.timestamp,
  };
}

/** One frame of results: `result` for a single one, `results` for several. */
export function frameMessage(results: RunResult[]): WirePluginMessage {
  return results.length === 1 ? { result: toWire(results[0]) } : { results: { results: results.map(toWire) } };
}

export class Session {
  readonly done: Promise<SessionEnd>;
  readonly dispatcher: RunDispatcher;
  private readonly call: ConnectCall;
  private welcomed = false;
  private closed = false;
  private heartbeat: NodeJS.Timeout | undefined;
  private drainWaiters: (() => void)[] = [];

  constructor(
    connect: (metadata: grpc.Metadata) => ConnectCall,
    private readonly options: SessionOptions,
  ) {
    const outbox = new Outbox((results) => this.write(frameMessage(results)), options.maxBatch, options.maxFrameBytes);
    this.dispatcher = new RunDispatcher(options.runners, outbox, options.transport, options.log);
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${options.token}`);
    this.call = connect(metadata);
    this.done = new Promise((resolve) => {
      // grpc-js emits 'status' last, after 'error' for a non-OK status.
      this.call.on('status', (status: grpc.StatusObject) => {
        this.shutDown('disconnected');
        resolve({ code: status.code, details: status.details, welcomed: this.welcomed });
      });
    });
    this.call.on('error', () => undefined); // reported through 'status'
    this.call.on('drain', () => this.releaseDrainWaiters());
    this.call.on('data', (message: WireHostMessage) => this.onMessage(message));
    void this.write({
      hello: {
        plugin_author: options.author,
        plugin_name: options.plugin,
        plugin_version: options.version,
        protocol_version: PROTOCOL_VERSION,
        manifests: options.manifests.map((m) => toStruct(m)),
      },
    });
  }

  /** Graceful stop: runs in flight fail (retryable), our side half-closes, the host ends the stream. */
  async stop(): Promise<void> {
    if (this.closed) {
      return;
    }
    this.dispatcher.abortAll('stopped');
    await new Promise((resolve) => setImmediate(resolve)); // the outbox flushes on the next tick
    this.shutDown('stopped');
    this.call.end();
  }

  /** Hard stop. */
  cancel(): void {
    this.call.cancel();
  }

  private onMessage(message: WireHostMessage): void {
    switch (message.msg) {
      case 'welcome':
        this.onWelcome(message.welcome);
        return;
      case 'ping':
        void this.write({ pong: { nonce: message.ping.nonce } });
        return;
      case 'run': {
        const { context } = message.run;
        if (!context || typeof context.run_id !== 'string' || context.run_id === '') {
          this.options.log('error', 'run request without context.run_id ignored', { runner_id: message.run.runner_id });
          return;
        }
        void this.dispatcher.start({ ...message.run, context: decodeContext(context) });
        return;
      }
      case 'cancel':
        this.dispatcher.cancel(message.cancel.run_id, message.cancel.reason);
        return;
    }
  }

  private onWelcome(welcome: WireWelcome): void {
    this.welcomed = true;
    for (const rejected of welcome.rejected) {
      this.options.log('warn', 'the host rejected a manifest', { ...rejected });
    }
    this.options.log('info', 'connected', { runners: welcome.runners.map((r) => r.runner_id) });
    if (welcome.heartbeat_interval_ms > 0 && !this.heartbeat) {
      this.heartbeat = setInterval(() => {
        void this.write({ heartbeat: { active_run_ids: this.dispatcher.activeRunIds() } });
      }, welcome.heartbeat_interval_ms);
      this.heartbeat.unref();
    }
    this.options.onWelcome?.(welcome);
  }

  /** Writes one message; waits for 'drain' when the stream's buffer is full. Never rejects. */
  private write(message: WirePluginMessage): Promise<void> {
    if (this.closed) {
      return Promise.resolve();
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

  private shutDown(kind: 'disconnected' | 'stopped'): void {
    if (this.closed) {
      return;
    }
    this.closed = true;
    clearInterval(this.heartbeat);
    this.dispatcher.abortAll(kind);
    this.releaseDrainWaiters();
  }
}
