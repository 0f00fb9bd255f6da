/** One JSON object per line on stdout: `{"level":"info","msg":"run started","run_id":"..."}`. */
export type LogLevel = 'info' | 'warn' | 'error';
export type Logger = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => void;

export const stdoutLogger: Logger = (level, msg, fields = {}) => {
  process.stdout.write(JSON.stringify({ level, msg, ...fields, time: new Date().toISOString() }) + '\n');
};

/** For tests. */
export const silentLogger: Logger = () => undefined;
