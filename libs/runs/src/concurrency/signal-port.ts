import { Inject, Injectable, Logger } from '@nestjs/common';
import { SIGNAL_BUS, type SignalBus } from '@libs/cluster';
import { APP_CONFIG, type AppConfig } from '@libs/config';

/**
 * The wake-ups of conversations and steering, through one seam: on the signal bus SIGNAL_BUS
 * chose (docs/scale-out.md#signal-bus) — in process on SQLite; PostgreSQL LISTEN/NOTIFY or NATS
 * when several hosts share a database, so that a signal raised in one process wakes the others.
 * A signal carries ids only; the database stays the truth.
 */
export type Signal =
  /** An item was queued on a run: a waiting SteeringPull of that run answers. */
  | { kind: 'steering'; run_id: string }
  /** A conversation may start its next waiting run (a run ended, an event was queued). */
  | { kind: 'conversation'; key: string }
  /** Interrupt: cancel this run through the real cancel path. */
  | { kind: 'cancel'; run_id: string; reason: string }
  /**
   * The run's owner committed rows of the run (results, delivery ops): readers following it from
   * the database in other processes read after their cursor (at most one per run per commit group).
   */
  | { kind: 'results'; run_id: string }
  /**
   * A process follows the run from the database (a reader or a cancel waiting there): its owner
   * sends the run's `results` signals only while some process announced this within the last
   * FOLLOW_INTEREST_POLLS poll periods (docs/scale-out.md#everything-from-anywhere-reads-cancel-steering).
   */
  | { kind: 'follow'; run_id: string };

export type SignalKind = Signal['kind'];
export type SignalOf<K extends SignalKind> = Extract<Signal, { kind: K }>;

export interface SignalPort {
  publish(signal: Signal): void;
  /** Returns the unsubscribe function. */
  subscribe<K extends SignalKind>(kind: K, handler: (signal: SignalOf<K>) => void): () => void;
  /**
   * When a signal may be lost (it crosses processes), a wait reads the truth again at least this
   * often; absent when nothing is lost (one process).
   */
  readonly pollMs?: number;
}

export const SIGNAL_PORT = Symbol('SIGNAL_PORT');

const KINDS: readonly SignalKind[] = ['steering', 'conversation', 'cancel', 'results', 'follow'];
/** Longest text field a signal carries across processes (ids, keys, a short reason). */
const MAX_FIELD_CHARS = 512;

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
 * The port on the signal bus: publish goes through the bus (delivered here at once, and to the
 * other processes); one bus subscription per kind feeds this process's subscribers. What arrives
 * from another process is checked before it is delivered (a malformed signal is dropped, logged).
 */
@Injectable()
export class BusSignals implements SignalPort {
  private readonly logger = new Logger('Signals');
  private readonly local = new InProcessSignals();
  readonly pollMs?: number;

  constructor(
    @Inject(SIGNAL_BUS) private readonly bus: SignalBus,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.pollMs = bus.lossy ? config.cluster.pollMs : undefined;
    for (const kind of KINDS) {
      bus.subscribe(kind, (payload) => {
        const signal = decodeSignal(kind, payload);
        if (signal) {
          this.local.publish(signal);
        } else {
          this.logger.warn({ msg: `malformed ${kind} signal dropped: ${payload.slice(0, 200)}` });
        }
      });
    }
  }

  publish(signal: Signal): void {
    this.bus.publish(signal.kind, encodeSignal(signal));
  }

  subscribe<K extends SignalKind>(kind: K, handler: (signal: SignalOf<K>) => void): () => void {
    return this.local.subscribe(kind, handler);
  }
}

/** A signal's bus payload: its fields without the kind (the kind is the channel). */
export function encodeSignal(signal: Signal): string {
  const { kind: _kind, ...fields } = signal;
  return JSON.stringify(fields);
}

/** The signal of a bus payload, or null when it is not one of `kind`. */
export function decodeSignal<K extends SignalKind>(kind: K, payload: string): SignalOf<K> | null {
  let v: unknown;
  try {
    v = JSON.parse(payload);
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null) {
    return null;
  }
  const o = v as Record<string, unknown>;
  const text = (f: string): string | null => {
    const value = o[f];
    return typeof value === 'string' && value.length > 0 && value.length <= MAX_FIELD_CHARS ? value : null;
  };
  let built: Signal | null = null;
  const runId = text('run_id');
  if ((kind === 'steering' || kind === 'results' || kind === 'follow') && runId) {
    built = { kind, run_id: runId };
  } else if (kind === 'conversation' && text('key')) {
    built = { kind, key: text('key')! };
  } else if (kind === 'cancel' && runId && text('reason')) {
    built = { kind, run_id: runId, reason: text('reason')! };
  }
  return built as SignalOf<K> | null;
}

/**
 * Resolves true at the first matching signal, false after `ms` or when `abort` fires. Subscribe
 * before reading what the signal announces, so that nothing falls between the read and the wait.
 * On a port that may lose signals (`pollMs`), it also resolves true at each poll tick before `ms`:
 * true means "read again", and a lost wake-up costs at most one poll period.
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
    const poll = port.pollMs ?? Number.POSITIVE_INFINITY;
    const timer = poll < ms ? setTimeout(() => done(true), poll) : setTimeout(() => done(false), ms);
    abort?.addEventListener('abort', onAbort, { once: true });
    if (abort?.aborted) {
      done(false);
    }
    cancel = () => done(false);
  });
  return { promise, cancel };
}
