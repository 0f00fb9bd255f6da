import { InProcessSignals, nextSignal } from './signal-port';

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
