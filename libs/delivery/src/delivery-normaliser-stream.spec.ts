import fc from 'fast-check';
import { deliveryPolicySchema } from '@libs/agents';
import { wholeTextParts } from './whole-text.oracle';
import {
  LARGE_EDIT,
  initialState,
  nextDueAt,
  normalise,
  type NormaliserState,
  type ResultLike,
} from './delivery-normaliser';
import type { DeliveryOp } from './ops';
import { deliveryPlan, type DeliveryPlan } from './plan';
import { measure, splitText } from './split';
import { deliveryContextOf, type DeliveryRequest } from './surfaces';

/*
 * The normaliser works incrementally (a delta costs O(its size)): these properties check that it
 * delivers exactly what the whole-text algorithm it replaced did, for any text cut into any deltas.
 */

const RUN = '00000000-0000-4000-8000-000000000002';

const planOf = (req: DeliveryRequest, policy: Record<string, unknown> = {}): DeliveryPlan =>
  deliveryPlan(deliveryPolicySchema.parse(policy), deliveryContextOf(req));

/** Feeds the deltas (content only, or cumulative all_content), then the end; ticks when an edit is due. */
function run(
  plan: DeliveryPlan,
  deltas: string[],
  opts: { cumulative?: boolean; completed?: string | null; stepMs?: number; status?: 'completed' | 'failed' } = {},
): DeliveryOp[] {
  let state: NormaliserState = initialState(RUN);
  let sequence = 0;
  let now = 0;
  let soFar = '';
  const ops: DeliveryOp[] = [];
  const step = (input: Parameters<typeof normalise>[2]) => {
    const r = normalise(plan, state, input, now);
    state = r.state;
    ops.push(...r.ops);
  };
  const result = (type: string, data: Record<string, unknown>): ResultLike => ({
    run_id: RUN,
    sequence: ++sequence,
    type,
    data,
  });
  for (const d of deltas) {
    now += opts.stepMs ?? 0;
    const due = nextDueAt(plan, state);
    if (due !== null && due <= now) {
      step({ kind: 'tick' });
    }
    soFar += d;
    const chunk = opts.cumulative ? { content: d, all_content: soFar } : { content: d };
    step({ kind: 'result', result: result('message.delta', { chunk }) });
  }
  const message = opts.completed ? { role: 'assistant', content: opts.completed } : undefined;
  if (opts.status === 'failed') {
    step({ kind: 'end', result: result('run.failed', { code: 'runner.error' }), status: 'failed' });
  } else {
    step({ kind: 'end', result: result('run.completed', message ? { message } : {}), status: 'completed' });
  }
  return ops;
}

/**
 * The platform shows the answer, except a whitespace-only rest after the last part sent and
 * whitespace no message could carry: a run that does not fit in one message with the grapheme after
 * it (docs/delivery.md#splitting). No message is whitespace only.
 */
function showsAnswer(messages: string[], t: string, limit: number | null = null): void {
  for (const m of messages) {
    expect(m).toMatch(/\S/);
  }
  const joined = messages.join('');
  expect(joined.replace(/\s+/g, '')).toBe(t.replace(/\s+/g, ''));
  // The generated graphemes measure at most 4 (chars or bytes), their whitespace 1.
  if (limit === null || !new RegExp(`\\s{${Math.max(1, limit - 4)},}`).test(t)) {
    expect(t.startsWith(joined)).toBe(true);
    expect(t.slice(joined.length)).toMatch(/^\s*$/);
  }
}

/** No op carries a text that is empty or whitespace only (docs/delivery.md#splitting). */
function noBlankText(ops: DeliveryOp[]): void {
  for (const o of ops) {
    if (typeof o.payload.text === 'string') {
      expect({ op: o.op, text: o.payload.text }).toEqual({ op: o.op, text: expect.stringMatching(/\S/) });
    }
  }
}

/**
 * No `message.edit` repeats the text its message already shows (Telegram refuses it: "message is
 * not modified"). `message.final` is the answer's end marker and may repeat it (docs/delivery.md#delivery-ops).
 */
function noIdenticalEdit(ops: DeliveryOp[]): void {
  const showing = new Map<string, string>();
  for (const o of ops) {
    const text = o.payload.text as string;
    if (o.op === 'message.send' || (o.op === 'message.final' && o.target_delivery_id === null)) {
      showing.set(o.delivery_id, text);
    } else if (o.op === 'message.edit' || o.op === 'message.final') {
      if (o.op === 'message.edit') {
        expect({ edit: o.sequence, text }).not.toEqual({ edit: o.sequence, text: showing.get(o.target_delivery_id!) });
      }
      showing.set(o.target_delivery_id!, text);
    }
  }
}

const texts = (ops: DeliveryOp[]) =>
  ops.filter((o) => o.op.startsWith('message.')).map((o) => o.payload.text as string);

/** What a platform applying the ops shows: its messages' texts in creation order. */
function shown(ops: DeliveryOp[]): string[] {
  const messages = new Map<string, string>();
  for (const o of ops) {
    if (o.op === 'message.send' || (o.op === 'message.final' && o.target_delivery_id === null)) {
      messages.set(o.delivery_id, o.payload.text as string);
    } else if (o.op === 'message.edit' || o.op === 'message.final') {
      expect(messages.has(o.target_delivery_id!)).toBe(true);
      messages.set(o.target_delivery_id!, o.payload.text as string);
    }
  }
  return [...messages.values()];
}

const piece = fc.constantFrom(
  'word ',
  'Hi. ',
  '\n',
  '\n\n',
  '\n\n\n\n',
  ' '.repeat(17),
  '```\n',
  '~~~',
  ' ',
  'x'.repeat(23),
  '👍',
  '你好。',
  'e\u0301',
);
const answer = fc
  .array(fc.oneof(piece, piece, fc.string({ maxLength: 6 })), { minLength: 1, maxLength: 80 })
  .map((a) => a.join(''));
const cut = (t: string) =>
  fc
    .array(fc.nat({ max: t.length }), { maxLength: 20 })
    .map((cuts) => [0, ...cuts.sort((a, b) => a - b), t.length])
    .map((at) => at.slice(1).map((end, i) => t.slice(at[i], end)));
/** Cuts between code points only (a delta of the protocol is a valid string on its own). */
const cutWhole = (t: string) =>
  cut(t).filter((chunks) => chunks.every((c) => !/^[\uDC00-\uDFFF]|[\uD800-\uDBFF]$/.test(c)));
const streamed = answer.chain((t) => fc.tuple(fc.constant(t), cutWhole(t)));
const limit = fc.option(fc.integer({ min: 16, max: 300 }), { nil: null });

describe('normaliser: incremental delivery equals the whole-text algorithm', () => {
  it('parts mode (chars and bytes, with and without a limit): the same messages as rescanning the whole text', () => {
    fc.assert(
      fc.property(streamed, limit, fc.boolean(), ([t, deltas], max, bytes) => {
        const req: DeliveryRequest = bytes
          ? { surface: 'wecom', supports_streaming: true, ...(max ? { max_message_size: max } : {}) }
          : { surface: 'chat', ...(max ? { max_message_size: max } : {}) };
        const plan = planOf(req);
        expect(plan.mode).toBe('parts');
        const ops = run(plan, deltas);
        expect(texts(ops)).toEqual(wholeTextParts(deltas, plan.max_message_size, plan.size_unit));
        noBlankText(ops);
        if (/\S/.test(t)) {
          showsAnswer(shown(ops), t, plan.max_message_size);
        } else {
          expect(ops).toEqual([]);
        }
      }),
      { numRuns: 400 },
    );
  });

  it('every mode: cumulative all_content gives the same ops as content-only deltas', () => {
    const plans = [
      planOf({ surface: 'chat' }),
      planOf({ surface: 'chat', max_message_size: 40 }),
      planOf({ surface: 'telegram', max_message_size: 50 }, { min_edit_chars: 5 }),
      planOf({ surface: 'edit', supports_edit: true }, { edit_interval_ms: 0 }),
      planOf({ surface: 'qq', max_message_size: 60 }),
    ];
    fc.assert(
      fc.property(streamed, fc.constantFrom(...plans), fc.integer({ min: 0, max: 700 }), ([, deltas], plan, stepMs) => {
        const strip = (ops: DeliveryOp[]) => ops.map((o) => ({ ...o, created_at: 0 }));
        expect(strip(run(plan, deltas, { cumulative: true, stepMs }))).toEqual(strip(run(plan, deltas, { stepMs })));
      }),
      { numRuns: 300 },
    );
  });

  it('final mode: any chunking gives the same ops as one delta with the whole text', () => {
    fc.assert(
      fc.property(streamed, limit, ([t, deltas], max) => {
        const plan = planOf({ surface: 'qq', ...(max ? { max_message_size: max } : {}) });
        expect(plan.mode).toBe('final');
        const ops = run(plan, deltas);
        expect(texts(ops)).toEqual(texts(run(plan, [t])));
        noBlankText(ops);
        if (/\S/.test(t)) {
          showsAnswer(shown(ops), t, plan.max_message_size);
        } else {
          expect(ops).toEqual([]);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('edit mode: the platform ends up showing the answer, each message within the limit', () => {
    fc.assert(
      fc.property(streamed, limit, fc.integer({ min: 0, max: 1500 }), ([t, deltas], max, stepMs) => {
        const plan = planOf({ surface: 'telegram', ...(max ? { max_message_size: max } : {}) });
        expect(plan.mode).toBe('edit');
        const ops = run(plan, deltas, { stepMs });
        noBlankText(ops);
        noIdenticalEdit(ops);
        // The answer ends with one message.final.
        expect(ops.filter((o) => o.op === 'message.final').length).toBe(/\S/.test(t) ? 1 : 0);
        if (/\S/.test(t)) {
          const messages = shown(ops);
          showsAnswer(messages, t, plan.max_message_size);
          for (const m of messages) {
            expect(measure(m, plan.size_unit)).toBeLessThanOrEqual(plan.max_message_size!);
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('normaliser: no op carries a whitespace-only text', () => {
  const plans = [
    planOf({ surface: 'chat' }),
    planOf({ surface: 'chat', max_message_size: 16 }),
    planOf({ surface: 'wecom', supports_streaming: true, max_message_size: 16 }),
    planOf({ surface: 'chat', max_message_size: 40 }, { streaming_mode: 'final' }),
    planOf({ surface: 'qq', max_message_size: 16 }),
    planOf({ surface: 'qq' }, { enable_streaming: false }),
    planOf({ surface: 'telegram', max_message_size: 16 }, { min_edit_chars: 1 }),
    planOf({ surface: 'edit', supports_edit: true }, { edit_interval_ms: 0 }),
  ];
  /** Answers rich in blank lines and whitespace runs, at their start, end and part boundaries. */
  const blanky = fc
    .array(fc.constantFrom('\n', '\n\n', ' ', '\t', ' '.repeat(20), 'word', 'x'.repeat(16), '```\n', '👍'), {
      minLength: 1,
      maxLength: 30,
    })
    .map((a) => a.join(''))
    .chain((t) => fc.tuple(fc.constant(t), cutWhole(t)));

  it('any mode (streaming, parts, final-only, edit), any chunking, completed or failed', () => {
    fc.assert(
      fc.property(
        blanky,
        fc.constantFrom(...plans),
        fc.boolean(),
        fc.constantFrom('completed' as const, 'failed' as const),
        fc.integer({ min: 0, max: 1500 }),
        ([t, deltas], plan, cumulative, status, stepMs) => {
          const ops = run(plan, deltas, { cumulative, status, stepMs });
          noBlankText(ops);
          noIdenticalEdit(ops);
          if (status === 'completed' && /\S/.test(t)) {
            showsAnswer(shown(ops), t, plan.max_message_size);
          }
          if (!/\S/.test(t)) {
            expect(texts(ops)).toEqual([]); // nothing to show: no message (a failed run still gets its notice)
          }
        },
      ),
      { numRuns: 600 },
    );
  });

  // The cases that failed before (a whitespace-only message: an answer's leading blank line sent as
  // its first part, a split's last or middle part; in edit mode no message.final at all), and three
  // that held already and guard the carry (blank lines lead the next message, not dropped).
  const regressions: { name: string; plan: DeliveryPlan; deltas: string[]; completed?: string; messages: string[] }[] =
    [
      {
        name: 'parts: an answer starting with a blank line (its first part was "\\n\\n")',
        plan: planOf({ surface: 'chat' }),
        deltas: ['\n\nHello', '\n\nWorld'],
        messages: ['\n\nHello\n\n', 'World'],
      },
      {
        name: 'parts: a paragraph boundary followed by blank lines up to a full part',
        plan: planOf({ surface: 'chat', max_message_size: 16 }),
        deltas: ['x'.repeat(16), '\n\n', '\n\nnext\n\nend'],
        messages: ['x'.repeat(16), '\n\n\n\nnext\n\n', 'end'],
      },
      {
        name: 'parts: an answer ending in blank lines after a full part',
        plan: planOf({ surface: 'chat', max_message_size: 16 }),
        deltas: ['x'.repeat(16) + '\n\n'],
        messages: ['x'.repeat(16)],
      },
      {
        name: 'final-only: an answer ending in blank lines after a full part',
        plan: planOf({ surface: 'qq', max_message_size: 16 }),
        deltas: ['x'.repeat(16), '\n\n'],
        messages: ['x'.repeat(16)],
      },
      {
        name: 'final-only: a whitespace run longer than a part between two words',
        plan: planOf({ surface: 'qq', max_message_size: 16 }),
        deltas: ['abc' + ' '.repeat(40) + 'd'],
        messages: ['abc' + ' '.repeat(13), 'd'],
      },
      {
        name: "edit: only blank lines after the overflow's full message (the answer got no message.final)",
        plan: planOf({ surface: 'telegram', max_message_size: 16 }),
        deltas: ['x'.repeat(10), 'x'.repeat(6) + '\n\n'],
        messages: ['x'.repeat(16)],
      },
      {
        name: 'edit: blank lines after a full message lead the next one',
        plan: planOf({ surface: 'telegram', max_message_size: 16 }),
        deltas: ['x'.repeat(16), '\n\n', 'more'],
        messages: ['x'.repeat(16), '\n\nmore'],
      },
      {
        name: 'parts: a completed message of whitespace only after streamed text ends what streamed',
        plan: planOf({ surface: 'chat' }),
        deltas: ['\n\n'],
        completed: '\n\n  ',
        messages: [],
      },
    ];

  it.each(regressions)('$name', ({ plan, deltas, completed, messages }) => {
    for (const cumulative of [false, true]) {
      const ops = run(plan, deltas, { cumulative, completed });
      noBlankText(ops);
      expect(shown(ops)).toEqual(messages);
      expect(ops.filter((o) => o.op === 'message.final').length).toBe(messages.length > 0 ? 1 : 0);
    }
  });
});

describe('normaliser: a long answer', () => {
  const delta = 'lorem ipsum '.repeat(683).slice(0, 8192);

  it('parts mode without paragraph breaks: nothing is sent until the end, then the whole answer', () => {
    const ops = run(
      planOf({ surface: 'chat' }),
      Array.from({ length: 400 }, () => delta),
    );
    expect(ops.map((o) => o.op)).toEqual(['message.final']);
    expect(ops[0].payload.text).toBe(delta.repeat(400));
  });

  it('edit mode without a limit: once a message shows LARGE_EDIT characters only the final edit follows, showing all', () => {
    const plan = planOf({ surface: 'edit', supports_edit: true }, { edit_interval_ms: 0, min_edit_chars: 0 });
    const ops = run(
      plan,
      Array.from({ length: 400 }, () => delta),
    );
    const edits = ops.filter((o) => o.op === 'message.edit').map((o) => (o.payload.text as string).length);
    expect(edits.length).toBeGreaterThan(0);
    expect(edits.slice(0, -1).every((n) => n < LARGE_EDIT)).toBe(true);
    expect(edits[edits.length - 1]).toBeLessThan(LARGE_EDIT + delta.length);
    expect(ops.map((o) => o.op).slice(-1)).toEqual(['message.final']);
    expect(ops[ops.length - 1].payload.text).toBe(delta.repeat(400));
  });

  it('final mode with a limit: the answer is split while it streams, and its end sends exactly splitText of it', () => {
    const plan = planOf({ surface: 'qq' });
    expect(plan.mode).toBe('final');
    let state: NormaliserState = initialState(RUN);
    for (let i = 0; i < 50; i++) {
      const r = normalise(
        plan,
        state,
        {
          kind: 'result',
          result: { run_id: RUN, sequence: i + 1, type: 'message.delta', data: { chunk: { content: delta } } },
        },
        0,
      );
      expect(r.ops).toEqual([]);
      state = r.state;
    }
    // Before the end most of the answer is already cut into parts.
    expect(state.open?.growing.cut).toBeGreaterThan(49 * delta.length);
    const ops = run(
      plan,
      Array.from({ length: 50 }, () => delta),
    );
    expect(ops.map((o) => o.payload.text)).toEqual(splitText(delta.repeat(50), plan.max_message_size, plan.size_unit));
  });
});

describe('parts mode: a code fence opened in a sent part stays open for the rest of the answer', () => {
  // Found by the property above (seed 1684856718): a part cut by the limit inside a fence-opening
  // line. The fence belongs to the answer (docs/delivery.md#normalisation-rules): the blank line
  // after it is inside the fence (no paragraph break), and the fence's closing line closes it (it
  // is not read as an opener that would hold every later paragraph back until the end).
  const chat = planOf({ surface: 'chat', max_message_size: 16 });
  const wecom = planOf({ surface: 'wecom', supports_streaming: true, max_message_size: 16 });
  const cases: { name: string; plan: DeliveryPlan; deltas: string[]; messages: string[] }[] = [];
  for (const f of ['~~~', '```']) {
    const opened = `${f}yvtoI1Tq=a2|word \n\nlB=b 你好。`;
    const closed = `\n${f}\n\nafter\n\nend`;
    cases.push(
      {
        name: `${f}, chars: the blank line inside the fence is no paragraph break`,
        plan: chat,
        deltas: [opened, ''],
        messages: [`${f}yvtoI1Tq=a2|w`, 'ord \n\nlB=b 你好。'],
      },
      {
        name: `${f}, bytes: inside the fence the rest is cut only at a line end`,
        plan: wecom,
        deltas: [opened, ''],
        messages: [`${f}yvtoI1Tq=a2|w`, 'ord \n\n', 'lB=b 你好。'],
      },
      {
        name: `${f}, chars: the closing line closes it, the paragraph after it is sent as it finishes`,
        plan: chat,
        deltas: [opened, closed],
        messages: [`${f}yvtoI1Tq=a2|w`, 'ord \n\nlB=b 你好。\n', `${f}\n\nafter\n\n`, 'end'],
      },
      {
        name: `${f}, bytes: the closing line closes it, the paragraph after it is sent as it finishes`,
        plan: wecom,
        deltas: [opened, closed],
        messages: [`${f}yvtoI1Tq=a2|w`, 'ord \n\n', 'lB=b 你好。\n', `${f}\n\nafter\n\n`, 'end'],
      },
    );
  }

  it.each(cases)('$name', ({ plan, deltas, messages }) => {
    expect(plan.mode).toBe('parts');
    const ops = run(plan, deltas);
    expect(texts(ops)).toEqual(messages);
    expect(wholeTextParts(deltas, plan.max_message_size, plan.size_unit)).toEqual(messages);
    expect(ops.map((o) => o.op).slice(-1)).toEqual(['message.final']);
    for (const m of messages) {
      expect(measure(m, plan.size_unit)).toBeLessThanOrEqual(16);
    }
  });

  it('cumulative deltas give the same messages; one character at a time, what the whole-text rule gives', () => {
    for (const { plan, deltas, messages } of cases) {
      expect(texts(run(plan, deltas, { cumulative: true }))).toEqual(messages);
      const chars = [...deltas.join('')];
      const ops = run(plan, chars);
      expect(texts(ops)).toEqual(wholeTextParts(chars, plan.max_message_size, plan.size_unit));
      showsAnswer(shown(ops), deltas.join(''));
    }
  });

  it('a rewrite (all_content not extending the text) takes the fence state of the new text', () => {
    // Sent: the fence-opening line's first 16 characters; then the runner rewrites the answer so that
    // its sent part opens no fence: the blank line is a paragraph break again.
    let state: NormaliserState = initialState(RUN);
    const step = (all: string, sequence: number) => {
      const r = normalise(
        chat,
        state,
        {
          kind: 'result',
          result: { run_id: RUN, sequence, type: 'message.delta', data: { chunk: { all_content: all } } },
        },
        0,
      );
      state = r.state;
      return texts(r.ops);
    };
    expect(step('~~~yvtoI1Tq=a2|word \n\nlB=b 你好。', 1)).toEqual(['~~~yvtoI1Tq=a2|w']);
    expect(step('xxxyvtoI1Tq=a2|word \n\nlB=b 你好。!', 2)).toEqual(['ord \n\n']);
  });
});

describe('edit mode: a message that overflows inside a code fence', () => {
  it('the next messages are cut as inside the fence (only at a line end), as splitting the whole answer', () => {
    const plan = planOf({ surface: 'telegram', max_message_size: 16 });
    expect(plan.mode).toBe('edit');
    for (const f of ['~~~', '```']) {
      const deltas = [`${f}yvtoI1Tq=a2|word \n\nlB=b`, ' 你好。 and more'];
      const messages = shown(run(plan, deltas));
      // Not 'lB=b 你好。 ', 'and more': a sentence end inside the fence is no boundary.
      expect(messages).toEqual([`${f}yvtoI1Tq=a2|w`, 'ord \n\n', 'lB=b 你好。 and mor', 'e']);
      expect(messages).toEqual(splitText(deltas.join(''), 16, 'chars'));
    }
  });
});

describe('edit mode: an overflow never edits a message to the text it shows', () => {
  const plan = planOf({ surface: 'telegram', max_message_size: 16 }, { min_edit_chars: 1, edit_interval_ms: 0 });
  const cases: { name: string; deltas: string[]; completed?: string; messages: string[] }[] = [
    {
      // The message showed its first part already (a paragraph end): the overflow's edit repeated it.
      name: 'a delta overflows a message that shows a whole paragraph',
      deltas: ['aaaaaaaaaa\n\n', 'bbbbbbbbbbbbbbb', 'c'],
      messages: ['aaaaaaaaaa\n\n', 'bbbbbbbbbbbbbbbc'],
    },
    {
      name: 'the completed message overflows a message that shows its first part',
      deltas: ['aaaaaaaaaa\n\n'],
      completed: 'aaaaaaaaaa\n\nbbbbbbbbbbbbbbbb',
      messages: ['aaaaaaaaaa\n\n', 'bbbbbbbbbbbbbbbb'],
    },
  ];
  it.each(cases)('$name', ({ deltas, completed, messages }) => {
    expect(plan.mode).toBe('edit');
    for (const cumulative of [false, true]) {
      const ops = run(plan, deltas, { cumulative, completed });
      noIdenticalEdit(ops);
      expect(shown(ops)).toEqual(messages);
      expect(ops.filter((o) => o.op === 'message.final').length).toBe(1);
    }
  });
});
