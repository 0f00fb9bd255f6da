import { Injectable, Logger } from '@nestjs/common';
import { Subscription } from 'rxjs';
import type { RunnerCommand, RunnerManifest, RunnerResult } from '@libs/protocol';
import { telemetry } from '@libs/telemetry';

export interface ConnectedRunner {
  runner_id: string;
  name: string;
  manifest: RunnerManifest;
}

/** One live Connect stream of a plugin. */
export interface RunnerSession {
  readonly session_id: string;
  readonly plugin_id: string;
  readonly connected_at: number;
  last_seen_at: number;
  readonly runners: ConnectedRunner[];
  /** A run or a cancel for one of its runners (converted to the wire by the session's transport). */
  send(command: RunnerCommand): void;
  /** Ends the stream from the host side. */
  close(reason: string): void;
}

/** A session attached or detached (runner presence listens: docs/scale-out.md#runner-presence). */
export type ConnectionChange = { kind: 'attached' | 'detached'; session: RunnerSession };

export type InboundEvent =
  | { kind: 'result'; session: RunnerSession; result: RunnerResult }
  | { kind: 'disconnected'; session: RunnerSession; reason: string };

/**
 * Results and disconnects, for the run lifecycle to consume: each event is a plain call of each
 * listener, in order (one per result of every run: no rxjs Subject and subscriber chain per event,
 * docs/benchmarks.md#the-runner-connect-stream-on-grpc-js-directly-round-11-wt-connect). A
 * listener that throws is logged and the others still hear the event.
 */
export class InboundEvents {
  /** Its failures are logged as the connections' own (it is their `inbound$`). */
  private readonly logger = new Logger('RunnerConnections');
  private listeners: ((event: InboundEvent) => void)[] = [];

  /** Told of every event from now on, until the subscription is unsubscribed. */
  subscribe(listener: (event: InboundEvent) => void): Subscription {
    this.listeners = [...this.listeners, listener];
    return new Subscription(() => {
      this.listeners = this.listeners.filter((l) => l !== listener);
    });
  }

  next(event: InboundEvent): void {
    // The array is replaced, never changed, on (un)subscribe: a listener added during an event
    // hears the next one.
    const listeners = this.listeners;
    for (let i = 0; i < listeners.length; i++) {
      try {
        listeners[i](event);
      } catch (e) {
        this.logger.error(`inbound listener failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      }
    }
  }
}

/**
 * The live plugin connections and the runners they serve. One connection per plugin: a new
 * connection of the same plugin replaces the old one (whose active runs then fail as
 * `runner.disconnected`), so a plugin that restarts takes over at once.
 */
@Injectable()
export class RunnerConnections {
  private readonly logger = new Logger(RunnerConnections.name);
  private readonly byPlugin = new Map<string, RunnerSession>();
  private readonly byRunner = new Map<string, { session: RunnerSession; runner: ConnectedRunner }>();
  /** Results and disconnects, for the run lifecycle to consume. */
  readonly inbound$ = new InboundEvents();
  /** Plugins that connected before (a later connection counts as a reconnect). */
  private readonly seen = new Set<string>();
  private readonly changeListeners = new Set<(change: ConnectionChange) => void>();
  /** False once closeAll() ran: the process is shutting down and welcomes no plugin. */
  private acceptingNow = true;

  constructor() {
    telemetry.sample('runner_connections', () => this.byPlugin.size);
  }

  attach(session: RunnerSession): void {
    const previous = this.byPlugin.get(session.plugin_id);
    if (previous) {
      this.logger.warn(`plugin ${session.plugin_id} connected again; replacing session ${previous.session_id}`);
      this.detach(previous, 'replaced by a new connection of the same plugin');
      previous.close('replaced by a new connection of the same plugin');
    }
    this.byPlugin.set(session.plugin_id, session);
    telemetry.runnerConnected(session.plugin_id, this.seen.has(session.plugin_id));
    this.seen.add(session.plugin_id);
    for (const runner of session.runners) {
      this.byRunner.set(runner.runner_id, { session, runner });
    }
    this.changed({ kind: 'attached', session });
  }

  /** Told of every attach and detach, synchronously and in order. */
  onChange(listener: (change: ConnectionChange) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  private changed(change: ConnectionChange): void {
    for (const listener of this.changeListeners) {
      try {
        listener(change);
      } catch (e) {
        this.logger.error(`connection listener failed: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
  }

  /** Forgets a session (idempotent) and reports the disconnect once. */
  detach(session: RunnerSession, reason: string): void {
    if (this.byPlugin.get(session.plugin_id) !== session) {
      return;
    }
    this.byPlugin.delete(session.plugin_id);
    telemetry.runnerDisconnected(session.plugin_id);
    for (const runner of session.runners) {
      if (this.byRunner.get(runner.runner_id)?.session === session) {
        this.byRunner.delete(runner.runner_id);
      }
    }
    this.changed({ kind: 'detached', session });
    this.inbound$.next({ kind: 'disconnected', session, reason });
  }

  /**
   * Closes the plugin's live session (rotated token, removed plugin): its runs fail as on any
   * disconnect and the plugin has to connect again with a valid token.
   */
  closePlugin(pluginId: string, reason: string): void {
    const session = this.byPlugin.get(pluginId);
    if (session) {
      this.logger.warn(`closing session ${session.session_id} of plugin ${pluginId}: ${reason}`);
      this.detach(session, reason);
      session.close(reason);
    }
  }

  /** Whether a new Connect stream may be welcomed (false while the process shuts down). */
  get accepting(): boolean {
    return this.acceptingNow;
  }

  /**
   * Graceful shutdown (docs/deployment.md#graceful-shutdown): closes every live stream with
   * UNAVAILABLE, which the runner SDKs answer by reconnecting at once (to another process behind
   * the load balancer), and welcomes no new one. How many streams were closed.
   */
  closeAll(reason: string): number {
    this.acceptingNow = false;
    const sessions = [...this.byPlugin.values()];
    for (const session of sessions) {
      this.logger.log(`closing session ${session.session_id} of plugin ${session.plugin_id}: ${reason}`);
      this.detach(session, reason);
      session.close(reason);
    }
    return sessions.length;
  }

  deliver(session: RunnerSession, result: RunnerResult): void {
    session.last_seen_at = Date.now();
    this.inbound$.next({ kind: 'result', session, result });
  }

  runner(runnerId: string): { session: RunnerSession; runner: ConnectedRunner } | undefined {
    return this.byRunner.get(runnerId);
  }

  session(pluginId: string): RunnerSession | undefined {
    return this.byPlugin.get(pluginId);
  }

  sessions(): RunnerSession[] {
    return [...this.byPlugin.values()];
  }
}
