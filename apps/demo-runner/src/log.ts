import type { Logger } from '@runner-host/runner-sdk';

/** One JSON object per line on stdout: `{"level":"info","msg":"connected","runners":[...],"time":"..."}`. */
export const stdoutLogger: Logger = (level, msg, fields = {}) => {
  if (level !== 'debug') {
    process.stdout.write(JSON.stringify({ level, msg, ...fields, time: new Date().toISOString() }) + '\n');
  }
};

/** For tests. */
export const silentLogger: Logger = () => undefined;
