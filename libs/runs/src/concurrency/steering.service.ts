import { Inject, Injectable } from '@nestjs/common';
import { SteeringRepository } from '@libs/persistence';
import { steeringItemsOf, type HostApiParsed, type SteeringItem } from '@libs/protocol';
import { telemetry } from '@libs/telemetry';
import type { RunGrant } from '../run-grant';
import { MAX_STEERING_QUEUE } from './concurrency';
import { SIGNAL_PORT, nextSignal, type SignalPort } from './signal-port';

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

  /**
   * `req` is the request the host-API action table already parsed with its one schema
   * (`steering.pull` in @libs/protocol: modes read as "all"/"one", limit and wait_ms checked),
   * so the service does not check it again.
   */
  async pull(
    run: Pick<RunGrant, 'run_id' | 'snapshot' | 'signal' | 'lease'>,
    req: HostApiParsed<'steering.pull'>,
  ): Promise<SteeringItem[]> {
    const mode = req.mode ?? 'all';
    // Like every pull and list limit of the host API: above the cap is clamped, not refused
    // (a runner asking for more than a pull hands out gets at most MAX_STEERING_QUEUE items).
    const limit = mode === 'one' ? 1 : Math.min(req.limit ?? MAX_STEERING_QUEUE, MAX_STEERING_QUEUE);
    const deadline = run.snapshot.deadline_at_ms ?? Number.POSITIVE_INFINITY;
    const until = Math.min(Date.now() + (req.wait_ms ?? 0), deadline);
    const started = telemetry.now();
    for (;;) {
      const remaining = until - Date.now();
      // Subscribed before the read: an item queued between the read and the wait is not missed.
      const waiter =
        remaining > 0
          ? nextSignal(this.signals, 'steering', (s) => s.run_id === run.run_id, remaining, run.signal)
          : null;
      // Fenced by the run's lease: a process that lost the run hands nothing out (FencedError).
      const items = await this.steering.pull(run.run_id, limit, mode, run.lease ?? null);
      if (items.length > 0 || !waiter) {
        waiter?.cancel();
        telemetry.steeringPulled(items.length, telemetry.now() - started);
        // Typed where admission produced them; here only their shape is confirmed (cheap, per item).
        const pulled = steeringItemsOf(items.map((i) => i.item));
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
