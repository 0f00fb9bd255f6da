import { MemorySignalBus } from './memory-bus';
import { MAX_SIGNAL_PAYLOAD_BYTES, SignalBusBase, reconnectDelayMs } from './signal-bus';

/** A shared transport in memory: what one bus sends, every bus on the wire receives (its sender too). */
class Wire {
  readonly buses: FakeRemoteBus[] = [];
  up = true;
}

class FakeRemoteBus extends SignalBusBase {
  readonly kind = 'nats' as const;
  readonly lossy = true;
  readonly listened: string[] = [];

  constructor(private readonly wire: Wire) {
    super('SignalBus(fake)');
    wire.buses.push(this);
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  protected send(channel: string, envelope: string): void {
    if (!this.wire.up) {
      this.counts.dropped++;
      return;
    }
    this.counts.sent++;
    for (const bus of this.wire.buses) {
      if (bus.listened.includes(channel)) {
        bus.received(channel, envelope);
      }
    }
  }

  protected listen(channel: string): void {
    this.listened.push(channel);
  }

  protected connected(): boolean {
    return this.wire.up;
  }
}

describe('MemorySignalBus', () => {
  it('delivers synchronously to the subscribers of the channel only, until they unsubscribe', () => {
    const bus = new MemorySignalBus();
    const seen: string[] = [];
    const off = bus.subscribe('steering', (p) => seen.push(`steering:${p}`));
    bus.subscribe('cancel', (p) => seen.push(`cancel:${p}`));
    bus.publish('steering', 'a');
    bus.publish('cancel', 'b');
    off();
    bus.publish('steering', 'c');
    expect(seen).toEqual(['steering:a', 'cancel:b']);
    expect(bus.lossy).toBe(false);
    expect(bus.stats()).toMatchObject({ sent: 0, received: 0, connected: true });
  });

  it('keeps delivering when one subscriber throws', () => {
    const bus = new MemorySignalBus();
    const seen: string[] = [];
    bus.subscribe('cancel', () => {
      throw new Error('boom');
    });
    bus.subscribe('cancel', (p) => seen.push(p));
    bus.publish('cancel', 'x');
    expect(seen).toEqual(['x']);
  });

  it('refuses a channel that is not a PostgreSQL identifier and NATS token alike', () => {
    const bus = new MemorySignalBus();
    for (const bad of ['', 'Steering', 'a.b', 'a b', '9x', 'x'.repeat(33), 'rh"; DROP']) {
      expect(() => bus.publish(bad, 'p')).toThrow(/signal channel/);
      expect(() => bus.subscribe(bad, () => undefined)).toThrow(/signal channel/);
    }
  });
});

describe('SignalBusBase on a shared transport', () => {
  it('delivers here at once and there through the transport, each once (its own echo skipped)', () => {
    const wire = new Wire();
    const a = new FakeRemoteBus(wire);
    const b = new FakeRemoteBus(wire);
    const seenA: string[] = [];
    const seenB: string[] = [];
    a.subscribe('steering', (p) => seenA.push(p));
    b.subscribe('steering', (p) => seenB.push(p));
    a.publish('steering', '{"run_id":"r1"}');
    b.publish('steering', 'with space inside');
    expect(seenA).toEqual(['{"run_id":"r1"}', 'with space inside']);
    expect(seenB).toEqual(['{"run_id":"r1"}', 'with space inside']);
    expect(a.stats()).toMatchObject({ sent: 1, received: 1 });
  });

  it('listens to a channel once, from its first subscriber on', () => {
    const bus = new FakeRemoteBus(new Wire());
    bus.subscribe('conversation', () => undefined);
    bus.subscribe('conversation', () => undefined);
    expect(bus.listened).toEqual(['conversation']);
  });

  it('keeps an oversized signal in this process and counts it', () => {
    const wire = new Wire();
    const a = new FakeRemoteBus(wire);
    const b = new FakeRemoteBus(wire);
    const here: number[] = [];
    const there: number[] = [];
    a.subscribe('steering', (p) => here.push(p.length));
    b.subscribe('steering', (p) => there.push(p.length));
    a.publish('steering', 'x'.repeat(MAX_SIGNAL_PAYLOAD_BYTES + 1));
    expect(here).toEqual([MAX_SIGNAL_PAYLOAD_BYTES + 1]);
    expect(there).toEqual([]);
    expect(a.stats()).toMatchObject({ oversized: 1, sent: 0 });
  });

  it('still delivers here when the transport is down (the others poll), counting the drop', () => {
    const wire = new Wire();
    const a = new FakeRemoteBus(wire);
    const b = new FakeRemoteBus(wire);
    const here: string[] = [];
    const there: string[] = [];
    a.subscribe('cancel', (p) => here.push(p));
    b.subscribe('cancel', (p) => there.push(p));
    wire.up = false;
    a.publish('cancel', 'c1');
    expect(here).toEqual(['c1']);
    expect(there).toEqual([]);
    expect(a.stats()).toMatchObject({ dropped: 1, connected: false });
  });

  it('ignores a received envelope without an origin', () => {
    const wire = new Wire();
    const a = new FakeRemoteBus(wire);
    const seen: string[] = [];
    a.subscribe('steering', (p) => seen.push(p));
    (a as unknown as { received(c: string, e: string): void }).received('steering', 'no-origin');
    expect(seen).toEqual([]);
  });
});

describe('reconnectDelayMs', () => {
  it('grows from about 100 ms to at most 5 s, with jitter in the upper half', () => {
    for (let attempt = 0; attempt < 20; attempt++) {
      const base = Math.min(5000, 100 * 2 ** Math.min(attempt, 6));
      const d = reconnectDelayMs(attempt);
      expect(d).toBeGreaterThanOrEqual(base / 2);
      expect(d).toBeLessThanOrEqual(base);
    }
  });
});
