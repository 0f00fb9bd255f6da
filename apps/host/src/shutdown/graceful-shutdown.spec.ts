import {
  GracefulShutdown,
  INTERRUPTED_AT_SHUTDOWN,
  RECONNECT_ELSEWHERE,
  type ShutdownPorts,
} from './graceful-shutdown';

/** Fakes at every port, recording the order of what the sequence does. */
function fakes(opts: { runsFinish: 'by-themselves' | 'never'; failDrain?: boolean }) {
  const calls: string[] = [];
  let finishRuns: () => void = () => undefined;
  let active = 2;
  const ports: ShutdownPorts = {
    registry: {
      drain: () => {
        calls.push('drain');
        return opts.failDrain ? Promise.reject(new Error('database down')) : Promise.resolve();
      },
    },
    runs: {
      get activeRuns() {
        return active;
      },
      stopStarting: () => {
        calls.push('stopStarting');
        return Promise.resolve();
      },
      idle: (signal) => {
        calls.push('idle');
        return new Promise<void>((resolve) => {
          finishRuns = () => {
            active = 0;
            resolve();
          };
          signal.addEventListener('abort', () => {
            calls.push('grace over');
            resolve();
          });
        });
      },
      interruptAll: (why) => {
        calls.push(`interruptAll(${why === INTERRUPTED_AT_SHUTDOWN ? 'grace' : why}) of ${active}`);
        const n = active;
        active = 0;
        return Promise.resolve(n);
      },
    },
    runners: {
      closeAll: (reason) => {
        calls.push(`closeAll(${reason === RECONNECT_ELSEWHERE ? 'reconnect' : reason})`);
        return 1;
      },
    },
    webhooks: {
      handOver: () => {
        calls.push('handOver');
        return Promise.resolve(3);
      },
    },
    close: () => {
      calls.push('close');
      return Promise.resolve();
    },
    log: (level, msg) => {
      if (level === 'error') {
        calls.push(`error: ${msg}`);
      }
    },
  };
  return { calls, ports, finish: () => finishRuns() };
}

/** Lets the sequence run up to its next wait. */
const settle = () => new Promise((r) => setImmediate(r));

describe('GracefulShutdown', () => {
  it('drains, lets the runs finish within the grace, then closes streams, hands leases back and closes', async () => {
    const f = fakes({ runsFinish: 'by-themselves' });
    const shutdown = new GracefulShutdown(f.ports, 3_600_000);
    const done = shutdown.signal('SIGTERM');
    await settle();
    // Admission is off and nothing new starts before the wait begins; the streams stay open meanwhile.
    expect(f.calls).toEqual(['drain', 'stopStarting', 'idle']);
    f.finish();
    await done;
    expect(f.calls).toEqual([
      'drain',
      'stopStarting',
      'idle',
      'interruptAll(grace) of 0', // nothing left to interrupt
      'closeAll(reconnect)',
      'handOver',
      'close',
    ]);
  });

  it('ends the runs still active when the grace runs out interrupted, before the streams close', async () => {
    const f = fakes({ runsFinish: 'never' });
    await new GracefulShutdown(f.ports, 1).signal('SIGTERM');
    expect(f.calls).toEqual([
      'drain',
      'stopStarting',
      'idle',
      'grace over',
      'interruptAll(grace) of 2',
      'closeAll(reconnect)',
      'handOver',
      'close',
    ]);
  });

  it('a second signal during the drain cuts the grace short (terminals still written) and resolves with the first', async () => {
    const f = fakes({ runsFinish: 'never' });
    const shutdown = new GracefulShutdown(f.ports, 3_600_000);
    const first = shutdown.signal('SIGTERM');
    await settle();
    expect(shutdown.started).toBe(true);
    const second = shutdown.signal('SIGINT');
    await Promise.all([first, second]);
    expect(f.calls).toEqual([
      'drain',
      'stopStarting',
      'idle',
      'grace over',
      'interruptAll(grace) of 2',
      'closeAll(reconnect)',
      'handOver',
      'close',
    ]);
    // A third signal changes nothing.
    await shutdown.signal('SIGTERM');
    expect(f.calls.filter((c) => c === 'close')).toHaveLength(1);
  });

  it('a failing step is logged and the sequence goes on (the process still stops)', async () => {
    const f = fakes({ runsFinish: 'never', failDrain: true });
    await new GracefulShutdown(f.ports, 1).signal('SIGTERM');
    expect(f.calls[0]).toBe('drain');
    expect(f.calls[1]).toBe('error: shutdown: marking the process draining failed: database down');
    expect(f.calls.slice(-2)).toEqual(['handOver', 'close']);
  });
});
