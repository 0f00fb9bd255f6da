import * as fs from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { credentialsFromEnv, optionsFromEnv, PluginRefusedError, RunnerPlugin } from '@runner-host/runner-sdk';
import { demoRunner } from './demo-runner';
import { stdoutLogger as log } from './log';
import { parseExtraManifests } from './manifest';

/*
 * Demo runner plugin on libs/runner-sdk: connects to the Runner Host, announces one runner
 * (`default`, demo-runner.ts), runs what the host sends, and reconnects with backoff and jitter
 * whenever the stream is lost (the SDK's RunnerPlugin).
 *
 *   RUNNERHOST_PLUGIN_TOKEN=... node dist/apps/demo-runner/src/main.js
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 1 bad environment, 2 token refused, 3 `crash` mode.
 */

const STOP_GRACE_MS = 2_000;

/** The TLS files named by the environment must be readable: the error names the variable. */
function checkTlsFiles(env: NodeJS.ProcessEnv): void {
  for (const name of ['RUNNERHOST_TLS_CA_FILE', 'RUNNERHOST_TLS_CERT_FILE', 'RUNNERHOST_TLS_KEY_FILE']) {
    const file = env[name];
    if (file) {
      try {
        fs.accessSync(file, fs.constants.R_OK);
      } catch (e) {
        throw new Error(`${name}=${file}: cannot read (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
      }
    }
  }
}

function createPlugin(env: NodeJS.ProcessEnv): RunnerPlugin {
  // The demo's defaults for the identity (the SDK requires it to be given).
  const withDefaults = {
    ...env,
    RUNNERHOST_PLUGIN_AUTHOR: env.RUNNERHOST_PLUGIN_AUTHOR || 'demo',
    RUNNERHOST_PLUGIN_NAME: env.RUNNERHOST_PLUGIN_NAME || 'echo',
  };
  checkTlsFiles(env);
  return new RunnerPlugin({
    ...optionsFromEnv(withDefaults),
    credentials: credentialsFromEnv(env),
    version: '0.1.0',
    runners: [demoRunner({ log, steering: env.DEMO_STEERING === '1', logRuns: env.DEMO_LOG_RUNS === '1' })],
    extraManifests: parseExtraManifests(env.DEMO_EXTRA_MANIFESTS),
    log,
  });
}

async function main(): Promise<number> {
  const plugin = createPlugin(process.env);
  const stop = (signal: string) => {
    log('info', 'stopping', { signal });
    void plugin.stop(STOP_GRACE_MS);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  plugin.start().catch(() => undefined); // the outcome is closed()'s
  try {
    await plugin.closed();
    return 0;
  } catch (err) {
    if (!(err instanceof PluginRefusedError)) {
      throw err;
    }
    const reason = `${grpc.status[err.grpcStatus]}: ${err.details}`;
    log('error', 'not connected: the host refused this plugin (token or identity); not retrying', { reason });
    // Also in plain words on stderr, for whoever started it by hand.
    process.stderr.write(`demo-runner: not connected: the host refused the plugin (${reason}); exiting with 2\n`);
    await plugin.stop(0);
    return 2;
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log('error', 'fatal', { error: err instanceof Error ? err.message : String(err) });
    process.exit(1);
  },
);
