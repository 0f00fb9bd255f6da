import { decide, FREE, type DecisionTable } from '@libs/persistence';
import { routedTable, routeOf, waitingAction } from './routing';

const table: DecisionTable = { busy: 'queued', steer_into: null, max_queue: 100 };

describe('routing: which process starts a run (docs/scale-out.md#routing)', () => {
  it('prefers the runner connected here, then another live holder, else nowhere', () => {
    expect(routeOf(true, true)).toBe('here');
    expect(routeOf(true, false)).toBe('here');
    expect(routeOf(false, true)).toBe('elsewhere');
    expect(routeOf(false, false)).toBe('nowhere');
  });

  it('makes a free conversation wait for the holder when routed elsewhere, and changes nothing otherwise', () => {
    expect(decide(routedTable(table, 'elsewhere'), FREE)).toBe('queued');
    expect(decide(routedTable(table, 'here'), FREE)).toBe('started');
    expect(decide(routedTable(table, 'nowhere'), FREE)).toBe('started');
  });

  it('keeps the policy of a busy conversation when routed elsewhere', () => {
    const busy = { running_run_id: 'r1', queued_on_run: 0, waiting: 0 };
    expect(decide(routedTable({ ...table, busy: 'rejected' }, 'elsewhere'), busy)).toBe('rejected');
    expect(decide(routedTable({ ...table, steer_into: 'r1' }, 'elsewhere'), busy)).toBe('steered');
    expect(decide(routedTable(table, 'elsewhere'), { ...FREE, waiting: 2 })).toBe('queued');
  });

  it('starts a waiting run here, leaves it to its holder, or waits for a runner up to the bound', () => {
    expect(waitingAction('here', true)).toBe('start');
    expect(waitingAction('elsewhere', false)).toBe('leave');
    expect(waitingAction('elsewhere', true)).toBe('leave');
    expect(waitingAction('nowhere', false)).toBe('wait');
    expect(waitingAction('nowhere', true)).toBe('fail');
  });
});
