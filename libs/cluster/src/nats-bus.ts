import { connect, Events, type NatsConnection } from 'nats';
import { reconnectDelayMs, SignalBusBase } from './signal-bus';

export interface NatsBusOptions {
  servers: string[];
  /** Subjects are `<prefix>.signal.<channel>`: deployments sharing a NATS server keep apart. */
  subjectPrefix: string;
  /** Client pings: a half-open connection is noticed after about pingIntervalMs × 2. */
  pingIntervalMs?: number;
  /** How long start() waits for the first connection before going on (the poll covers the rest). */
  startTimeoutMs?: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * NATS core publish/subscribe (docs/scale-out.md#signal-bus): fire-and-forget, at most once, no
 * persistence — what a wake-up needs, since the database is the truth. One connection per
 * process; after the first connection the client reconnects by itself without limit and
 * subscribes again. Until the first connection succeeds this bus retries with backoff.
 */
export class NatsSignalBus extends SignalBusBase {
  readonly kind = 'nats' as const;
  readonly lossy = true;
  private nc: NatsConnection | null = null;
  private up = false;
  private stopped = false;
  private attempt = 0;
  private retryTimer?: NodeJS.Timeout;
  private connecting: Promise<void> | null = null;

  constructor(private readonly options: NatsBusOptions) {
    super('SignalBus(nats)');
  }

  subject(channel: string): string {
    return `${this.options.subjectPrefix}.signal.${channel}`;
  }

  async start(): Promise<void> {
    this.stopped = false;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.connect(),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, this.options.startTimeoutMs ?? 5000))),
    ]);
    clearTimeout(timer);
  }

  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    await this.connecting;
    const nc = this.nc;
    this.nc = null;
    this.up = false;
    if (nc && !nc.isClosed()) {
      await nc.close().catch(() => undefined);
    }
  }

  protected connected(): boolean {
    return this.up;
  }

  /**
   * Resolves once the server has answered a ping sent after the subscriptions made so far: it has
   * processed them, so a signal another process publishes after it reaches this one (tests wait on
   * this, not on a delay).
   */
  async listening(): Promise<void> {
    await this.nc?.flush();
  }

  protected send(channel: string, envelope: string): void {
    const nc = this.nc;
    if (!nc || !this.up) {
      this.counts.dropped++;
      return;
    }
    try {
      nc.publish(this.subject(channel), encoder.encode(envelope));
      this.counts.sent++;
    } catch {
      this.counts.dropped++;
    }
  }

  protected listen(channel: string): void {
    if (this.nc) {
      this.subscribeTo(this.nc, channel);
    }
  }

  private subscribeTo(nc: NatsConnection, channel: string): void {
    nc.subscribe(this.subject(channel), {
      callback: (err, msg) => {
        if (!err) {
          this.received(channel, decoder.decode(msg.data));
        }
      },
    });
  }

  private connect(): Promise<void> {
    if (this.connecting || this.stopped || this.nc) {
      return this.connecting ?? Promise.resolve();
    }
    this.connecting = (async () => {
      try {
        const nc = await connect({
          servers: this.options.servers,
          name: 'runner-host signal bus',
          maxReconnectAttempts: -1,
          reconnectTimeWait: 250,
          pingInterval: this.options.pingIntervalMs ?? 5000,
          maxPingOut: 2,
        });
        if (this.stopped) {
          await nc.close();
          return;
        }
        this.nc = nc;
        this.up = true;
        this.attempt = 0;
        for (const channel of this.channels) {
          this.subscribeTo(nc, channel);
        }
        void this.watch(nc);
      } catch (e) {
        this.logger.warn({ msg: `connection failed: ${e instanceof Error ? e.message : String(e)}` });
        if (!this.stopped) {
          this.retryTimer = setTimeout(() => void this.connect(), reconnectDelayMs(this.attempt++));
          this.retryTimer.unref();
        }
      } finally {
        this.connecting = null;
      }
    })();
    return this.connecting;
  }

  /** Follows the client's own reconnects (it subscribes again by itself). */
  private async watch(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      if (s.type === Events.Disconnect) {
        this.up = false;
        this.counts.disconnects++;
        this.logger.warn({ msg: 'disconnected; reconnecting (waits poll meanwhile)' });
      } else if (s.type === Events.Reconnect) {
        this.up = true;
        this.logger.log({ msg: 'reconnected' });
      }
    }
  }
}
