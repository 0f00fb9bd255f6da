import { deliveryPolicySchema } from '@libs/agents';
import type { RunStatus } from '@libs/protocol';
import { initialState, normalise, type NormaliserState, type ResultLike } from './delivery-normaliser';
import type { DeliveryOp } from './ops';
import { deliveryPlan, type DeliveryPlan } from './plan';
import { measure } from './split';
import { deliveryContextOf, SURFACE_PRESETS } from './surfaces';

const RUN = '00000000-0000-4000-8000-000000000001';

/** A platform that applies ops: messages by delivery id, in the order they were created. */
function platform(ops: DeliveryOp[]) {
  const messages = new Map<string, string>();
  for (const op of ops) {
    const text = op.payload.text as string;
    if (op.op === 'message.send' || (op.op === 'message.final' && op.target_delivery_id === null)) {
      messages.set(op.delivery_id, text);
    } else if (op.op === 'message.edit' || op.op === 'message.final') {
      expect(messages.has(op.target_delivery_id!)).toBe(true);
      messages.set(op.target_delivery_id!, text);
    }
  }
  return [...messages.values()];
}

interface Step {
  at: number;
  result?: ResultLike;
  end?: { result: ResultLike; status: RunStatus };
}

/** Feeds results at simulated times, with ticks when a pending edit is due, as RunDelivery does. */
function play(plan: DeliveryPlan, steps: Step[]): DeliveryOp[] {
  let state: NormaliserState = initialState(RUN);
  const ops: DeliveryOp[] = [];
  const due = () => {
    const m = state.open;
    return plan.mode === 'edit' && m?.current && m.text.slice(m.base) !== m.shown
      ? m.last_edit_at + plan.edit_interval_ms
      : null;
  };
  for (const s of steps) {
    for (let d = due(); d !== null && d <= s.at; d = due()) {
      const r = normalise(plan, state, { kind: 'tick' }, d);
      state = r.state;
      ops.push(...r.ops);
      if (r.ops.length === 0) {
        break;
      }
    }
    const r = s.end
      ? normalise(plan, state, { kind: 'end', ...s.end }, s.at)
      : normalise(plan, state, { kind: 'result', result: s.result! }, s.at);
    state = r.state;
    ops.push(...r.ops);
  }
  return ops;
}

let seq = 0;
const result = (type: string, data: Record<string, unknown>): ResultLike => ({
  run_id: RUN,
  sequence: ++seq,
  type,
  data,
});
const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i}${i % 40 === 39 ? '.\n\n' : ' '}`);

type Pattern = 'cumulative' | 'incremental' | 'completed_only' | 'terminal_message';
type Ending = 'completed' | 'failed' | 'cancelled' | 'timeout';

function script(
  pattern: Pattern,
  ending: Ending,
  pieces: string[],
  spacingMs: number,
): { steps: Step[]; text: string } {
  const text = pieces.join('');
  const steps: Step[] = [];
  let t = 0;
  let soFar = '';
  if (pattern === 'cumulative' || pattern === 'incremental') {
    for (const p of pieces) {
      soFar += p;
      const chunk = pattern === 'cumulative' ? { role: 'assistant', content: p, all_content: soFar } : { content: p };
      steps.push({ at: (t += spacingMs), result: result('message.delta', { chunk }) });
    }
  }
  if (ending === 'completed') {
    if (pattern !== 'terminal_message') {
      steps.push({
        at: (t += 1),
        result: result('message.completed', { message: { role: 'assistant', content: text } }),
      });
    }
    const data = pattern === 'terminal_message' ? { message: { role: 'assistant', content: text } } : {};
    steps.push({ at: (t += 1), end: { result: result('run.completed', data), status: 'completed' } });
  } else {
    const code = ending === 'cancelled' ? 'cancelled' : ending === 'timeout' ? 'runner.timeout' : 'runner.error';
    const error = 'Traceback: secret-token-123 at /srv/app.py';
    steps.push({
      at: (t += 1),
      end: { result: result('run.failed', { error, code, retryable: true }), status: ending },
    });
  }
  return { steps, text };
}

const SURFACES = [...Object.keys(SURFACE_PRESETS), 'api'];
const PATTERNS: Pattern[] = ['cumulative', 'incremental', 'completed_only', 'terminal_message'];
const ENDINGS: Ending[] = ['completed', 'failed', 'cancelled', 'timeout'];
const cases = SURFACES.flatMap((s) => PATTERNS.flatMap((p) => ENDINGS.map((e) => [s, p, e] as const)));

describe('normalise: every surface × streaming pattern × ending', () => {
  const policy = deliveryPolicySchema.parse({});
  it.each(cases)('%s, %s deltas, run %s', (surface, pattern, ending) => {
    const plan = deliveryPlan(policy, deliveryContextOf({ surface, reply_target: { chat: 42 } }));
    // 450 words (~2.7 KB, paragraphs every 40 words), a delta every 30 ms.
    const { steps, text } = script(pattern, ending, words(450), 30);
    const ops = play(plan, steps);

    expect(ops.map((o) => o.sequence)).toEqual(ops.map((_, i) => i + 1));
    for (const o of ops) {
      expect(o.idempotency_key).toBe(`${RUN}:${o.sequence}`);
      expect(o.reply_target).toEqual({ chat: 42 });
      if (typeof o.payload.text === 'string' && plan.max_message_size !== null) {
        expect(measure(o.payload.text, plan.size_unit)).toBeLessThanOrEqual(plan.max_message_size);
      }
    }
    const messages = platform(ops);
    const finals = ops.filter((o) => o.op === 'message.final');
    const notices = ops.filter((o) => o.op === 'notice.send');
    if (ending === 'completed') {
      // What the platform shows at the end is the completed message, in order.
      expect(messages.join('')).toBe(text);
      expect(finals).toHaveLength(1);
      expect(notices).toHaveLength(0);
      expect(ops[ops.length - 1].op).toBe('message.final');
    } else {
      expect(notices).toHaveLength(1);
      expect(notices[0].payload.kind).toBe(ending);
      expect(JSON.stringify(notices[0].payload)).not.toMatch(/secret|Traceback|app\.py/);
      const streamed = plan.mode !== 'final' && (pattern === 'cumulative' || pattern === 'incremental');
      // What streamed is ended as shown (incomplete); a final-only surface shows nothing partial.
      expect(finals.length).toBe(streamed ? 1 : 0);
      if (streamed) {
        expect(finals[0].payload.incomplete).toBe(true);
        expect(messages.join('')).toBe(text);
      } else {
        expect(messages).toEqual([]);
      }
    }
    if (plan.mode === 'edit') {
      // Edits of one message keep the interval (overflow edits freeze a full message at once).
      const last = new Map<string, number>();
      for (const o of ops) {
        if (o.op === 'message.edit' && o.payload.text === messages[o.payload.part as number]) {
          continue;
        }
        if (o.op === 'message.edit') {
          const prev = last.get(o.target_delivery_id!);
          if (prev !== undefined) {
            expect(o.created_at - prev).toBeGreaterThanOrEqual(plan.edit_interval_ms);
          }
          last.set(o.target_delivery_id!, o.created_at);
        }
      }
    }
    if (plan.mode === 'final' && ending === 'completed') {
      expect(ops.every((o) => o.op === 'message.send' || o.op === 'message.final')).toBe(true);
    }
  });
});

describe('normalise: rules', () => {
  const policy = (p: Record<string, unknown> = {}) => deliveryPolicySchema.parse(p);

  it('2,000 deltas to an edit surface at 1 s: one send, bounded edits, final == completed', () => {
    const plan = deliveryPlan(policy(), deliveryContextOf({ surface: 'slack', max_message_size: 100_000 }));
    const pieces = Array.from({ length: 2000 }, (_, i) => `t${i} `);
    const { steps, text } = script('cumulative', 'completed', pieces, 5); // 10 s of streaming
    const ops = play(plan, steps);
    const sends = ops.filter((o) => o.op === 'message.send');
    const edits = ops.filter((o) => o.op === 'message.edit');
    const finals = ops.filter((o) => o.op === 'message.final');
    expect(sends).toHaveLength(1);
    expect(edits.length).toBeLessThanOrEqual(Math.ceil(10_000 / plan.edit_interval_ms) + 1);
    expect(finals).toHaveLength(1);
    expect(finals[0].target_delivery_id).toBe(sends[0].delivery_id);
    expect(finals[0].payload.text).toBe(text);
  });

  it('a 100 KB answer to a 4096 limit: ordered parts within the limit whose concatenation is the answer', () => {
    const plan = deliveryPlan(policy(), deliveryContextOf({ surface: 'webhook', max_message_size: 4096 }));
    const answer = words(17_000)
      .join('')
      .slice(0, 100 * 1024);
    const ops = play(plan, script('completed_only', 'completed', [answer], 0).steps);
    expect(ops.length).toBeGreaterThanOrEqual(25);
    expect(ops.every((o) => (o.payload.text as string).length <= 4096)).toBe(true);
    expect(ops.map((o) => o.payload.part)).toEqual(ops.map((_, i) => i));
    expect(ops.map((o) => o.payload.text).join('')).toBe(answer);
    expect(ops[ops.length - 1].op).toBe('message.final');
  });

  it('parts mode sends complete paragraphs as they stream, the rest as the final part', () => {
    const plan = deliveryPlan(policy(), deliveryContextOf({ surface: 'api' }));
    expect(plan.mode).toBe('parts');
    const ops = play(plan, script('incremental', 'completed', ['One.\n\n', 'Two', '.\n\n', 'Three.'], 10).steps);
    expect(ops.map((o) => [o.op, o.payload.text])).toEqual([
      ['message.send', 'One.\n\n'],
      ['message.send', 'Two.\n\n'],
      ['message.final', 'Three.'],
    ]);
  });

  it('streaming_mode final and enable_streaming false send only the completed message', () => {
    for (const p of [{ streaming_mode: 'final' }, { enable_streaming: false }]) {
      const plan = deliveryPlan(policy(p), deliveryContextOf({ surface: 'api' }));
      const ops = play(plan, script('incremental', 'completed', ['One.\n\n', 'Two.'], 10).steps);
      expect(ops.map((o) => [o.op, o.payload.text])).toEqual([['message.final', 'One.\n\nTwo.']]);
    }
  });

  it('min_edit_chars holds small edits back; the timed tick sends what is pending', () => {
    const plan = deliveryPlan(
      policy({ edit_interval_ms: 1000, min_edit_chars: 50 }),
      deliveryContextOf({ surface: 'telegram' }),
    );
    let state = initialState(RUN);
    const step = (text: string, at: number) => {
      const r = normalise(
        plan,
        state,
        { kind: 'result', result: result('message.delta', { chunk: { all_content: text } }) },
        at,
      );
      state = r.state;
      return r.ops;
    };
    expect(step('Hello', 0).map((o) => o.op)).toEqual(['message.send']);
    expect(step('Hello there', 2000)).toEqual([]); // due, but only 6 new characters
    const tick = normalise(plan, state, { kind: 'tick' }, 2500);
    expect(tick.ops.map((o) => [o.op, o.payload.text])).toEqual([['message.edit', 'Hello there']]);
  });

  it('notices: custom text, silenced, retry hint only when retryable', () => {
    const run = (p: Record<string, unknown>, status: RunStatus, retryable: boolean) => {
      const plan = deliveryPlan(policy(p), deliveryContextOf({ surface: 'telegram' }));
      const end = result('run.failed', { error: 'boom', code: status === 'cancelled' ? 'cancelled' : 'x', retryable });
      return normalise(plan, initialState(RUN), { kind: 'end', result: end, status }, 0).ops;
    };
    expect(run({ notice_texts: { failed: 'Oops!' } }, 'failed', false)[0].payload.text).toBe('Oops!');
    expect(run({ cancel_notice: false }, 'cancelled', false)).toEqual([]);
    expect(run({}, 'failed', true)[0].payload.text).toMatch(/try again/);
    expect(run({}, 'failed', false)[0].payload.text).not.toMatch(/try again/);
    expect(run({ notice_texts: { timeout: 'Too slow' } }, 'timeout', true)[0].payload).toEqual({
      kind: 'timeout',
      text: 'Too slow',
      retryable: true,
    });
  });

  it('images and files of a completed message become attachments after its text', () => {
    const plan = deliveryPlan(policy(), deliveryContextOf({ surface: 'webhook' }));
    const content = [
      { type: 'text', text: 'Here you go' },
      { type: 'image_url', image_url: { url: 'https://x.test/a.png' } },
      { type: 'file_url', file_url: 'https://x.test/b.pdf', file_name: 'b.pdf' },
    ];
    const ops = play(plan, [
      { at: 0, result: result('message.completed', { message: { role: 'assistant', content } }) },
      { at: 1, end: { result: result('run.completed', {}), status: 'completed' } },
    ]);
    expect(ops.map((o) => [o.op, o.payload.text ?? o.payload.attachment])).toEqual([
      ['message.final', 'Here you go'],
      ['attachment.send', { type: 'image', url: 'https://x.test/a.png' }],
      ['attachment.send', { type: 'file', url: 'https://x.test/b.pdf', name: 'b.pdf' }],
    ]);
  });

  it('run.completed repeating the completed message is not sent twice; nothing after the end', () => {
    const plan = deliveryPlan(policy(), deliveryContextOf({ surface: 'webhook' }));
    const message = { role: 'assistant', content: 'Same' };
    let state = initialState(RUN);
    const ops: DeliveryOp[] = [];
    for (const input of [
      { kind: 'result' as const, result: result('message.completed', { message }) },
      { kind: 'end' as const, result: result('run.completed', { message }), status: 'completed' as const },
      { kind: 'result' as const, result: result('message.completed', { message }) },
    ]) {
      const r = normalise(plan, state, input, 0);
      state = r.state;
      ops.push(...r.ops);
    }
    expect(ops.map((o) => o.op)).toEqual(['message.final']);
  });

  it('presets are overridden field by field by the event', () => {
    const ctx = deliveryContextOf({ surface: 'Telegram', supports_edit: false, max_message_size: 1000 });
    expect(ctx).toMatchObject({ supports_streaming: true, supports_edit: false, max_message_size: 1000 });
    expect(deliveryContextOf({ surface: 'lark' })).toMatchObject({ supports_edit: true, max_message_size: 30_000 });
    expect(deliveryContextOf(undefined)).toMatchObject({
      surface: 'api',
      supports_streaming: true,
      supports_edit: false,
    });
    expect(
      deliveryPlan(policy({ edit_interval_ms: 0 }), deliveryContextOf({ surface: 'slack' })).edit_interval_ms,
    ).toBe(1200);
  });
});
