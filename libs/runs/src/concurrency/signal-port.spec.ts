import { MemorySignalBus, SignalBusBase } from '@libs/cluster';
import type { AppConfig } from '@libs/config';
import { BusSignals, decodeSignal, encodeSignal, InProcessSignals, nextSignal, type Signal } from './signal-port';

describe('InProcessSignals', () => {
  it('delivers a signal to the subscribers of its kind only, until they unsubscribe', () => {
    const port = new InProcessSignals();
    const seen: string[] = [];
    const off = port.subscribe('steering', (s) => seen.push(`steering:${s.run_id}`));
    port.subscribe('conversation', (s) => seen.push(`conversation:${s.key}`));
    port.publish({ kind: 'steering', run_id: 'r1' });
    port.publish({ kind: 'conversation', key: 'k1' });
    off();
    port.publish({ kind: 'steering', run_id: 'r2' });
    expect(seen).toEqual(['steering:r1', 'conversation:k1']);
  });

  it('keeps delivering when one subscriber throws', () => {
    const port = new InProcessSignals();
    const seen: string[] = [];
    port.subscribe('cancel', () => {
      throw new Error('boom');
    });
    port.subscribe('cancel', (s) => seen.push(s.reason));
    port.publish({ kind: 'cancel', run_id: 'r1', reason: 'interrupt' });
    expect(seen).toEqual(['interrupt']);
  });
});

describe('nextSignal', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('resolves true on the first matching signal and ignores others', async () => {
    const port = new InProcessSignals();
    const w = nextSignal(port, 'steering', (s) => s.run_id === 'mine', 1000);
    port.publish({ kind: 'steering', run_id: 'other' });
    port.publish({ kind: 'steering', run_id: 'mine' });
    await expect(w.promise).resolves.toBe(true);
  });

  it('resolves false when the wait passes, when aborted, or when cancelled', async () => {
    const port = new InProcessSignals();
    const timed = nextSignal(port, 'steering', () => true, 1000);
    jest.advanceTimersByTime(1000);
    await expect(timed.promise).resolves.toBe(false);

    const abort = new AbortController();
    const aborted = nextSignal(port, 'steering', () => true, 1000, abort.signal);
    abort.abort();
    await expect(aborted.promise).resolves.toBe(false);

    const cancelled = nextSignal(port, 'steering', () => true, 1000);
    cancelled.cancel();
    await expect(cancelled.promise).resolves.toBe(false);
    // Nothing stays subscribed.
    port.publish({ kind: 'steering', run_id: 'x' });
  });
});

describe('nextSignal on a port that may lose signals (pollMs)', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('resolves true at each poll tick before the wait ends (read again), false at the end', async () => {
    const port = Object.assign(new InProcessSignals(), { pollMs: 300 });
    const first = nextSignal(port, 'steering', () => true, 1000);
    jest.advanceTimersByTime(300);
    await expect(first.promise).resolves.toBe(true);
    const last = nextSignal(port, 'steering', () => true, 200);
    jest.advanceTimersByTime(200);
    await expect(last.promise).resolves.toBe(false);
  });
});

describe('BusSignals', () => {
  const config = { cluster: { pollMs: 750 } } as unknown as AppConfig;

  it('on the memory bus: delivers in process, synchronously, with no poll', () => {
    const port = new BusSignals(new MemorySignalBus(), config);
    const seen: Signal[] = [];
    port.subscribe('cancel', (s) => seen.push(s));
    port.publish({ kind: 'cancel', run_id: 'r1', reason: 'interrupted by event e1' });
    expect(seen).toEqual([{ kind: 'cancel', run_id: 'r1', reason: 'interrupted by event e1' }]);
    expect(port.pollMs).toBeUndefined();
  });

  it('on a shared bus: a signal raised at one process wakes the other, and waits poll', () => {
    const wire: FakeSharedBus[] = [];
    const busA = new FakeSharedBus(wire);
    const busB = new FakeSharedBus(wire);
    const a = new BusSignals(busA, config);
    const b = new BusSignals(busB, config);
    const seenA: Signal[] = [];
    const seenB: Signal[] = [];
    a.subscribe('steering', (s) => seenA.push(s));
    b.subscribe('steering', (s) => seenB.push(s));
    b.subscribe('conversation', (s) => seenB.push(s));
    a.publish({ kind: 'steering', run_id: 'r1' });
    a.publish({ kind: 'conversation', key: '["agent","default","c1",""]' });
    expect(seenA).toEqual([{ kind: 'steering', run_id: 'r1' }]);
    expect(seenB).toEqual([
      { kind: 'steering', run_id: 'r1' },
      { kind: 'conversation', key: '["agent","default","c1",""]' },
    ]);
    expect(b.pollMs).toBe(750);
  });

  it('drops a malformed signal from another process', () => {
    const wire: FakeSharedBus[] = [];
    const bus = new FakeSharedBus(wire);
    const port = new BusSignals(bus, config);
    const seen: Signal[] = [];
    port.subscribe('cancel', (s) => seen.push(s));
    for (const bad of [
      'not json',
      '[]',
      'null',
      '{"run_id":"r1"}',
      '{"run_id":"","reason":"x"}',
      '{"run_id":7,"reason":"x"}',
    ]) {
      bus.deliverRemote('cancel', bad);
    }
    bus.deliverRemote('cancel', '{"run_id":"r9","reason":"stop"}');
    expect(seen).toEqual([{ kind: 'cancel', run_id: 'r9', reason: 'stop' }]);
  });
});

describe('encodeSignal / decodeSignal', () => {
  it('round-trip every kind through ids only', () => {
    const signals: Signal[] = [
      { kind: 'steering', run_id: 'r1' },
      { kind: 'conversation', key: 'k' },
      { kind: 'cancel', run_id: 'r2', reason: 'why' },
      { kind: 'results', run_id: 'r3' },
    ];
    for (const s of signals) {
      expect(encodeSignal(s)).not.toContain('"kind"');
      expect(decodeSignal(s.kind, encodeSignal(s))).toEqual(s);
    }
    expect(decodeSignal('steering', JSON.stringify({ run_id: 'x'.repeat(513) }))).toBeNull();
  });
});

/** A lossy bus whose transport is the array of buses of this test (its own echo is skipped by origin). */
class FakeSharedBus extends SignalBusBase {
  readonly kind = 'nats' as const;
  readonly lossy = true;
  constructor(private readonly wire: FakeSharedBus[]) {
    super('SignalBus(fake)');
    wire.push(this);
  }
  start(): Promise<void> {
    return Promise.resolve();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
  protected send(channel: string, envelope: string): void {
    for (const peer of this.wire) {
      peer.received(channel, envelope);
    }
  }
  protected listen(): void {}
  protected connected(): boolean {
    return true;
  }
  /** What another process sent, as the transport hands it over. */
  deliverRemote(channel: string, payload: string): void {
    this.received(channel, `peer ${payload}`);
  }
}
