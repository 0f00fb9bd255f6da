import type { AgentResult, LocalAgentHostPort, MessageChunk, Usage } from '../host-port';

/*
 * The run's results in order, with exactly one terminal result: anything after run.completed /
 * run.failed (a parallel tool finishing late, a stop racing a completion) is dropped here.
 */
export class ResultSink {
  private ended = false;

  constructor(private readonly port: Pick<LocalAgentHostPort, 'emit'>) {}

  get terminated(): boolean {
    return this.ended;
  }

  async emit(result: AgentResult): Promise<void> {
    if (this.ended) {
      return;
    }
    if (result.type === 'run.completed' || result.type === 'run.failed') {
      this.ended = true;
    }
    await this.port.emit(result);
  }

  fail(error: string, code: string, retryable: boolean, usage?: Usage): Promise<void> {
    return this.emit({ type: 'run.failed', data: { error, code, retryable }, ...(usage ? { usage } : {}) });
  }
}

/**
 * Streamed text of the run as message.delta results (LP cadence): the first snapshot at once,
 * then at most one per `intervalMs`, a turn's closing chunk always, nothing when nothing changed.
 * `content` is the new text since the previous delta (the host appends deltas); a turn's closing
 * chunk also carries `all_content`, the run's visible text so far (earlier tool-turn text as
 * prefix; docs/local-agent.md#streamed-output). `is_final` stays false: a turn's end is not the message's end (a tool
 * round or a steering follow-up may continue it); message.completed / the terminal result end it.
 */
export class DeltaStream {
  private sequence = 0;
  private sent = '';
  private lastAt: number | null = null;

  constructor(
    private readonly sink: ResultSink,
    private readonly now: () => number,
    private readonly intervalMs = 50,
  ) {}

  /** A new turn: `prefix` is the visible text of earlier turns that ended in tool calls. */
  startTurn(prefix: string): void {
    this.sent = prefix;
    this.lastAt = null;
  }

  /** `visible` is the prefix plus this turn's text so far. */
  /** `closing`: the turn's last chunk (always sent, with all_content). */
  async update(visible: string, closing: boolean): Promise<void> {
    const t = this.now();
    const due = closing || this.lastAt === null || t - this.lastAt >= this.intervalMs;
    if (!due || (!closing && visible === this.sent)) {
      return;
    }
    const delta = visible.startsWith(this.sent) ? visible.slice(this.sent.length) : visible;
    if (delta === '' && (!closing || this.lastAt === null)) {
      return; // nothing new; a turn that showed no text (only tool calls) sends no empty closing chunk
    }
    const chunk: MessageChunk = { role: 'assistant', content: delta, is_final: false, msg_sequence: ++this.sequence };
    if (closing) {
      chunk.all_content = visible;
    }
    this.sent = visible;
    this.lastAt = t;
    await this.sink.emit({ type: 'message.delta', data: { chunk } });
  }
}
