import fc from 'fast-check';
import { DEFAULT_MAX_BATCH, Outbox, RunResults } from './results';
import type { RunResult } from './types';

/** One step of a generated program: an emitter call on one of a few runs, or a tick boundary. */
type Op =
  | { kind: 'tick' }
  | {
      kind: 'emit';
      run: number;
      what: 'delta' | 'message' | 'state' | 'tool' | 'custom' | 'completed' | 'failed' | 'close';
    };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 1, arbitrary: fc.constant<Op>({ kind: 'tick' }) },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('emit' as const),
      run: fc.integer({ min: 0, max: 3 }),
      what: fc.constantFrom(
        'delta' as const,
        'delta' as const,
        'message' as const,
        'state' as const,
        'tool' as const,
        'custom' as const,
        'completed' as const,
        'failed' as const,
        'close' as const,
      ),
    }),
  },
);

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Runs a program; returns the frames written and, per tick, the results emitted in it. */
async function play(ops: Op[], maxBatch: number) {
  const frames: RunResult[][] = [];
  const outbox = new Outbox(async (frame) => {
    frames.push(frame);
    await Promise.resolve();
  }, maxBatch);
  /** What was pushed, grouped by tick. */
  const pushed: RunResult[][] = [[]];
  const recording = {
    push: (result: RunResult) => {
      pushed[pushed.length - 1].push(result);
      return outbox.push(result);
    },
  };
  const runs = [0, 1, 2, 3].map((i) => new RunResults(`run-${i}`, recording));
  const closed = new Set<number>();
  for (const op of ops) {
    if (op.kind === 'tick') {
      await tick();
      pushed.push([]);
      continue;
    }
    const r = runs[op.run];
    switch (op.what) {
      case 'delta':
        void r.delta('x ');
        break;
      case 'message':
        void r.message('hello');
        break;
      case 'state':
        void r.state('conversation', 'k', op.run);
        break;
      case 'tool':
        void r.toolCallStarted({ id: 't', name: 'n' });
        break;
      case 'custom':
        void r.emit('demo.custom', { n: 1 });
        break;
      case 'completed':
        void r.completed();
        break;
      case 'failed':
        void r.failed('boom', { code: 'runner.error' });
        break;
      case 'close':
        r.close();
        closed.add(op.run);
        break;
    }
  }
  await outbox.idle();
  await tick();
  return { frames, closed, pushed };
}

describe('RunResults and Outbox (property tests)', () => {
  it('numbers every run 1, 2, 3, ... and sends exactly one terminal, last, unless the run was closed', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 80 }), fc.integer({ min: 1, max: 7 }), async (ops, maxBatch) => {
        const { frames } = await play(ops, maxBatch);
        const all = frames.flat();
        for (const runId of new Set(all.map((r) => r.run_id))) {
          const mine = all.filter((r) => r.run_id === runId);
          expect(mine.map((r) => r.sequence)).toEqual(mine.map((_, i) => i + 1));
          const terminals = mine.filter((r) => r.type === 'run.completed' || r.type === 'run.failed');
          expect(terminals.length).toBeLessThanOrEqual(1);
          if (terminals.length === 1) {
            expect(mine[mine.length - 1]).toBe(terminals[0]);
          }
        }
      }),
      { numRuns: 200 },
    );
  });

  it('frames carry exactly the emitted results in emission order, each tick in ceil(n / maxBatch) frames', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 80 }), fc.integer({ min: 1, max: 7 }), async (ops, maxBatch) => {
        const { frames, pushed } = await play(ops, maxBatch);
        expect(frames.every((f) => f.length >= 1 && f.length <= maxBatch)).toBe(true);
        // Exactly what was emitted, in emission order across all runs ...
        expect(frames.flat()).toEqual(pushed.flat());
        // ... and what one tick emitted leaves in ceil(n / maxBatch) frames.
        const expected = pushed.filter((t) => t.length > 0).reduce((n, t) => n + Math.ceil(t.length / maxBatch), 0);
        expect(frames.length).toBe(expected);
      }),
      { numRuns: 200 },
    );
  });

  it('results emitted in one tick leave in as few frames as maxBatch allows', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 600 }), fc.integer({ min: 1, max: 300 }), async (n, maxBatch) => {
        const frames: RunResult[][] = [];
        const outbox = new Outbox(async (f) => {
          frames.push(f);
          await Promise.resolve();
        }, maxBatch);
        const run = new RunResults('r', outbox);
        const written = Array.from({ length: n }, (_, i) => run.delta(String(i)));
        await Promise.all(written);
        expect(frames.length).toBe(Math.ceil(n / maxBatch));
        expect(frames.flat().map((r) => r.data.chunk)).toEqual(
          Array.from({ length: n }, (_, i) => ({ role: 'assistant', content: String(i), msg_sequence: i + 1 })),
        );
      }),
      { numRuns: 60 },
    );
  });

  it('nothing is sent after the terminal result or after close(); emitters never reject', async () => {
    const frames: RunResult[][] = [];
    const outbox = new Outbox(async (f) => {
      frames.push(f);
      await Promise.resolve();
    });
    const a = new RunResults('a', outbox);
    await a.delta('hi');
    await a.failed(new Error('nope'), { code: 'x', retryable: true });
    await expect(a.delta('late')).resolves.toBeUndefined();
    await expect(a.completed()).resolves.toBeUndefined();
    const b = new RunResults('b', outbox);
    b.close();
    await b.delta('never');
    await b.completed();
    expect(frames.flat().map((r) => [r.run_id, r.type, r.sequence])).toEqual([
      ['a', 'message.delta', 1],
      ['a', 'run.failed', 2],
    ]);
    expect(frames.flat()[1].data).toEqual({ error: 'nope', code: 'x', retryable: true });
    expect(a.finished).toBe(true);
  });

  it('completed() first closes the streamed text as a message.completed', async () => {
    const frames: RunResult[][] = [];
    const outbox = new Outbox(async (f) => {
      frames.push(f);
      await Promise.resolve();
    });
    const r = new RunResults('r', outbox);
    void r.delta('Hello, ');
    void r.delta('world');
    await r.completed({ usage: { total_tokens: 3 } });
    expect(frames).toHaveLength(1); // one tick, one frame
    expect(frames[0].map((x) => x.type)).toEqual([
      'message.delta',
      'message.delta',
      'message.completed',
      'run.completed',
    ]);
    expect(frames[0][2].data).toEqual({ message: { role: 'assistant', content: 'Hello, world' } });
    expect(frames[0][3]).toMatchObject({ data: { finish_reason: 'stop' }, usage: { total_tokens: 3 } });
  });

  it('refuses terminal types through emit() and a bad maxBatch, naming the rule', () => {
    const r = new RunResults('r', new Outbox(() => Promise.resolve()));
    expect(() => r.emit('run.completed', {})).toThrow('run.completed is terminal: use completed() or failed()');
    expect(() => new Outbox(() => Promise.resolve(), 0)).toThrow('maxBatch must be an integer >= 1 (got 0)');
    expect(DEFAULT_MAX_BATCH).toBe(256);
  });
});
