import { defineRunner, optionsFromEnv, RunnerPlugin, type Logger } from '@libs/runner-sdk';

/*
 * The dispatch bench's echo runner written on the runner SDK (libs/runner-sdk), the same
 * behaviour as the demo runner's `echo` mode: one message.delta per word, message.completed,
 * run.completed with usage. `--runner sdk` runs the bench against it instead of the demo runner
 * (raw grpc-js), to compare the two.
 */

/** Log lines in the demo runner's format, which the bench reads back (connects, problems). */
const log: Logger = (level, msg, fields) => {
  const line = `${JSON.stringify({ level, msg, ...fields })}\n`;
  (level === 'error' || level === 'warn' ? process.stderr : process.stdout).write(line);
};

const echo = defineRunner({
  name: 'default',
  label: { en_US: 'Echo (SDK)' },
  capabilities: { streaming: true, interrupt: true },
  configSchema: [
    { type: 'string', name: 'mode', required: false, default: 'echo' },
    { type: 'integer', name: 'chunk_delay_ms', required: false, default: 0 },
  ],
  async run(ctx, io) {
    const words = (ctx.input?.text ?? '').match(/\s*\S+\s*/g) ?? [];
    for (const word of words) {
      void io.delta(word);
    }
    const n = words.length;
    await io.completed({ usage: { prompt_tokens: n, completion_tokens: n, total_tokens: 2 * n } });
  },
});

const env = { RUNNERHOST_PLUGIN_AUTHOR: 'demo', RUNNERHOST_PLUGIN_NAME: 'echo', ...process.env };
const plugin = new RunnerPlugin({ ...optionsFromEnv(env), runners: [echo], log });
process.once('SIGTERM', () => void plugin.stop());
process.once('SIGINT', () => void plugin.stop());
plugin.start().then(
  () => plugin.closed(),
  (err: unknown) => {
    log('error', 'not connected', { error: String(err) });
    process.exit(2);
  },
);
