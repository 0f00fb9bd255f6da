import { Inject, Injectable } from '@nestjs/common';
import { z } from 'zod';
import { SteeringRepository, type JsonObject } from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import { telemetry } from '@libs/telemetry';
import type { RunGrant } from '../run-grant';
import { MAX_STEERING_QUEUE } from './concurrency';
import { SIGNAL_PORT, nextSignal, type SignalPort } from './signal-port';

/** A pull waits at most this long for a follow-up (a runner at a turn boundary waits briefly, not for ever). */
export const MAX_PULL_WAIT_MS = 30_000;

const MODES: Record<string, 'all' | 'one'> = { all: 'all', one: 'one', 'one-at-a-time': 'one', one_at_a_time: 'one' };

/** SteeringPull's request (docs/protocol.md#steering-pull), with the wait this host adds. */
export const steeringPullSchema = z.object({
  mode: z
    .string()
    .optional()
    .refine((m) => m === undefined || m.toLowerCase() in MODES, {
      message: 'must be "all" or "one" ("one-at-a-time", "one_at_a_time")',
    }),
  limit: z.number().int('must be an integer').min(1, 'must be > 0').optional(),
  wait_ms: z
    .number()
    .int('must be an integer')
    .min(0, 'must be >= 0')
    .max(MAX_PULL_WAIT_MS, `must be at most ${MAX_PULL_WAIT_MS}`)
    .optional(),
});
export type SteeringPullInput = z.input<typeof steeringPullSchema>;

/**
 * SteeringPull (docs/protocol.md#steering-pull): hands the run's queued follow-ups out FIFO, each exactly once (the
 * pull and the `steering.injected` rows are one commit; an item is taken only from `queued`).
 * With `wait_ms`, an empty queue waits for the next item queued on the run (signal port),
 * bounded by the wait, the run's deadline and its end.
 */
@Injectable()
export class SteeringService {
  constructor(
    private readonly steering: SteeringRepository,
    @Inject(SIGNAL_PORT) private readonly signals: SignalPort,
  ) {}

  async pull(run: Pick<RunGrant, 'run_id' | 'snapshot' | 'signal'>, req: SteeringPullInput): Promise<JsonObject[]> {
    const parsed = steeringPullSchema.safeParse({
      mode: req.mode ?? undefined,
      limit: req.limit ?? undefined,
      wait_ms: req.wait_ms ?? undefined,
    });
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue.path.map(String).join('.');
      throw new DomainError('invalid_argument', `${field}: ${issue.message}`, { field });
    }
    const mode = MODES[(parsed.data.mode ?? 'all').toLowerCase()];
    // Like every pull and list limit of the host API: above the cap is clamped, not refused
    // (a runner asking for more than a pull hands out gets at most MAX_STEERING_QUEUE items).
    const limit = mode === 'one' ? 1 : Math.min(parsed.data.limit ?? MAX_STEERING_QUEUE, MAX_STEERING_QUEUE);
    const deadline = run.snapshot.deadline_at_ms ?? Number.POSITIVE_INFINITY;
    const until = Math.min(Date.now() + (parsed.data.wait_ms ?? 0), deadline);
    const started = telemetry.now();
    for (;;) {
      const remaining = until - Date.now();
      // Subscribed before the read: an item queued between the read and the wait is not missed.
      const waiter =
        remaining > 0
          ? nextSignal(this.signals, 'steering', (s) => s.run_id === run.run_id, remaining, run.signal)
          : null;
      const items = await this.steering.pull(run.run_id, limit, mode);
      if (items.length > 0 || !waiter) {
        waiter?.cancel();
        telemetry.steeringPulled(items.length, telemetry.now() - started);
        const pulled = items.map((i) => i.item);
        telemetry.tracing.linkSteeringItems(pulled);
        return pulled;
      }
      if (!(await waiter.promise)) {
        telemetry.steeringPulled(0, telemetry.now() - started);
        return [];
      }
    }
  }
}
