import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Metadata } from '@grpc/grpc-js';
import { bearerToken } from '@libs/auth';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { PluginsRepository, type PluginEntity } from '@libs/persistence';
import type { Hello, HostMessage, PluginMessage } from '@libs/proto';
import { parseManifest, pluginRunnerId, type ErrorCode } from '@libs/protocol';
import { grpcErrorOf, type GrpcStatusError } from './grpc-error';
import { isMalformed, malformedError } from './malformed-request';
import { PluginsService } from './plugins.service';
import { RunnerConnections, type ConnectedRunner, type RunnerSession } from './runner-connections';
import { fromWireResult, toHostMessage } from './wire';

export const HOST_VERSION = '0.1.0';
const HELLO_TIMEOUT_MS = 10_000;
/** A session that sends nothing (not even a pong) for this many heartbeat intervals is dropped. */
const MISSED_HEARTBEATS = 3;

/** Where a Connect session writes: one stream's transport (the gRPC adapter, connect.grpc.ts). */
export interface ConnectOutlet {
  /** A message to the plugin (never called once the stream ended). */
  send(message: HostMessage): void;
  /** Ends the stream with this status (at most once, and only if `end` was not called). */
  fail(error: GrpcStatusError): void;
  /** Ends the stream OK: the plugin closed its half first (at most once). */
  end(): void;
}

/** One open Connect stream, as its transport reports to the session. */
export interface ConnectStream {
  /** A message of the plugin, in the order they came. */
  readonly receive: (message: PluginMessage) => void;
  /** The plugin closed its half: the session detaches and the stream ends OK. */
  readonly halfClosed: () => void;
  /** The stream is gone (cancelled, reset, its status sent): timers stop, the session detaches (idempotent). */
  readonly closed: () => void;
}

/** The session's side of its outlet: writes and the host-side close, both no-ops once the stream ended. */
interface SessionTransport {
  readonly send: (message: HostMessage) => void;
  readonly close: (reason: string) => void;
}

/** Drives one Connect stream: authenticate, hello → welcome, then results, heartbeats and pings. */
@Injectable()
export class ConnectSessionHandler {
  private readonly logger = new Logger('RunnerGateway');

  constructor(
    private readonly plugins: PluginsService,
    private readonly pluginStore: PluginsRepository,
    private readonly connections: RunnerConnections,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * Opens the session of one Connect stream: `outlet` is where it writes (the gRPC adapter,
   * connect.grpc.ts), the answer is what the adapter hands each inbound event to — one plain call
   * per message (docs/protocol.md#connecting-a-plugin).
   */
  open(metadata: Metadata | undefined, outlet: ConnectOutlet): ConnectStream {
    let session: RunnerSession | null = null;
    let plugin: PluginEntity | null = null;
    let revision = 0;
    /** True once the stream ended, whichever side ended it: nothing more is read or written. */
    let over = false;
    const pending: PluginMessage[] = [];
    let pingTimer: NodeJS.Timeout | undefined;

    /** Stops the timers and detaches the session (the runs on it hear `reason`); once. */
    const finish = (reason: string): boolean => {
      if (over) {
        return false;
      }
      over = true;
      clearTimeout(helloTimer);
      clearInterval(pingTimer);
      this.end(session, reason);
      return true;
    };
    const closeWith = (error: GrpcStatusError): void => {
      if (finish(error.details)) {
        outlet.fail(error);
      }
    };
    const fail = (code: ErrorCode, message: string): void => {
      if (!over) {
        this.logger.warn(`closing plugin stream: ${message}`);
        closeWith(grpcErrorOf(code, message));
      }
    };
    const helloTimer = setTimeout(() => fail('invalid_argument', 'no hello within 10 s'), HELLO_TIMEOUT_MS);
    const transport: SessionTransport = {
      send: (message) => {
        if (!over) {
          outlet.send(message);
        }
      },
      close: (reason) => closeWith(grpcErrorOf('unavailable', reason)),
    };

    const handle = (msg: PluginMessage): void => {
      if (over) {
        return;
      }
      if (isMalformed(msg)) {
        // Before or after authentication alike: the stream cannot be trusted to be in step.
        const error = malformedError(msg);
        return fail(error.code, error.message);
      }
      if (!plugin) {
        pending.push(msg);
        return;
      }
      if (!session) {
        if (!msg.hello) {
          return fail('invalid_argument', 'the first message on the stream must be hello');
        }
        clearTimeout(helloTimer);
        if (this.plugins.revisionOf(plugin.plugin_id) !== revision) {
          return fail('unauthenticated', 'invalid plugin token (rotated or removed since the stream opened)');
        }
        if (!this.connections.accepting) {
          return fail('unavailable', 'this host process is shutting down: connect to another one');
        }
        session = this.welcome(plugin, msg.hello, transport, fail);
        if (session) {
          pingTimer = this.startPings(session, transport, fail);
        }
        return;
      }
      session.last_seen_at = Date.now();
      if (msg.result) {
        this.connections.deliver(session, fromWireResult(msg.result));
      } else if (msg.results) {
        for (const result of msg.results.results) {
          this.connections.deliver(session, fromWireResult(result));
        }
      } else if (msg.hello) {
        fail('invalid_argument', 'hello may be sent only once per stream');
      }
    };

    const token = bearerToken(metadata?.get('authorization').map(String));
    void (token ? this.plugins.authenticate(token) : Promise.resolve(null)).then(
      (found) => {
        if (over) {
          return;
        }
        if (!found) {
          return fail(
            'unauthenticated',
            token ? 'invalid plugin token' : 'missing plugin token (authorization: Bearer <token>)',
          );
        }
        plugin = found;
        revision = this.plugins.revisionOf(found.plugin_id);
        pending.splice(0).forEach(handle);
      },
      (e: unknown) => fail('unavailable', `authentication failed: ${String(e)}`),
    );

    return {
      receive: handle,
      halfClosed: () => {
        if (finish('plugin closed the stream')) {
          outlet.end();
        }
      },
      closed: () => void finish('stream closed'),
    };
  }

  private welcome(
    plugin: PluginEntity,
    hello: Hello,
    transport: SessionTransport,
    fail: (code: ErrorCode, message: string) => void,
  ): RunnerSession | null {
    if (hello.plugin_author !== plugin.author || hello.plugin_name !== plugin.name) {
      fail(
        'unauthorized',
        `hello names ${hello.plugin_author}/${hello.plugin_name} but the token belongs to ${plugin.plugin_id}`,
      );
      return null;
    }
    if (hello.protocol_version !== '1') {
      fail(
        'invalid_argument',
        `hello.protocol_version: "${hello.protocol_version}" is not supported (host speaks "1")`,
      );
      return null;
    }
    const runners: ConnectedRunner[] = [];
    const rejected: { index: number; name: string; reason: string }[] = [];
    hello.manifests.forEach((raw, index) => {
      const name = typeof raw?.name === 'string' ? raw.name : '';
      const parsed = parseManifest(raw, (n) =>
        pluginRunnerId({ author: plugin.author, plugin: plugin.name, runner: n }),
      );
      if (!parsed.ok) {
        rejected.push({ index, name, reason: parsed.reason });
      } else if (runners.some((r) => r.name === parsed.manifest.name)) {
        rejected.push({ index, name, reason: `manifest.name: "${name}" is declared twice` });
      } else {
        runners.push({ runner_id: parsed.manifest.id, name: parsed.manifest.name, manifest: parsed.manifest });
      }
    });
    for (const r of rejected) {
      this.logger.warn(
        `plugin ${plugin.plugin_id}: manifest #${r.index} (${r.name || 'unnamed'}) skipped: ${r.reason}`,
      );
    }
    const now = Date.now();
    const session: RunnerSession = {
      session_id: randomUUID(),
      plugin_id: plugin.plugin_id,
      connected_at: now,
      last_seen_at: now,
      runners,
      send: (command) => transport.send(toHostMessage(command)),
      close: transport.close,
    };
    this.connections.attach(session);
    void this.pluginStore
      .saveRunners(
        runners.map((r) => ({
          runner_id: r.runner_id,
          plugin_id: plugin.plugin_id,
          name: r.name,
          manifest: r.manifest,
          last_seen_at: now,
        })),
      )
      .catch((e: unknown) => this.logger.error(`could not record runners of ${plugin.plugin_id}: ${String(e)}`));
    transport.send({
      welcome: {
        session_id: session.session_id,
        host_version: HOST_VERSION,
        protocol_version: '1',
        runners: runners.map((r) => ({ runner_id: r.runner_id, name: r.name })),
        rejected,
        heartbeat_interval_ms: this.config.runs.heartbeatIntervalMs,
      },
    });
    this.logger.log(
      `plugin ${plugin.plugin_id} connected (session ${session.session_id}, runners: ${runners.map((r) => r.name).join(', ') || 'none'})`,
    );
    return session;
  }

  private startPings(session: RunnerSession, transport: SessionTransport, fail: (c: ErrorCode, m: string) => void) {
    const interval = this.config.runs.heartbeatIntervalMs;
    let nonce = 0;
    return setInterval(() => {
      if (Date.now() - session.last_seen_at > interval * MISSED_HEARTBEATS) {
        return fail(
          'unavailable',
          `plugin ${session.plugin_id} sent nothing for ${MISSED_HEARTBEATS} heartbeat intervals`,
        );
      }
      transport.send({ ping: { nonce: ++nonce } });
    }, interval).unref();
  }

  private end(session: RunnerSession | null, reason: string): void {
    if (session) {
      this.connections.detach(session, reason);
    }
  }
}
