import { Injectable, Logger } from '@nestjs/common';

/**
 * The wake-ups of conversations and steering, through one seam: in process now; a deployment
 * with several hosts backs it with a shared bus, and the rules do not change.
 */
export type Signal =
  /** An item was queued on a run: a waiting SteeringPull of that run answers. */
  | { kind: 'steering'; run_id: string }
  /** A conversation may start its next waiting run (a run ended, an event was queued). */
  | { kind: 'conversation'; key: string }
  /** Interrupt: cancel this run through the real cancel path. */
  | { kind: 'cancel'; run_id: string; reason: string };

export type SignalKind = Signal['kind'];
export type SignalOf<K extends SignalKind> = Extract<Signal, { kind: K }>;

export interface SignalPort {
  publish(signal: Signal): void;
  /** Returns the unsubscribe function. */
  subscribe<K extends SignalKind>(kind: K, handler: (signal: SignalOf<K>) => void): () => void;
}

export const SIGNAL_PORT = Symbol('SIGNAL_PORT');

@Injectable()
export class InProcessSignals implements SignalPort {
  private readonly logger = new Logger('Signals');
  private readonly handlers = new Map<SignalKind, Set<(s: Signal) => void>>();

  publish(signal: Signal): void {
    for (const handler of [...(this.handlers.get(signal.kind) ?? [])]) {
      try {
        handler(signal);
      } catch (e) {
        // One subscriber's failure never stops the others.
        this.logger.error({ msg: `${signal.kind} handler failed: ${e instanceof Error ? e.message : String(e)}` });
      }
    }
  }

  subscribe<K extends SignalKind>(kind: K, handler: (signal: SignalOf<K>) => void): () => void {
    const set = this.handlers.get(kind) ?? new Set();
    this.handlers.set(kind, set);
    const h = handler as (s: Signal) => void;
    set.add(h);
    return () => set.delete(h);
  }
}

/**
 * Resolves true at the first matching signal, false after `ms` or when `abort` fires. Subscribe
 * before reading what the signal announces, so that nothing falls between the read and the wait.
 */
export function nextSignal<K extends SignalKind>(
  port: SignalPort,
  kind: K,
  match: (s: SignalOf<K>) => boolean,
  ms: number,
  abort?: AbortSignal,
): { promise: Promise<boolean>; cancel: () => void } {
  let cancel = () => {};
  const promise = new Promise<boolean>((resolve) => {
    const done = (v: boolean) => {
      clearTimeout(timer);
      unsubscribe();
      abort?.removeEventListener('abort', onAbort);
      resolve(v);
    };
    const onAbort = () => done(false);
    const unsubscribe = port.subscribe(kind, (s) => match(s) && done(true));
    const timer = setTimeout(() => done(false), ms);
    abort?.addEventListener('abort', onAbort, { once: true });
    if (abort?.aborted) {
      done(false);
    }
    cancel = () => done(false);
  });
  return { promise, cancel };
}
