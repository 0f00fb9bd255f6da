/** Lines and characters of a stdio MCP child's stderr kept for `last_error`. */
const MAX_LINES = 20;
const MAX_CHARS = 2000;

/**
 * The last lines a stdio MCP child wrote to stderr, so that a child that fails to start or dies
 * says why in the source's `last_error` (a bare "Connection closed" helps nobody). Bounded: a
 * chatty child costs at most a few KiB.
 */
export class StderrTail {
  private lines: string[] = [];
  private partial = '';

  push(chunk: string): void {
    const parts = (this.partial + chunk).split(/\r?\n/);
    this.partial = parts.pop()!.slice(-MAX_CHARS);
    for (const line of parts) {
      if (line.trim() !== '') {
        this.lines.push(line.slice(0, MAX_CHARS));
      }
    }
    if (this.lines.length > MAX_LINES) {
      this.lines = this.lines.slice(-MAX_LINES);
    }
  }

  /** The kept lines (and an unfinished last one), newest last, at most MAX_CHARS; '' when none. */
  text(): string {
    const all = [...this.lines, ...(this.partial.trim() ? [this.partial] : [])].join('\n');
    return all.length > MAX_CHARS ? `…${all.slice(-MAX_CHARS)}` : all;
  }

  /** `; stderr: <tail>` for an error message, or '' when the child said nothing. */
  suffix(): string {
    const t = this.text();
    return t ? `; its stderr ends with:\n${t}` : '';
  }
}
