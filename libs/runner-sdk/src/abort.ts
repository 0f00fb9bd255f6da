/*
 * Waiting on a run's AbortSignal without one 'abort' listener per wait. A run's host API calls,
 * model streams, steering pulls and MCP bridges all watch the run's signal; with a listener each,
 * a run making 11 calls at once made Node warn "MaxListenersExceededWarning: Possible
 * EventTarget memory leak detected. 11 abort listeners added to [AbortSignal]". Here a signal
 * gets one listener while anything waits on it, removed when the last wait settles.
 */

interface Watchers {
  callbacks: Set<() => void>;
  listener: () => void;
}

const watched = new WeakMap<AbortSignal, Watchers>();
const noop = (): void => undefined;

/**
 * Calls `callback` once when `signal` aborts. Returns the function that stops watching: call it
 * when what waited has settled (it may be called more than once). Without a signal, or once
 * the signal has aborted, nothing is registered (the caller checks `signal.aborted` itself).
 */
export function watchAbort(signal: AbortSignal | undefined, callback: () => void): () => void {
  if (!signal || signal.aborted) {
    return noop;
  }
  let watchers = watched.get(signal);
  if (!watchers) {
    const callbacks = new Set<() => void>();
    const listener = () => {
      watched.delete(signal);
      for (const cb of [...callbacks]) {
        cb();
      }
      callbacks.clear();
    };
    watchers = { callbacks, listener };
    watched.set(signal, watchers);
    signal.addEventListener('abort', listener, { once: true });
  }
  const entry = () => callback();
  watchers.callbacks.add(entry);
  const own = watchers;
  return () => {
    if (own.callbacks.delete(entry) && own.callbacks.size === 0 && watched.get(signal) === own) {
      watched.delete(signal);
      signal.removeEventListener('abort', own.listener);
    }
  };
}
