import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Metadata } from '@grpc/grpc-js';
import { Observable, type Subscriber } from 'rxjs';
import { bearerToken } from '@libs/auth';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { PluginsRepository, type PluginEntity } from '@libs/persistence';
import type { Hello, HostMessage, PluginMessage } from '@libs/proto';
import { parseManifest, pluginRunnerId, type ErrorCode } from '@libs/protocol';
import { grpcErrorOf } from './grpc-error';
import { isMalformed, malformedError } from './malformed-request';
import { PluginsService } from './plugins.service';
import { RunnerConnections, type ConnectedRunner, type RunnerSession } from './runner-connections';
import { fromWireResult, toHostMessage } from './wire';

export const HOST_VERSION = '0.1.0';
const HELLO_TIMEOUT_MS = 10_000;
/** A session that sends nothing (not even a pong) for this many heartbeat intervals is dropped. */
const MISSED_HEARTBEATS = 3;

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

  open(inbound$: Observable<PluginMessage>, metadata: Metadata | undefined): Observable<HostMessage> {
    return new Observable<HostMessage>((out) => {
      let session: RunnerSession | null = null;
      let plugin: PluginEntity | null = null;
      let revision = 0;
      const pending: PluginMessage[] = [];
      const fail = (code: ErrorCode, message: string) => {
        this.logger.warn(`closing plugin stream: ${message}`);
        out.error(grpcErrorOf(code, message));
      };
      const helloTimer = setTimeout(() => fail('invalid_argument', 'no hello within 10 s'), HELLO_TIMEOUT_MS);
      let pingTimer: NodeJS.Timeout | undefined;

      const handle = (msg: PluginMessage): void => {
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
          session = this.welcome(plugin, msg.hello, out, fail);
          if (session) {
            pingTimer = this.startPings(session, out, fail);
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

      const sub = inbound$.subscribe({
        next: handle,
        error: (e: unknown) => this.end(session, `stream error: ${String(e)}`),
        complete: () => {
          this.end(session, 'plugin closed the stream');
          out.complete();
        },
      });

      const token = bearerToken(metadata?.get('authorization').map(String));
      void (token ? this.plugins.authenticate(token) : Promise.resolve(null)).then(
        (found) => {
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

      return () => {
        clearTimeout(helloTimer);
        clearInterval(pingTimer);
        sub.unsubscribe();
        this.end(session, 'stream closed');
      };
    });
  }

  private welcome(
    plugin: PluginEntity,
    hello: Hello,
    out: Subscriber<HostMessage>,
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
      send: (command) => out.next(toHostMessage(command)),
      close: (reason) => out.error(grpcErrorOf('unavailable', reason)),
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
    out.next({
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

  private startPings(session: RunnerSession, out: Subscriber<HostMessage>, fail: (c: ErrorCode, m: string) => void) {
    const interval = this.config.runs.heartbeatIntervalMs;
    let nonce = 0;
    return setInterval(() => {
      if (Date.now() - session.last_seen_at > interval * MISSED_HEARTBEATS) {
        return fail(
          'unavailable',
          `plugin ${session.plugin_id} sent nothing for ${MISSED_HEARTBEATS} heartbeat intervals`,
        );
      }
      out.next({ ping: { nonce: ++nonce } });
    }, interval).unref();
  }

  private end(session: RunnerSession | null, reason: string): void {
    if (session) {
      this.connections.detach(session, reason);
    }
  }
}
