import { Logger } from '@nestjs/common';
import type { ConversationScope, NewTranscriptRow, StateWrite } from '@libs/persistence';
import type { ActiveRunView } from './active-run';
import type { RunGrant } from './run-grant';
import type { ResultView } from './run-stream.bus';

/** What a result implies beyond the stream, decided before it is written (written with it). */
export interface ResultEffects {
  state: StateWrite | null;
}

/** The state rules a `state.updated` result is held to: the same as `state_set`. */
export interface StateRules {
  scopeKey(keys: RunGrant['snapshot']['state']['scope_keys'], scope: string): string;
  normaliseKey(key: string): string;
  encode(value: unknown): string;
}

const logger = new Logger('RunResults');

/**
 * `state.updated` becomes a state write under the run's grants (a rejection is logged and never
 * fails the run). What the run keeps of its messages for its end, it keeps itself (ActiveRun.accept).
 */
export function effectsOf(
  run: Pick<RunGrant, 'run_id' | 'snapshot'>,
  row: ResultView,
  rules: StateRules,
): ResultEffects {
  const data = row.data;
  switch (row.type) {
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
  run: Pick<ActiveRunView, 'snapshot' | 'streamed' | 'assistantMessage'>,
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
