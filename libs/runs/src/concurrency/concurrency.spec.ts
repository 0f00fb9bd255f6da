import { decide } from '@libs/persistence';
import { decisionTable, effectiveMode, MAX_STEERING_QUEUE, type ConcurrencyMode } from './concurrency';

const free = { running_run_id: null, queued_on_run: 0, waiting: 0 };
const busy = { running_run_id: 'run-1', queued_on_run: 0, waiting: 0 };
const yes = true;
const no = false;

describe('effectiveMode', () => {
  it.each([
    [undefined, undefined, true, 'steer'],
    [undefined, undefined, false, 'queue'],
    [undefined, 'reject', true, 'reject'],
    [undefined, 'steer', false, 'steer'],
    ['interrupt', 'reject', true, 'interrupt'],
    ['queue', undefined, true, 'queue'],
  ] as const)('event %s, agent %s, runner steers %s → %s', (override, agent, steers, expected) => {
    expect(effectiveMode(override, agent, steers)).toBe(expected);
  });
});

describe('decisionTable (applied by decide)', () => {
  const modes: ConcurrencyMode[] = ['steer', 'queue', 'interrupt', 'reject'];
  const table = (mode: ConcurrencyMode, canSteer: boolean, message = true) =>
    decisionTable(mode, message, canSteer ? 'run-1' : null);

  it('starts a run in a free conversation, whatever the mode', () => {
    for (const mode of modes) {
      expect(decide(table(mode, false), free)).toBe('started');
    }
  });

  it.each([
    ['steer', busy, yes, 'steered'],
    ['steer', busy, no, 'queued'], // the running run cannot pull steering
    ['steer', { ...busy, queued_on_run: MAX_STEERING_QUEUE - 1 }, yes, 'steered'],
    ['steer', { ...busy, queued_on_run: MAX_STEERING_QUEUE }, yes, 'queued'], // overflow into queue
    ['steer', { ...busy, waiting: 1 }, yes, 'queued'], // never overtakes an earlier message
    ['steer', { ...free, waiting: 2 }, yes, 'queued'], // waiting runs (e.g. for their runner)
    ['steer', { ...busy, running_run_id: 'run-2' }, yes, 'queued'], // another run than the steerable one
    ['queue', busy, yes, 'queued'],
    ['interrupt', busy, yes, 'queued'],
    ['interrupt', { ...free, waiting: 1 }, yes, 'queued'],
    ['reject', busy, yes, 'rejected'],
    ['reject', { ...free, waiting: 1 }, yes, 'rejected'],
  ] as const)('%s in %j → %s', (mode, situation, canSteer, expected) => {
    expect(decide(table(mode, canSteer), situation)).toBe(expected);
  });

  it('steers only messages', () => {
    expect(decide(table('steer', true, false), busy)).toBe('queued');
  });
});
