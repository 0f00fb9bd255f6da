import { deliveryPolicySchema } from '@libs/agents';
import { planOf, RunDelivery } from './run-delivery';
import { deliveryContextOf } from './surfaces';

describe('planOf', () => {
  it('parses a stored policy object once and plans the same as a fresh parse', () => {
    const stored = { edit_interval_ms: 1500, min_edit_chars: 3 };
    const ctx = deliveryContextOf({ surface: 'telegram' });
    const spy = jest.spyOn(deliveryPolicySchema, 'safeParse');
    try {
      const first = planOf(stored, ctx);
      const second = planOf(stored, ctx);
      expect(spy).toHaveBeenCalledTimes(1);
      expect(second).toEqual(first);
      expect(planOf({ ...stored }, ctx)).toEqual(first);
      expect(spy).toHaveBeenCalledTimes(2);
      expect(first).toMatchObject({ edit_interval_ms: 1500, min_edit_chars: 3 });
    } finally {
      spy.mockRestore();
    }
  });

  it('plans an invalid or missing policy with the defaults', () => {
    const ctx = deliveryContextOf({ surface: 'api' });
    const defaults = planOf({}, ctx);
    expect(planOf(null, ctx)).toEqual(defaults);
    expect(planOf({ edit_interval_ms: 'soon' }, ctx)).toEqual(defaults);
  });
});

describe('RunDelivery', () => {
  afterEach(() => jest.useRealTimers());

  it('owns the state: a pending coalesced edit is flushed by its timer, then nothing after the end', () => {
    jest.useFakeTimers({ now: 0 });
    const plan = planOf({ edit_interval_ms: 1000, min_edit_chars: 0 }, deliveryContextOf({ surface: 'telegram' }));
    const due = jest.fn();
    const d = new RunDelivery(plan, 'r1', due);
    const delta = (n: number, text: string) => ({
      run_id: 'r1',
      sequence: n,
      type: 'message.delta',
      data: { chunk: { all_content: text } },
    });
    expect(d.onResult(delta(1, 'Hello')).map((o) => o.op)).toEqual(['message.send']);
    expect(d.onResult(delta(2, 'Hello world'))).toEqual([]); // within the interval: coalesced
    jest.advanceTimersByTime(999);
    expect(due).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(due).toHaveBeenCalledTimes(1);
    expect(d.tick().map((o) => [o.op, o.payload.text])).toEqual([['message.edit', 'Hello world']]);
    const end = d.onEnd({ run_id: 'r1', sequence: 3, type: 'run.completed', data: {} }, 'completed');
    expect(end.map((o) => [o.op, o.payload.text])).toEqual([['message.final', 'Hello world']]);
    expect(d.onResult(delta(4, 'late'))).toEqual([]);
    expect(d.state.seq).toBe(3);
  });

  it('a stored policy missing newer fields, or invalid, gets the defaults', () => {
    const ctx = deliveryContextOf({ surface: 'api' });
    const defaults = planOf(deliveryPolicySchema.parse({}), ctx);
    expect(planOf({ enable_streaming: true, edit_interval_ms: 1000 }, ctx)).toEqual(defaults);
    expect(planOf({ max_message_size: 1 }, ctx)).toEqual(defaults);
    expect(planOf(null, ctx)).toEqual(defaults);
  });
});
