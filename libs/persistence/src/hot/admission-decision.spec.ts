import { decide, FREE, type DecisionTable } from './admission-decision';

const steer: DecisionTable = { busy: 'queued', steer_into: 'run-1', max_queue: 2 };
const queue: DecisionTable = { busy: 'queued', steer_into: null, max_queue: 2 };
const reject: DecisionTable = { busy: 'rejected', steer_into: null, max_queue: 2 };
const running = (over: Partial<typeof FREE> = {}) => ({
  running_run_id: 'run-1',
  queued_on_run: 0,
  waiting: 0,
  ...over,
});

describe('admission decision table', () => {
  it.each([steer, queue, reject])('a free conversation starts a run, whatever the table (%o)', (t) => {
    expect(decide(t, FREE)).toBe('started');
  });

  it('steers into the running run it names while nothing waits and its queue has room', () => {
    expect(decide(steer, running())).toBe('steered');
    expect(decide(steer, running({ queued_on_run: 1 }))).toBe('steered');
  });

  it.each([
    ['another run is running', running({ running_run_id: 'run-2' })],
    ['an earlier event waits', running({ waiting: 1 })],
    ['the run queue is full', running({ queued_on_run: 2 })],
    ['runs wait with nothing running', { running_run_id: null, queued_on_run: 0, waiting: 1 }],
  ])('steer falls back to busy when %s', (_why, s) => {
    expect(decide(steer, s)).toBe('queued');
  });

  it.each([
    ['queued', queue],
    ['rejected', reject],
  ] as const)('a busy conversation gives the table busy (%s)', (expected, t) => {
    expect(decide(t, running())).toBe(expected);
    expect(decide(t, { running_run_id: null, queued_on_run: 0, waiting: 3 })).toBe(expected);
  });
});
