/** Nest's log levels (the methods of its `Logger`). */
export type LogLevelName = 'verbose' | 'debug' | 'log' | 'warn' | 'error' | 'fatal';

/**
 * Whether the process's logger writes a level, asked before a hot path builds a line
 * (docs/benchmarks.md, "Host CPU per run: the small items the profile names"): Nest's `Logger`
 * forwards every call (context array, the message's template string) to the logger, which only
 * then drops it. The level is the logger's (apps/host JsonLogger registers its own check); until
 * one is registered every level is on, so unit tests and tools lose no line.
 */
export class LogLevels {
  private check: ((level: LogLevelName) => boolean) | null = null;

  enabled(level: LogLevelName): boolean {
    return this.check === null || this.check(level);
  }

  /** The process's logger answers from now on (null: every level on again). */
  use(check: ((level: LogLevelName) => boolean) | null): void {
    this.check = check;
  }
}
