import { Injectable } from '@nestjs/common';
import type { StoredResult } from '@libs/persistence';
import { TERMINAL_RESULT_TYPES } from '@libs/protocol';
import { RunChannels, type StreamSource } from '@libs/streams';

/**
 * A persisted result as clients see it (SSE, API): the stored result, without its row metadata.
 * `ephemeral` marks host telemetry for live readers only (tool progress): never persisted, it
 * carries the run's last sequence and goes out as an SSE frame without an id.
 */
export type ResultView = StoredResult & { ephemeral?: true };

/** Each active run's committed results, fanned out to its live readers. */
@Injectable()
export class RunStreamBus extends RunChannels<ResultView> {}

/** The terminal result types, for a lookup per result and reader that costs no array walk. */
const TERMINAL_TYPES: ReadonlySet<string> = new Set(TERMINAL_RESULT_TYPES);

/** How a result goes out on a stream: `id` its sequence (none when live-only), `event` its type; the terminal one is last. */
export const RESULT_EVENTS: Pick<StreamSource<ResultView>, 'event' | 'isLast'> = {
  event: (r) => ({ id: r.ephemeral ? null : r.sequence, event: r.type, data: r }),
  isLast: (r) => TERMINAL_TYPES.has(r.type),
};
