import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { Session } from './connection';
import { HostApi } from './host-api';
import { stdoutLogger as log } from './log';
import { demoManifest, parseExtraManifests } from './manifest';
import { createGatewayClient } from './proto';
import { channelCredentials } from './tls';

/*
 * Demo runner plugin: connects to the Runner Host, announces one runner (`default`), runs what
 * the host sends, and reconnects with backoff whenever the stream is lost.
 *
 *   RUNNERHOST_PLUGIN_TOKEN=... node dist/apps/demo-runner/src/main.js
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 1 bad environment, 2 token refused, 3 `crash` mode.
 */

const FIRST_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 5_000;
const STOP_GRACE_MS = 2_000;

function readSettings(env: NodeJS.ProcessEnv) {
  const token = env.RUNNERHOST_PLUGIN_TOKEN;
  if (!token) {
    throw new Error('RUNNERHOST_PLUGIN_TOKEN is required');
  }
  const author = env.RUNNERHOST_PLUGIN_AUTHOR || 'demo';
  const plugin = env.RUNNERHOST_PLUGIN_NAME || 'echo';
  return {
    url: env.RUNNERHOST_GRPC_URL || '127.0.0.1:50051',
    credentials: channelCredentials(env),
    token,
    author,
    plugin,
    manifests: [
      demoManifest(author, plugin, { steering: env.DEMO_STEERING === '1' }),
      ...parseExtraManifests(env.DEMO_EXTRA_MANIFESTS),
    ],
  };
}

async function main(): Promise<number> {
  const settings = readSettings(process.env);
  const client = createGatewayClient(settings.url, settings.credentials);
  const hostApi = new HostApi(settings.url, settings.token, settings.credentials);
  const stopping = new AbortController();
  let session: Session | undefined;

  const stop = (signal: string) => {
    log('info', 'stopping', { signal });
    stopping.abort();
    session?.stop();
    setTimeout(() => session?.cancel(), STOP_GRACE_MS).unref();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);

  let backoffMs = FIRST_BACKOFF_MS;
  while (!stopping.signal.aborted) {
    log('info', 'connecting', { url: settings.url, plugin: `${settings.author}/${settings.plugin}` });
    session = new Session(client, { ...settings, log, hostApi });
    const end = await session.done;
    log('info', 'stream ended', { code: grpc.status[end.code], details: end.details });
    if (stopping.signal.aborted) {
      break;
    }
    if (end.code === grpc.status.UNAUTHENTICATED || end.code === grpc.status.PERMISSION_DENIED) {
      const reason = `${grpc.status[end.code]}: ${end.details}`;
      log('error', 'not connected: the host refused this plugin (token or identity); not retrying', { reason });
      // Also in plain words on stderr, for whoever started it by hand.
      process.stderr.write(`demo-runner: not connected: the host refused the plugin (${reason}); exiting with 2\n`);
      client.close();
      hostApi.close();
      return 2;
    }
    if (end.welcomed) {
      backoffMs = FIRST_BACKOFF_MS; // that connection had worked: start the backoff over
    }
    log('info', 'reconnecting', { in_ms: backoffMs });
    await sleep(backoffMs, undefined, { signal: stopping.signal }).catch(() => undefined);
    backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
  }
  client.close();
  hostApi.close();
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log('error', 'fatal', { error: err instanceof Error ? err.message : String(err) });
    process.exit(1);
  },
);
