import * as fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { Session, type SessionEnd } from './connection';
import { PluginRefusedError } from './errors';
import { GrpcHostApiTransport } from './grpc-transport';
import type { JsonObject } from './json';
import { manifestOf, stderrLogger, type Logger, type RunnerDefinition } from './runner';
import type { RunnerManifest } from './types';
import { CHANNEL_OPTIONS, loadServices, openConnect, type WireWelcome } from './wire';

/*
 * A runner plugin: connects with its token, says hello with one manifest per runner, runs what
 * the host sends, and reconnects with exponential backoff and jitter whenever the stream is lost
 * (runs in flight then end as the host decides; new runs arrive on the new stream). A refusal
 * (UNAUTHENTICATED, PERMISSION_DENIED: wrong token or identity) is final.
 */

export interface ReconnectOptions {
  /** First delay after a lost connection (ms, default 250). */
  initialDelayMs?: number;
  /** Upper bound of the delay (ms, default 5000). */
  maxDelayMs?: number;
  /** Random share taken off each delay, 0..1 (default 0.5: a delay is 50-100 % of the backoff). */
  jitter?: number;
}

export interface PluginOptions {
  /** host:port of the host's gRPC endpoint. */
  url: string;
  /** The plugin token issued by the admin API. */
  token: string;
  author: string;
  plugin: string;
  /** The plugin's version (default 0.0.0). */
  version?: string;
  runners: RunnerDefinition[];
  credentials?: grpc.ChannelCredentials;
  reconnect?: ReconnectOptions;
  log?: Logger;
  /** Results per frame at most (default 256). */
  maxBatch?: number;
  /**
   * Bytes of protobuf per frame at most (default 4 MiB; keep it below the host's gRPC limit). A
   * result that cannot fit one frame fails its run `runner.result_too_large`.
   */
  maxFrameBytes?: number;
  /** Source of randomness of the jitter (tests). */
  random?: () => number;
  /**
   * Manifests sent in hello as they are, after the runners' own: runners this plugin serves
   * without `defineRunner` (their runs fail `runner.not_found`), or manifests a protocol test
   * wants the host to reject (listed in `welcome.rejected` and logged).
   */
  extraManifests?: JsonObject[];
}

/** Delay before reconnect attempt `attempt` (0-based): capped exponential backoff with jitter. */
export function backoffDelay(
  attempt: number,
  options: ReconnectOptions = {},
  random: () => number = Math.random,
): number {
  const initial = options.initialDelayMs ?? 250;
  const max = options.maxDelayMs ?? 5_000;
  const jitter = Math.min(1, Math.max(0, options.jitter ?? 0.5));
  const backoff = Math.min(max, initial * 2 ** Math.min(attempt, 30));
  return Math.round(backoff * (1 - jitter * random()));
}

export class RunnerPlugin {
  private readonly log: Logger;
  private readonly credentials: grpc.ChannelCredentials;
  private readonly transport: GrpcHostApiTransport;
  private client: grpc.Client | undefined;
  private session: Session | undefined;
  private stopping = new AbortController();
  private loop: Promise<void> | undefined;
  private firstWelcome: { resolve: (w: WireWelcome) => void; reject: (e: unknown) => void } | undefined;
  /** The last welcome, or null while not connected. */
  welcome: WireWelcome | null = null;
  /** Connections made so far (1 after the first welcome). */
  connections = 0;

  constructor(private readonly options: PluginOptions) {
    if (!options.token) {
      throw new TypeError('token is required (the plugin token issued by the admin API)');
    }
    if (!options.author || !options.plugin) {
      throw new TypeError('author and plugin are required (the identity the token was issued for)');
    }
    if (options.runners.length === 0) {
      throw new TypeError('runners: at least one runner is required');
    }
    this.log = options.log ?? stderrLogger;
    this.credentials = options.credentials ?? grpc.credentials.createInsecure();
    this.transport = new GrpcHostApiTransport(options.url, options.token, this.credentials);
  }

  /** Connects; resolves with the host's first welcome, rejects when the host refuses the plugin. */
  start(): Promise<WireWelcome> {
    if (this.loop) {
      throw new Error('already started');
    }
    const welcomed = new Promise<WireWelcome>((resolve, reject) => (this.firstWelcome = { resolve, reject }));
    this.loop = this.run().then(
      () => this.firstWelcome?.reject(new Error('stopped before the host welcomed the plugin')),
      (err: unknown) => {
        this.firstWelcome?.reject(err);
        throw err;
      },
    );
    this.loop.catch(() => undefined); // reported through start() and closed()
    return welcomed;
  }

  /** Resolves when the plugin has stopped; rejects with PluginRefusedError when the host refused it. */
  closed(): Promise<void> {
    return this.loop ?? Promise.resolve();
  }

  /** Graceful stop: runs in flight fail with `runner.stopped` (retryable), the stream closes. */
  async stop(graceMs = 2_000): Promise<void> {
    this.stopping.abort();
    const session = this.session;
    if (session) {
      await session.stop();
      const timer = setTimeout(() => session.cancel(), graceMs);
      await session.done;
      clearTimeout(timer);
    }
    await this.loop?.catch(() => undefined);
    this.transport.close();
    this.client?.close();
  }

  private async run(): Promise<void> {
    const { RunnerGatewayService } = loadServices();
    this.client = new RunnerGatewayService(this.options.url, this.credentials, CHANNEL_OPTIONS);
    const client = this.client;
    const manifests: (RunnerManifest | JsonObject)[] = [
      ...this.options.runners.map((r) => manifestOf(r, this.options.author, this.options.plugin)),
      ...(this.options.extraManifests ?? []),
    ];
    let attempt = 0;
    while (!this.stopping.signal.aborted) {
      this.log('info', 'connecting', {
        url: this.options.url,
        plugin: `${this.options.author}/${this.options.plugin}`,
      });
      this.session = new Session((md) => openConnect(client, md), {
        token: this.options.token,
        author: this.options.author,
        plugin: this.options.plugin,
        version: this.options.version ?? '0.0.0',
        runners: this.options.runners,
        manifests,
        transport: this.transport,
        log: this.log,
        maxBatch: this.options.maxBatch,
        maxFrameBytes: this.options.maxFrameBytes,
        onWelcome: (welcome) => {
          this.welcome = welcome;
          this.connections += 1;
          this.firstWelcome?.resolve(welcome);
          this.firstWelcome = undefined;
        },
      });
      const end: SessionEnd = await this.session.done;
      this.welcome = null;
      if (this.stopping.signal.aborted) {
        return;
      }
      this.log('info', 'stream ended', { code: grpc.status[end.code], details: end.details });
      if (end.code === grpc.status.UNAUTHENTICATED || end.code === grpc.status.PERMISSION_DENIED) {
        throw new PluginRefusedError(end.code, end.details);
      }
      if (end.welcomed) {
        attempt = 0; // that connection had worked: the backoff starts over
      }
      const delay = backoffDelay(attempt++, this.options.reconnect, this.options.random);
      this.log('info', 'reconnecting', { in_ms: delay });
      await sleep(delay, undefined, { signal: this.stopping.signal }).catch(() => undefined);
    }
  }
}

/** Plugin settings from the environment (the demo runner's variables). */
export function optionsFromEnv(env: NodeJS.ProcessEnv = process.env): Omit<PluginOptions, 'runners'> {
  const token = env.RUNNERHOST_PLUGIN_TOKEN;
  if (!token) {
    throw new TypeError('RUNNERHOST_PLUGIN_TOKEN is required');
  }
  const author = env.RUNNERHOST_PLUGIN_AUTHOR;
  const plugin = env.RUNNERHOST_PLUGIN_NAME;
  if (!author || !plugin) {
    throw new TypeError('RUNNERHOST_PLUGIN_AUTHOR and RUNNERHOST_PLUGIN_NAME are required');
  }
  return {
    url: env.RUNNERHOST_GRPC_URL || '127.0.0.1:50051',
    token,
    author,
    plugin,
    credentials: credentialsFromEnv(env),
  };
}

/** Plaintext unless RUNNERHOST_TLS_CA_FILE is set; RUNNERHOST_TLS_CERT_FILE + _KEY_FILE add a client certificate. */
export function credentialsFromEnv(env: NodeJS.ProcessEnv = process.env): grpc.ChannelCredentials {
  const read = (name: string): Buffer | null => (env[name] ? fs.readFileSync(env[name]) : null);
  const [ca, cert, key] = [
    read('RUNNERHOST_TLS_CA_FILE'),
    read('RUNNERHOST_TLS_CERT_FILE'),
    read('RUNNERHOST_TLS_KEY_FILE'),
  ];
  if (!cert !== !key) {
    throw new TypeError('RUNNERHOST_TLS_CERT_FILE and RUNNERHOST_TLS_KEY_FILE go together');
  }
  return ca || cert ? grpc.credentials.createSsl(ca, key, cert) : grpc.credentials.createInsecure();
}

/**
 * Connects the runners with the settings of the environment and stops on SIGTERM/SIGINT:
 * the one call a runner's main needs.
 */
export async function serve(runners: RunnerDefinition[], options: Partial<PluginOptions> = {}): Promise<RunnerPlugin> {
  const plugin = new RunnerPlugin({ ...optionsFromEnv(), ...options, runners });
  const stop = () => void plugin.stop();
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  await plugin.start();
  return plugin;
}
