import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { Session } from './connection';
import { stdoutLogger as log } from './log';
import { createGatewayClient } from './proto';
import type { JsonObject } from './struct';

/*
 * The raw grpc-js floor runner of bench/dispatch (`--runner raw`, bench/dispatch/README.md): the
 * demo runner as it was before it moved onto libs/runner-sdk, cut down to what the bench uses —
 * one runner `plugin:<author>/<plugin>/default`, mode `echo` (echo-runner.ts), reconnect with
 * backoff. The SDK demo runner (apps/demo-runner, `--runner sdk`) is compared against it.
 *
 *   RUNNERHOST_PLUGIN_TOKEN=... node dist/bench/dispatch/raw-runner/main.js
 */

const FIRST_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 5_000;
const STOP_GRACE_MS = 2_000;

function manifest(author: string, plugin: string): JsonObject {
  return {
    id: `plugin:${author}/${plugin}/default`,
    name: 'default',
    label: { en_US: 'Echo (raw grpc-js floor)' },
    description: null,
    protocol_version: '1',
    capabilities: { streaming: true, interrupt: true },
    permissions: {},
    config_schema: [
      { type: 'string', name: 'mode', required: false, default: 'echo' },
      { type: 'integer', name: 'chunk_delay_ms', required: false, default: 0 },
    ],
    metadata: {},
  };
}

async function main(): Promise<number> {
  const token = process.env.RUNNERHOST_PLUGIN_TOKEN;
  if (!token) {
    throw new Error('RUNNERHOST_PLUGIN_TOKEN is required');
  }
  const author = process.env.RUNNERHOST_PLUGIN_AUTHOR || 'demo';
  const plugin = process.env.RUNNERHOST_PLUGIN_NAME || 'echo';
  const url = process.env.RUNNERHOST_GRPC_URL || '127.0.0.1:50051';
  const client = createGatewayClient(url);
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
    log('info', 'connecting', { url, plugin: `${author}/${plugin}` });
    session = new Session(client, { token, author, plugin, manifests: [manifest(author, plugin)], log });
    const end = await session.done;
    log('info', 'stream ended', { code: grpc.status[end.code], details: end.details });
    if (stopping.signal.aborted) {
      break;
    }
    if (end.code === grpc.status.UNAUTHENTICATED || end.code === grpc.status.PERMISSION_DENIED) {
      log('error', 'the host refused this plugin; not retrying', { code: grpc.status[end.code], details: end.details });
      client.close();
      return 2;
    }
    if (end.welcomed) {
      backoffMs = FIRST_BACKOFF_MS;
    }
    await sleep(backoffMs, undefined, { signal: stopping.signal }).catch(() => undefined);
    backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
  }
  client.close();
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log('error', 'fatal', { error: err instanceof Error ? err.message : String(err) });
    process.exit(1);
  },
);
