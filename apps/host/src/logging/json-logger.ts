import type { LoggerService, LogLevel } from '@nestjs/common';
import pino, { type Logger as Pino } from 'pino';
import { type LogLevelName, telemetry } from '@libs/telemetry';

type PinoLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/** Nest's level names as pino's (its `verbose` method writes pino's `trace`). */
const PINO_LEVEL: Record<LogLevelName, PinoLevel> = {
  verbose: 'trace',
  debug: 'debug',
  log: 'info',
  warn: 'warn',
  error: 'error',
  fatal: 'fatal',
};

/** A stream token (`rhst_<claims>.<signature>`) or a `stream_token=` query value, wherever it appears in a string. */
const STREAM_TOKENS = /rhst_[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]*)?|(stream_token=)[^&\s"']*/g;

/** Stream tokens travel in URLs (EventSource cannot send headers): no log line may carry one. */
export function scrubStreamTokens(text: string): string {
  return text.includes('rhst_') || text.includes('stream_token=')
    ? text.replace(STREAM_TOKENS, (_m, _sig, param?: string) => (param ? `${param}[Redacted]` : 'rhst_[Redacted]'))
    : text;
}

/** Credentials by field; URLs keep everything but their stream token. */
const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["idempotency-key"]',
  'headers.authorization',
  'stream_token',
  'query.stream_token',
  'req.query.stream_token',
  'url',
  'req.url',
];

/**
 * The host's Nest logger: one JSON line per call through pino, no per-request context
 * (no AsyncLocalStorage), no colour. Object messages keep their fields (`run_id`, ...);
 * a stack (Nest's `error(message, stack, context)`) becomes a field, never extra lines.
 */
export class JsonLogger implements LoggerService {
  private readonly pino: Pino;

  constructor(level: string, destination?: pino.DestinationStream) {
    this.pino = pino(
      {
        level,
        base: { service: 'runner-host' },
        // Nothing logs requests today; kept so a later request log cannot leak credentials.
        redact: {
          paths: REDACT_PATHS,
          censor: (value: unknown, path: string[]) =>
            path[path.length - 1] === 'url' && typeof value === 'string' ? scrubStreamTokens(value) : '[Redacted]',
        },
      },
      destination,
    );
    // The run path asks before it builds a line (libs/telemetry/src/log-levels.ts): the level is this logger's.
    telemetry.logs.use((nest) => this.pino.isLevelEnabled(PINO_LEVEL[nest]));
  }

  log(message: unknown, ...params: unknown[]): void {
    this.write('info', message, params);
  }
  error(message: unknown, ...params: unknown[]): void {
    this.write('error', message, params);
  }
  warn(message: unknown, ...params: unknown[]): void {
    this.write('warn', message, params);
  }
  debug(message: unknown, ...params: unknown[]): void {
    this.write('debug', message, params);
  }
  verbose(message: unknown, ...params: unknown[]): void {
    this.write('trace', message, params);
  }
  fatal(message: unknown, ...params: unknown[]): void {
    this.write('fatal', message, params);
  }

  setLogLevels(levels: LogLevel[]): void {
    // Nest passes the enabled levels; pino needs the lowest one.
    const order: [LogLevel, PinoLevel][] = [
      ['verbose', 'trace'],
      ['debug', 'debug'],
      ['log', 'info'],
      ['warn', 'warn'],
      ['error', 'error'],
      ['fatal', 'fatal'],
    ];
    const lowest = order.find(([nest]) => levels.includes(nest));
    this.pino.level = lowest ? lowest[1] : 'silent';
  }

  private write(level: PinoLevel, message: unknown, params: unknown[]): void {
    if (!this.pino.isLevelEnabled(level)) {
      return;
    }
    const rest = [...params];
    // Nest appends the logger's context as the last string argument.
    const context =
      rest.length > 0 && typeof rest[rest.length - 1] === 'string' && !String(rest[rest.length - 1]).includes('\n')
        ? (rest.pop() as string)
        : undefined;
    const fields: Record<string, unknown> = context ? { context } : {};
    if (level === 'error' && typeof rest[0] === 'string') {
      fields.stack = scrubStreamTokens(rest.shift() as string);
    }
    if (rest.length > 0) {
      fields.params = rest;
    }
    if (message instanceof Error) {
      this.pino[level]({ ...fields, err: message }, scrubStreamTokens(message.message));
    } else if (message !== null && typeof message === 'object') {
      const record = { ...fields, ...(message as Record<string, unknown>) };
      // A run's lines carry its trace id while traces are exported (docs/observability.md, "Traces");
      // a line logged inside a run's host-API call or local-agent turn that names no run gets its run id.
      if (record.run_id === undefined) {
        const runId = telemetry.tracing.activeRunId();
        if (runId) {
          record.run_id = runId;
        }
      }
      const traceId = typeof record.run_id === 'string' ? telemetry.tracing.traceIdOf(record.run_id) : null;
      if (traceId) {
        record.trace_id = traceId;
      }
      if (typeof record.msg === 'string') {
        record.msg = scrubStreamTokens(record.msg);
      }
      this.pino[level](record);
    } else {
      this.pino[level](fields, scrubStreamTokens(String(message)));
    }
  }
}
