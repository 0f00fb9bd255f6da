import { Logger } from '@nestjs/common';
import type { ConversationScope, NewTranscriptRow, StateWrite } from '@libs/persistence';
import type { ActiveRun } from './active-run';
import type { ResultView } from './run-stream.bus';

/** What a result implies beyond the stream, decided before it is written (written with it). */
export interface ResultEffects {
  state: StateWrite | null;
}

/** The state rules a `state.updated` result is held to: the same as `state_set`. */
export interface StateRules {
  scopeKey(keys: ActiveRun['snapshot']['state']['scope_keys'], scope: string): string;
  normaliseKey(key: string): string;
  encode(value: unknown): string;
}

const logger = new Logger('RunResults');

/**
 * `state.updated` becomes a state write (a rejection is logged and never fails the run);
 * `message.delta` text is kept for runs that only stream; the first `message.completed` is
 * remembered as the run's assistant message.
 */
export function effectsOf(run: ActiveRun, row: ResultView, rules: StateRules): ResultEffects {
  const data = row.data;
  switch (row.type) {
    case 'message.delta': {
      const chunk = data.chunk as { content?: unknown } | undefined;
      if (typeof chunk?.content === 'string') {
        run.noteStreamed(chunk.content);
      }
      return { state: null };
    }
    case 'message.completed':
      run.noteAssistantMessage(data.message as Record<string, unknown>);
      return { state: null };
    case 'state.updated':
      try {
        const keys = run.snapshot.state.scope_keys;
        return {
          state: {
            scope_key: rules.scopeKey(keys, String(data.scope)),
            state_key: rules.normaliseKey(String(data.key)),
            value: rules.encode(data.value),
          },
        };
      } catch (e) {
        logger.warn({
          run_id: run.run_id,
          msg: `state.updated rejected: ${e instanceof Error ? e.message : String(e)}`,
        });
        return { state: null };
      }
    default:
      return { state: null };
  }
}

/**
 * The run's one assistant transcript row, written with its end: the first `message.completed`,
 * else `run.completed.message`, else — for a completed run that only streamed — its text.
 */
export function assistantMessageAtEnd(
  run: ActiveRun,
  terminal: ResultView,
  completed: boolean,
): Record<string, unknown> | null {
  if (run.snapshot.scope.conversation_id === null) {
    return null;
  }
  const fromTerminal =
    terminal.type === 'run.completed' && terminal.data.message
      ? (terminal.data.message as Record<string, unknown>)
      : null;
  const streamed = completed && run.streamed ? { role: 'assistant', content: run.streamed } : null;
  return run.assistantMessage ?? fromTerminal ?? streamed;
}

export type AssistantRowBuilder = (
  scope: ConversationScope & { run_id: string; runner_id: string },
  message: Record<string, unknown>,
) => NewTranscriptRow;
