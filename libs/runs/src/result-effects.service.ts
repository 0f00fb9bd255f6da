import { Injectable, Logger } from '@nestjs/common';
import { StateService, TranscriptService } from '@libs/conversations';
import type { ActiveRun } from './active-runs';
import type { ResultView } from './run-stream.bus';

/**
 * What accepted results imply beyond the stream: `state.updated` writes state (same rules as
 * state_set; a rejection is logged and never fails the run), and the run's one assistant
 * transcript row comes from the first `message.completed`, else `run.completed.message`, else
 * the text the run streamed.
 */
@Injectable()
export class ResultEffectsService {
  private readonly logger = new Logger('RunResults');

  constructor(
    private readonly state: StateService,
    private readonly transcript: TranscriptService,
  ) {}

  async apply(run: ActiveRun, row: ResultView): Promise<void> {
    const data = row.data;
    switch (row.type) {
      case 'message.delta': {
        const chunk = data.chunk as { content?: unknown } | undefined;
        if (typeof chunk?.content === 'string') {
          run.assistant.streamed += chunk.content;
        }
        return;
      }
      case 'message.completed':
        return this.assistantRow(run, data.message as Record<string, unknown>);
      case 'run.completed':
        return data.message ? this.assistantRow(run, data.message as Record<string, unknown>) : undefined;
      case 'state.updated':
        return this.state
          .set(run.snapshot.state.scope_keys, String(data.scope), String(data.key), data.value)
          .catch((e: unknown) =>
            this.logger.warn({ run_id: run.run_id, msg: `state.updated rejected: ${errorText(e)}` }),
          );
      default:
        return;
    }
  }

  /** At the end of a completed run that only streamed, its text becomes the assistant row. */
  async finish(run: ActiveRun): Promise<void> {
    if (run.assistant.streamed) {
      await this.assistantRow(run, { role: 'assistant', content: run.assistant.streamed });
    }
  }

  private async assistantRow(run: ActiveRun, message: Record<string, unknown>): Promise<void> {
    const scope = run.snapshot.scope;
    if (run.assistant.written || scope.conversation_id === null) {
      return;
    }
    run.assistant.written = true;
    await this.transcript
      .appendAssistant(
        {
          conversation_id: scope.conversation_id,
          thread_id: scope.thread_id,
          agent_id: run.agent_id,
          run_id: run.run_id,
          runner_id: run.runner_id,
        },
        message,
      )
      .catch((e: unknown) =>
        this.logger.error({ run_id: run.run_id, msg: `assistant transcript row not written: ${errorText(e)}` }),
      );
  }
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
