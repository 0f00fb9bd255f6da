import { MemorySignalBus } from './memory-bus';
import { waitForTruth } from './wait';

describe('waitForTruth', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('answers at once when the truth is already there', async () => {
    const bus = new MemorySignalBus();
    await expect(
      waitForTruth({ bus, channel: 'steering', check: () => Promise.resolve('found'), pollMs: 100, timeoutMs: 1000 }),
    ).resolves.toBe('found');
  });

  it('reads again on a matching signal, not on another', async () => {
    const bus = new MemorySignalBus();
    let truth: string | null = null;
    const check = jest.fn(() => Promise.resolve(truth));
    const w = waitForTruth({
      bus,
      channel: 'steering',
      match: (p) => p === 'r1',
      check,
      pollMs: 10_000,
      timeoutMs: 60_000,
    });
    await jest.advanceTimersByTimeAsync(0);
    expect(check).toHaveBeenCalledTimes(1);
    bus.publish('steering', 'r2');
    await jest.advanceTimersByTimeAsync(0);
    expect(check).toHaveBeenCalledTimes(1);
    truth = 'item';
    bus.publish('steering', 'r1');
    await expect(w).resolves.toBe('item');
    expect(check).toHaveBeenCalledTimes(2);
  });

  it('finds the truth by polling when no signal comes (a lost wake-up costs one poll)', async () => {
    const bus = new MemorySignalBus();
    let truth = false;
    const check = jest.fn(() => Promise.resolve(truth ? 42 : null));
    const w = waitForTruth({ bus, channel: 'steering', check, pollMs: 500, timeoutMs: 60_000 });
    await jest.advanceTimersByTimeAsync(1200);
    expect(check).toHaveBeenCalledTimes(3);
    truth = true;
    await jest.advanceTimersByTimeAsync(500);
    await expect(w).resolves.toBe(42);
  });

  it('gives null at the timeout and when aborted, and leaves nothing subscribed', async () => {
    const bus = new MemorySignalBus();
    const check = jest.fn(() => Promise.resolve(null));
    const timed = waitForTruth({ bus, channel: 'cancel', check, pollMs: 400, timeoutMs: 1000 });
    await jest.advanceTimersByTimeAsync(1000);
    await expect(timed).resolves.toBeNull();

    const abort = new AbortController();
    const aborted = waitForTruth({
      bus,
      channel: 'cancel',
      check,
      pollMs: 400,
      timeoutMs: 60_000,
      abort: abort.signal,
    });
    await jest.advanceTimersByTimeAsync(0);
    abort.abort();
    await expect(aborted).resolves.toBeNull();
    const calls = check.mock.calls.length;
    bus.publish('cancel', 'x');
    await jest.advanceTimersByTimeAsync(10_000);
    expect(check).toHaveBeenCalledTimes(calls);
  });

  it('does not miss a signal raised while the truth is being read', async () => {
    const bus = new MemorySignalBus();
    let reads = 0;
    const check = () => {
      reads++;
      if (reads === 1) {
        // The item lands (and its signal fires) after this read looked.
        bus.publish('steering', 'r1');
        return Promise.resolve(null);
      }
      return Promise.resolve('landed');
    };
    const w = waitForTruth({ bus, channel: 'steering', check, pollMs: 60_000, timeoutMs: 120_000 });
    await expect(w).resolves.toBe('landed');
    expect(reads).toBe(2);
  });
});
