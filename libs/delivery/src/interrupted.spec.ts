import { deliveryPolicySchema } from '@libs/agents';
import { interruptedOps } from './interrupted';
import { initialState, normalise } from './delivery-normaliser';
import { deliveryPlan } from './plan';
import { deliveryContextOf } from './surfaces';

describe('interruptedOps', () => {
  const RUN = 'run-1';
  const plan = (surface: string, p: Record<string, unknown> = {}) =>
    deliveryPlan(deliveryPolicySchema.parse(p), deliveryContextOf({ surface }));

  it('ends the message being edited as it stands, then the retryable failure notice', () => {
    const telegram = plan('telegram');
    const delta = (n: number, text: string) => ({
      kind: 'result' as const,
      result: { run_id: RUN, sequence: n, type: 'message.delta', data: { chunk: { all_content: text } } },
    });
    let state = initialState(RUN);
    const ops = [];
    for (const [i, text] of ['Hello', 'Hello world, this is a longer text now'].entries()) {
      const r = normalise(telegram, state, delta(i + 1, text), i * 2000);
      state = r.state;
      ops.push(...r.ops);
    }
    const out = interruptedOps(telegram, RUN, [...ops].reverse(), 9999);
    expect(out.map((o) => [o.sequence, o.op, o.target_delivery_id, o.payload])).toEqual([
      [
        3,
        'message.final',
        ops[0].delivery_id,
        { text: 'Hello world, this is a longer text now', part: 0, incomplete: true },
      ],
      [4, 'notice.send', null, { kind: 'failed', text: expect.stringMatching(/try again/), retryable: true }],
    ]);
  });

  it('a finished message, a surface without edits, or silenced notices add less', () => {
    expect(interruptedOps(plan('webhook'), RUN, [], 0).map((o) => [o.sequence, o.op])).toEqual([[1, 'notice.send']]);
    expect(interruptedOps(plan('telegram', { failure_notice: false }), RUN, [], 0)).toEqual([]);
  });
});
