import type { SseEvent } from '../common/sse';

/*
 * What a run's result stream must show, whoever reads it: sequence numbers (the SSE ids) that
 * rise, and nothing after the terminal result.
 */

const TERMINAL = new Set(['run.completed', 'run.failed']);

export class ResultOrder {
  readonly problems: string[] = [];
  /** The terminal result, once it arrived. */
  terminal: SseEvent | null = null;
  private lastSeq = 0;

  /** Checks one result; true when it is the terminal one. */
  see(e: SseEvent): boolean {
    const seq = Number(e.id);
    if (!(seq > this.lastSeq)) {
      this.problems.push(`sequence ${e.id ?? 'none'} after ${this.lastSeq}`);
    }
    this.lastSeq = seq;
    if (this.terminal) {
      this.problems.push(`${e.event} after the terminal result`);
      return false;
    }
    if (TERMINAL.has(e.event)) {
      this.terminal = e;
      return true;
    }
    return false;
  }
}
