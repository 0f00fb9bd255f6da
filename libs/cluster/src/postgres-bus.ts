import { Client, type Notification } from 'pg';
import { reconnectDelayMs, SignalBusBase } from './signal-bus';

export interface PostgresBusOptions {
  url: string;
  /** How often the listener connection proves it is alive (a half-open socket delivers nothing). */
  healthCheckMs?: number;
  /** How long start() waits for the first connection before going on (the poll covers the rest). */
  startTimeoutMs?: number;
  /**
   * The connection's `application_name`, read at each connect: in the host it names this process
   * (DbSessions: its sweeper ends it with the process's other sessions,
   * docs/scale-out.md#sessions-of-a-paused-process); `runner-host signal bus` when not given.
   */
  applicationName?: () => string;
}

/** The PostgreSQL channel of a bus channel (one namespace per database: no prefix needed beyond ours). */
export function pgChannel(channel: string): string {
  return `rh_signal_${channel}`;
}

/**
 * PostgreSQL LISTEN/NOTIFY (docs/scale-out.md#signal-bus), the default on PostgreSQL: no extra
 * service. One connection per process both listens and notifies (NOTIFY is `pg_notify` on it), so
 * a process holds exactly one extra connection and never one per waiter. It must be a direct
 * connection (LISTEN does not pass through pgbouncer's transaction mode).
 *
 * Lost connections: an error or end, or a health query that does not answer in time (a half-open
 * socket), drops the connection and reconnects with backoff, listening again to every channel.
 * Signals sent meanwhile are lost, which is allowed: every wait polls.
 */
export class PostgresSignalBus extends SignalBusBase {
  readonly kind = 'postgres' as const;
  readonly lossy = true;
  private client: Client | null = null;
  /** The listener connection's server process id (diagnostics and tests). */
  private pid: number | null = null;
  private connecting: Promise<void> | null = null;
  private attempt = 0;
  private stopped = false;
  private reconnectTimer?: NodeJS.Timeout;
  private healthTimer?: NodeJS.Timeout;
  private readonly healthCheckMs: number;
  private readonly startTimeoutMs: number;
  /** The listener connection's queries, one at a time (pg queues no more than one per client). */
  private tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: PostgresBusOptions) {
    super('SignalBus(postgres)');
    this.healthCheckMs = options.healthCheckMs ?? 10_000;
    this.startTimeoutMs = options.startTimeoutMs ?? 5000;
  }

  async start(): Promise<void> {
    this.stopped = false;
    const first = this.connect();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([first, new Promise<void>((resolve) => (timer = setTimeout(resolve, this.startTimeoutMs)))]);
    clearTimeout(timer);
    this.healthTimer = setInterval(() => void this.checkHealth(), this.healthCheckMs);
    this.healthTimer.unref();
  }

  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    clearInterval(this.healthTimer);
    await this.connecting;
    const client = this.client;
    this.client = null;
    if (client) {
      client.removeAllListeners('end');
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
    }
  }

  protected connected(): boolean {
    return this.client !== null;
  }

  /** The server process id of the listener connection (pg_stat_activity.pid), null while reconnecting. */
  listenerPid(): number | null {
    return this.client ? this.pid : null;
  }

  /**
   * Resolves once the LISTENs of the channels subscribed so far have been answered by the server
   * (a connection being made LISTENs to every channel before it is used): a signal another process
   * sends after it reaches this one. Tests wait on this, not on a delay.
   */
  async listening(): Promise<void> {
    await this.connecting;
    await this.tail;
  }

  protected send(channel: string, envelope: string): void {
    const client = this.client;
    if (!client) {
      this.counts.dropped++;
      return;
    }
    this.counts.sent++;
    this.serial(client, 'SELECT pg_notify($1, $2)', [pgChannel(channel), envelope]).catch(() => {
      this.counts.sent--;
      this.counts.dropped++;
    });
  }

  protected listen(channel: string): void {
    const client = this.client;
    if (client) {
      this.serial(client, `LISTEN "${pgChannel(channel)}"`).catch((e: unknown) => this.lost(client, e));
    }
  }

  /** Runs `sql` on the listener connection after the queries before it. */
  private serial(client: Client, sql: string, params?: unknown[]): Promise<unknown> {
    const run = this.tail.then(
      () => client.query(sql, params),
      () => client.query(sql, params),
    );
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** One connection attempt; on failure the next is scheduled. Resolves either way. */
  private connect(): Promise<void> {
    if (this.connecting || this.stopped) {
      return this.connecting ?? Promise.resolve();
    }
    const client = new Client({
      connectionString: this.options.url,
      keepAlive: true,
      application_name: this.options.applicationName?.() ?? 'runner-host signal bus',
    });
    client.on('notification', (n: Notification) => {
      const channel = n.channel.startsWith('rh_signal_') ? n.channel.slice('rh_signal_'.length) : null;
      if (channel && n.payload !== undefined && client === this.client) {
        this.received(channel, n.payload);
      }
    });
    client.on('error', (e) => this.lost(client, e));
    client.on('end', () => this.lost(client));
    this.connecting = (async () => {
      try {
        await client.connect();
        const backend = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS "pid"');
        this.pid = backend.rows[0].pid;
        for (const channel of this.channels) {
          await client.query(`LISTEN "${pgChannel(channel)}"`);
        }
        if (this.stopped) {
          await client.end();
          return;
        }
        this.client = client;
        this.tail = Promise.resolve();
        if (this.attempt > 0) {
          this.logger.log({ msg: `listener connection back after ${this.attempt} attempt(s)` });
        }
        this.attempt = 0;
      } catch (e) {
        client.removeAllListeners('end');
        client.on('error', () => undefined);
        await client.end().catch(() => undefined);
        this.logger.warn({ msg: `listener connection failed: ${e instanceof Error ? e.message : String(e)}` });
        this.scheduleReconnect();
      } finally {
        this.connecting = null;
      }
    })();
    return this.connecting;
  }

  /** The listener connection broke (or stopped answering): drop it and connect again. */
  private lost(client: Client, error?: unknown): void {
    if (client !== this.client) {
      return;
    }
    this.client = null;
    this.counts.disconnects++;
    client.removeAllListeners('end');
    client.on('error', () => undefined);
    void client.end().catch(() => undefined);
    if (this.stopped) {
      return;
    }
    this.logger.warn({
      msg: `listener connection lost${error instanceof Error ? `: ${error.message}` : ''}; reconnecting (waits poll meanwhile)`,
    });
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.reconnectTimer) {
      return;
    }
    const delay = reconnectDelayMs(this.attempt++);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.connect();
    }, delay);
    this.reconnectTimer.unref();
  }

  /** A query that does not answer within the period means a dead or half-open socket. */
  private async checkHealth(): Promise<void> {
    const client = this.client;
    if (!client) {
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>(
      (resolve) => (timer = setTimeout(() => resolve('timeout'), this.healthCheckMs)),
    );
    const outcome = await Promise.race([this.serial(client, 'SELECT 1').then(() => 'ok' as const), timedOut]).catch(
      (e: unknown) => e,
    );
    clearTimeout(timer);
    if (outcome !== 'ok') {
      this.lost(client, outcome === 'timeout' ? new Error(`no answer within ${this.healthCheckMs} ms`) : outcome);
    }
  }
}
