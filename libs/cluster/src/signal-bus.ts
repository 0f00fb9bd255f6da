import { randomBytes } from 'node:crypto';
import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { SignalBusKind } from '@libs/config';

/**
 * A signal bus only wakes (docs/scale-out.md#signal-bus): it carries a channel and a short payload
 * of ids, never state. The database is the truth; a wake-up may be lost between processes, so
 * every wait that listens on a bus also polls the database within a bounded period.
 */
export interface SignalBus extends OnApplicationShutdown {
  readonly kind: SignalBusKind;
  /** true when a wake-up may be lost (another process, a broken connection): waits must poll. */
  readonly lossy: boolean;
  /**
   * Delivers `payload` to every subscriber of `channel`: in this process at once (synchronously,
   * as the in-process port always did), in the others through the transport. Never throws for
   * a transport failure (a lost wake-up is covered by the poll); a bad channel is a programming error.
   */
  publish(channel: string, payload: string): void;
  /** Returns the unsubscribe function. */
  subscribe(channel: string, handler: (payload: string) => void): () => void;
  /** Connects the transport (waits at most a short while: the poll covers a bus that comes late). */
  start(): Promise<void>;
  close(): Promise<void>;
  stats(): SignalBusStats;
}

export interface SignalBusStats {
  /** Signals handed to the transport (not counting local delivery). */
  sent: number;
  /** Signals received from other processes. */
  received: number;
  /** Signals not sent: transport down or failing. */
  dropped: number;
  /** Signals over MAX_SIGNAL_PAYLOAD_BYTES: delivered here only. */
  oversized: number;
  /** Times the transport was lost (each followed by a reconnect). */
  disconnects: number;
  connected: boolean;
}

/** A signal names ids: far below PostgreSQL's 8000-byte NOTIFY limit and any NATS max_payload. */
export const MAX_SIGNAL_PAYLOAD_BYTES = 2048;

/** Channel names map to PostgreSQL channel identifiers and NATS subject tokens alike. */
const CHANNEL = /^[a-z][a-z0-9_]{0,31}$/;

export function assertChannel(channel: string): void {
  if (!CHANNEL.test(channel)) {
    throw new Error(`signal channel ${JSON.stringify(channel)}: must match ${String(CHANNEL)}`);
  }
}

/**
 * The local fan-out every bus shares, and the envelope of the shared transports: `<origin> <payload>`,
 * where origin is this bus instance's random id, so that a process skips its own signals when the
 * transport echoes them (they were already delivered here, synchronously).
 */
export abstract class SignalBusBase implements SignalBus {
  abstract readonly kind: SignalBusKind;
  abstract readonly lossy: boolean;
  protected readonly logger: Logger;
  protected readonly origin = randomBytes(12).toString('hex');
  protected readonly channels = new Set<string>();
  protected readonly counts = { sent: 0, received: 0, dropped: 0, oversized: 0, disconnects: 0 };
  private readonly handlers = new Map<string, Set<(payload: string) => void>>();

  constructor(loggerName: string) {
    this.logger = new Logger(loggerName);
  }

  publish(channel: string, payload: string): void {
    assertChannel(channel);
    this.deliver(channel, payload);
    if (!this.lossy) {
      return;
    }
    if (Buffer.byteLength(payload) > MAX_SIGNAL_PAYLOAD_BYTES) {
      this.counts.oversized++;
      this.logger.warn({
        msg: `signal on ${channel} over ${MAX_SIGNAL_PAYLOAD_BYTES} bytes: not sent to other processes (they poll)`,
      });
      return;
    }
    this.send(channel, `${this.origin} ${payload}`);
  }

  subscribe(channel: string, handler: (payload: string) => void): () => void {
    assertChannel(channel);
    const set = this.handlers.get(channel) ?? new Set();
    this.handlers.set(channel, set);
    set.add(handler);
    if (!this.channels.has(channel)) {
      // A handful of channels: listened to from the first subscriber on, for the process's life.
      this.channels.add(channel);
      this.listen(channel);
    }
    return () => {
      set.delete(handler);
    };
  }

  stats(): SignalBusStats {
    return { ...this.counts, connected: this.connected() };
  }

  async onApplicationShutdown(): Promise<void> {
    await this.close();
  }

  abstract start(): Promise<void>;
  abstract close(): Promise<void>;
  /** Hands an enveloped signal to the transport; never throws (counts a drop instead). */
  protected abstract send(channel: string, envelope: string): void;
  /** Starts receiving `channel` from the transport (now, or when it connects). */
  protected abstract listen(channel: string): void;
  protected abstract connected(): boolean;

  /** A transport received `envelope` on `channel`: delivered here unless this bus sent it. */
  protected received(channel: string, envelope: string): void {
    const space = envelope.indexOf(' ');
    if (space < 0 || envelope.slice(0, space) === this.origin) {
      return;
    }
    this.counts.received++;
    this.deliver(channel, envelope.slice(space + 1));
  }

  private deliver(channel: string, payload: string): void {
    for (const handler of [...(this.handlers.get(channel) ?? [])]) {
      try {
        handler(payload);
      } catch (e) {
        // One subscriber's failure never stops the others.
        this.logger.error({ msg: `${channel} handler failed: ${e instanceof Error ? e.message : String(e)}` });
      }
    }
  }
}

/** Reconnect delays: 100 ms doubling to 5 s, with jitter so that processes do not reconnect in step. */
export function reconnectDelayMs(attempt: number): number {
  const base = Math.min(5000, 100 * 2 ** Math.min(attempt, 6));
  return Math.round(base / 2 + Math.random() * (base / 2));
}
