import type { SignalBus } from './signal-bus';

export interface WaitOptions<T> {
  bus: SignalBus;
  channel: string;
  /** Which payloads concern this wait (default: any on the channel). */
  match?: (payload: string) => boolean;
  /** Reads the truth: a value ends the wait; null, undefined or false waits on. */
  check: () => Promise<T | null | undefined | false>;
  /** The poll behind the signal: the truth is read again at least this often. */
  pollMs: number;
  timeoutMs: number;
  abort?: AbortSignal;
}

/**
 * The bounded wait every cross-process wait is built on (docs/scale-out.md#signal-bus): reads the
 * truth, then waits for a matching signal or the next poll tick, whichever comes first, and reads
 * again, until the truth answers or the time is up (null). Subscribed before the first read, so a
 * signal raised between a read and the wait is not missed; a signal lost between processes costs
 * at most one poll period.
 */
export async function waitForTruth<T>(o: WaitOptions<T>): Promise<T | null> {
  const until = Date.now() + o.timeoutMs;
  let wake: (() => void) | null = null;
  let signalled = false;
  const unsubscribe = o.bus.subscribe(o.channel, (payload) => {
    if (!o.match || o.match(payload)) {
      signalled = true;
      wake?.();
    }
  });
  const onAbort = () => wake?.();
  o.abort?.addEventListener('abort', onAbort);
  try {
    for (;;) {
      signalled = false;
      const found = await o.check();
      if (found !== null && found !== undefined && found !== false) {
        return found;
      }
      const remaining = until - Date.now();
      if (remaining <= 0 || o.abort?.aborted) {
        return null;
      }
      if (signalled) {
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.min(o.pollMs, remaining));
        function done(): void {
          clearTimeout(timer);
          wake = null;
          resolve();
        }
        wake = done;
      });
    }
  } finally {
    unsubscribe();
    o.abort?.removeEventListener('abort', onAbort);
  }
}
