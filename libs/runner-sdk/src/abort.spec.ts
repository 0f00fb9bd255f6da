import { getEventListeners } from 'node:events';
import { watchAbort } from './abort';

/* watchAbort (abort.ts): one 'abort' listener per signal while anything waits on it. */

const listeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;

describe('watchAbort', () => {
  it('puts one listener on the signal for any number of waits and removes it when the last one settles', () => {
    const controller = new AbortController();
    const unwatch = Array.from({ length: 50 }, () => watchAbort(controller.signal, () => undefined));
    expect(listeners(controller.signal)).toBe(1);
    unwatch.slice(0, 49).forEach((stop) => stop());
    expect(listeners(controller.signal)).toBe(1);
    unwatch[49]();
    unwatch[49](); // a second call changes nothing
    expect(listeners(controller.signal)).toBe(0);
  });

  it('calls every callback still watching once when the signal aborts, and none that stopped', () => {
    const controller = new AbortController();
    const called: number[] = [];
    const stops = [0, 1, 2].map((i) => watchAbort(controller.signal, () => called.push(i)));
    stops[1]();
    controller.abort();
    controller.signal.dispatchEvent(new Event('abort')); // a second event reaches no callback
    expect(called).toEqual([0, 2]);
    expect(listeners(controller.signal)).toBe(0);
    stops[0](); // stopping after the abort is harmless
  });

  it('registers nothing without a signal or on a signal already aborted', () => {
    expect(() => watchAbort(undefined, () => undefined)()).not.toThrow();
    const controller = new AbortController();
    controller.abort();
    const called: string[] = [];
    watchAbort(controller.signal, () => called.push('x'));
    expect(listeners(controller.signal)).toBe(0);
    expect(called).toEqual([]);
  });

  it('watches again after the listener was removed', () => {
    const controller = new AbortController();
    watchAbort(controller.signal, () => undefined)();
    const called: string[] = [];
    watchAbort(controller.signal, () => called.push('again'));
    expect(listeners(controller.signal)).toBe(1);
    controller.abort();
    expect(called).toEqual(['again']);
  });
});
