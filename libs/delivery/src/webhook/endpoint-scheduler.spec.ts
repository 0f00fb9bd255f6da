import { EndpointScheduler, type SchedulerOptions } from './endpoint-scheduler';

const OPTS: SchedulerOptions = {
  concurrency: 4,
  perEndpoint: 2,
  breakerFailures: 3,
  breakerOpenMs: 1000,
  breakerMaxOpenMs: 5000,
};

/** Due head ops of `n` runs of one endpoint. */
const heads = (endpoint: string, n: number, from = 0) =>
  Array.from({ length: n }, (_, i) => ({ run_id: `${endpoint}-${from + i}`, endpoint }));

const ids = (picked: ReadonlyArray<{ run_id: string }>) => picked.map((p) => p.run_id);

describe('EndpointScheduler', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: 1_000_000 });
  });

  afterEach(() => {
    jest.useRealTimers();
  });

  it('holds one endpoint to its per-endpoint limit, leaving workers to the others', () => {
    const s = new EndpointScheduler(OPTS);
    // The dead endpoint's heads come first (they are older): it still gets only 2 of the 4 workers.
    const picked = s.pick([...heads('dead', 10), ...heads('ok', 1)], Date.now());
    expect(ids(picked)).toEqual(['dead-0', 'ok-0', 'dead-1']);
    expect(s.inflight).toBe(3);
    expect(ids(s.pick(heads('dead', 10), Date.now()))).toEqual([]); // dead is at its limit
  });

  it('never starts a run that is already in flight (one op of a run at a time)', () => {
    const s = new EndpointScheduler(OPTS);
    expect(ids(s.pick(heads('a', 1), Date.now()))).toEqual(['a-0']);
    expect(ids(s.pick(heads('a', 2), Date.now()))).toEqual(['a-1']);
    expect(s.isRunInflight('a-0')).toBe(true);
    s.finished('a-0', 'a', true, Date.now());
    expect(s.isRunInflight('a-0')).toBe(false);
  });

  it('takes endpoints round-robin, the one served longest ago first', () => {
    const s = new EndpointScheduler({ ...OPTS, concurrency: 3, perEndpoint: 3 });
    expect(ids(s.pick([...heads('a', 3), ...heads('b', 3)], Date.now()))).toEqual(['a-0', 'b-0', 'a-1']);
    s.finished('a-0', 'a', true, Date.now());
    // b was served before a's last turn: b goes first although a's heads are older.
    expect(ids(s.pick([...heads('a', 3, 2), ...heads('b', 3, 1)], Date.now()))).toEqual(['b-1']);
    s.finished('b-0', 'b', true, Date.now());
    expect(ids(s.pick([...heads('a', 3, 2), ...heads('b', 3, 2)], Date.now()))).toEqual(['a-2']);
  });

  it('stops at the global limit', () => {
    const s = new EndpointScheduler(OPTS);
    const picked = s.pick([...heads('a', 5), ...heads('b', 5), ...heads('c', 5)], Date.now());
    expect(picked).toHaveLength(4);
    expect(ids(picked)).toEqual(['a-0', 'b-0', 'c-0', 'a-1']);
  });

  it('opens after K consecutive failures: no attempt, no worker, until the open period ends; then one probe', () => {
    const s = new EndpointScheduler({ ...OPTS, perEndpoint: 4 });
    s.pick(heads('dead', 3), Date.now());
    s.finished('dead-0', 'dead', false, Date.now());
    s.finished('dead-1', 'dead', false, Date.now());
    expect(s.view()[0]).toMatchObject({ state: 'closed', failures: 2 });
    s.finished('dead-2', 'dead', false, Date.now());
    expect(s.view()[0]).toMatchObject({ state: 'open', inflight: 0, open_until: Date.now() + 1000 });
    expect(s.nextProbeAt(Date.now())).toBe(Date.now() + 1000);

    expect(s.pick(heads('dead', 5), Date.now())).toEqual([]);
    expect(s.inflight).toBe(0); // an open endpoint holds no worker
    jest.advanceTimersByTime(999);
    expect(s.pick(heads('dead', 5), Date.now())).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(ids(s.pick(heads('dead', 5), Date.now()))).toEqual(['dead-0']); // the probe, alone
    expect(s.view()[0]).toMatchObject({ state: 'half-open', inflight: 1 });
    expect(s.pick(heads('dead', 5, 1), Date.now())).toEqual([]);
  });

  it('a failed probe opens it again for twice as long, capped; an acknowledged one closes it', () => {
    const s = new EndpointScheduler({ ...OPTS, breakerFailures: 1 });
    const probe = () => {
      const [p] = s.pick(heads('x', 1), Date.now());
      expect(p).toBeDefined();
    };
    probe();
    s.finished('x-0', 'x', false, Date.now());
    const periods: number[] = [];
    for (let i = 0; i < 4; i++) {
      const until = s.nextProbeAt(Date.now())!;
      periods.push(until - Date.now());
      jest.setSystemTime(until);
      probe();
      s.finished('x-0', 'x', false, Date.now());
    }
    expect(periods).toEqual([1000, 2000, 4000, 5000]);
    jest.setSystemTime(s.nextProbeAt(Date.now())!);
    probe();
    s.finished('x-0', 'x', true, Date.now());
    expect(s.nextProbeAt(Date.now())).toBeNull();
    expect(ids(s.pick(heads('x', 5), Date.now()))).toEqual(['x-0', 'x-1']); // closed: its full share again
  });

  it('asks for no wake-up once an open period is over (no busy loop when the endpoint has nothing due)', () => {
    const s = new EndpointScheduler({ ...OPTS, breakerFailures: 1 });
    s.pick(heads('gone', 1), Date.now());
    s.finished('gone-0', 'gone', false, Date.now()); // its op then failed for good: no more work
    expect(s.nextProbeAt(Date.now())).toBe(Date.now() + 1000);
    jest.advanceTimersByTime(1000);
    expect(s.nextProbeAt(Date.now())).toBeNull();
    expect(ids(s.pick(heads('gone', 1, 1), Date.now()))).toEqual(['gone-1']); // new work: probed at once
  });

  it('an acknowledged attempt resets the failure count (only consecutive failures open it)', () => {
    const s = new EndpointScheduler({ ...OPTS, perEndpoint: 1 });
    for (let i = 0; i < 10; i++) {
      s.pick(heads('flaky', 1, i), Date.now());
      s.finished(`flaky-${i}`, 'flaky', i % 3 === 2, Date.now()); // fail, fail, ok, …
    }
    expect(s.nextProbeAt(Date.now())).toBeNull();
  });

  it('attempts already in flight when it opens finish without extending it; a late success closes it', () => {
    const s = new EndpointScheduler({ ...OPTS, perEndpoint: 4, concurrency: 8, breakerFailures: 2 });
    s.pick(heads('e', 4), Date.now());
    s.finished('e-0', 'e', false, Date.now());
    s.finished('e-1', 'e', false, Date.now());
    const until = s.nextProbeAt(Date.now());
    jest.advanceTimersByTime(100);
    s.finished('e-2', 'e', false, Date.now());
    expect(s.nextProbeAt(Date.now())).toBe(until);
    s.finished('e-3', 'e', true, Date.now());
    expect(s.nextProbeAt(Date.now())).toBeNull();
  });

  it('forgets healthy idle endpoints (memory stays bounded by endpoints with work)', () => {
    const s = new EndpointScheduler(OPTS);
    for (let i = 0; i < 100; i++) {
      s.pick(heads(`e${i}`, 1), Date.now());
      s.finished(`e${i}-0`, `e${i}`, true, Date.now());
    }
    s.pick(heads('last', 1), Date.now());
    expect(s.view().map((v) => v.endpoint)).toEqual(['last']);
  });

  it('a skipped run (its webhook lease is elsewhere) frees its slot and leaves the breaker alone', () => {
    const s = new EndpointScheduler(OPTS);
    expect(ids(s.pick(heads('a', 2), Date.now()))).toEqual(['a-0', 'a-1']);
    s.skipped('a-0', 'a');
    expect(s.isRunInflight('a-0')).toBe(false);
    expect(s.view()[0]).toMatchObject({ state: 'closed', inflight: 1, failures: 0 });
    // A probe that did not go: still open, and the next look probes again at once.
    for (let i = 0; i < 3; i++) {
      s.finished('a-1', 'a', false, Date.now());
      s.pick(heads('a', 1, 1), Date.now());
    }
    jest.advanceTimersByTime(5000);
    expect(ids(s.pick(heads('a', 1, 5), Date.now()))).toEqual(['a-5']);
    expect(s.view()[0]).toMatchObject({ state: 'half-open', inflight: 1 });
    s.skipped('a-5', 'a');
    expect(s.view()[0]).toMatchObject({ state: 'open', inflight: 0 });
    expect(ids(s.pick(heads('a', 1, 6), Date.now()))).toEqual(['a-6']);
  });
});
