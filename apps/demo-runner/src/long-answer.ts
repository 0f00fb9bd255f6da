import { configInt } from './host-api-bench';
import type { JsonObject } from '@runner-host/runner-sdk';

/**
 * Mode `long_answer`: one long answer streamed as `deltas` content-only deltas (no `all_content`)
 * of `delta_chars` ASCII characters each, then `run.completed` without a message — the streamed
 * text is the answer. `paragraph_every` n > 0 ends every n-th delta with a blank line; 0 (the
 * default) streams one paragraph without any line break. Used to check that the host's cost per
 * delta does not grow with the message (bench/delivery, test/e2e/long-message).
 */
export interface LongAnswerConfig {
  deltas: number;
  delta_chars: number;
  paragraph_every: number;
}

export function parseLongAnswerConfig(config: JsonObject): LongAnswerConfig | string {
  const fields = {
    deltas: configInt(config.deltas, 1000, 1, 1_000_000),
    delta_chars: configInt(config.delta_chars, 8192, 4, 1_048_576),
    paragraph_every: configInt(config.paragraph_every, 0, 0, 1_000_000),
  };
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value === 'string') {
      return `${name}: must be ${value}`;
    }
  }
  return fields as LongAnswerConfig;
}

const FILLER = 'lorem ipsum dolor sit amet, consectetur adipiscing elit ';

/** Delta `i` (from 0) of a long answer: exactly `delta_chars` characters, deterministic. */
export function longAnswerDelta(i: number, c: LongAnswerConfig): string {
  const breakHere = c.paragraph_every > 0 && (i + 1) % c.paragraph_every === 0;
  const body = c.delta_chars - (breakHere ? 2 : 0);
  let text = `${i} `;
  while (text.length < body) {
    text += FILLER;
  }
  return text.slice(0, body) + (breakHere ? '\n\n' : '');
}

/** The whole answer `long_answer` streams with this config. */
export function longAnswerText(c: LongAnswerConfig): string {
  return Array.from({ length: c.deltas }, (_, i) => longAnswerDelta(i, c)).join('');
}
