import fc from 'fast-check';
import { frameMessage } from './connection';
import {
  DEFAULT_MAX_BATCH,
  DEFAULT_MAX_FRAME_BYTES,
  FRAME_OVERHEAD_BYTES,
  Outbox,
  RESULT_TOO_LARGE,
  RunResults,
  resultWireBytes,
} from './results';
import type { RunResult } from './types';
import { loadServices } from './wire';

/** The bytes the gRPC stream really writes for one frame (the generated client's serializer). */
function encodedBytes(frame: RunResult[]): number {
  const connect = loadServices().RunnerGatewayService.service.Connect;
  return connect.requestSerialize(frameMessage(frame)).length;
}

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
async function play(ops: Op[], maxBatch: number, maxFrameBytes = DEFAULT_MAX_FRAME_BYTES, payload = 'x') {
  const frames: RunResult[][] = [];
  const outbox = new Outbox(
    async (frame) => {
      frames.push(frame);
      await Promise.resolve();
    },
    maxBatch,
    maxFrameBytes,
  );
  /** What was pushed, grouped by tick. */
  const pushed: RunResult[][] = [[]];
  const recording = {
    maxFrameBytes,
    push: (result: RunResult, bytes?: number) => {
      pushed[pushed.length - 1].push(result);
      return outbox.push(result, bytes);
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
        void r.emit('demo.custom', { n: 1, blob: payload.repeat(op.run * op.run) });
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

  it('frames never pass maxFrameBytes (as encoded), keep emission order and sequences, and split only when full', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { maxLength: 60 }),
        fc.integer({ min: 1, max: 7 }),
        fc.integer({ min: 4096, max: 20_000 }),
        // 1 to 4 bytes a character; a run emits payload × run² (run 3 can pass the bound alone).
        fc.tuple(fc.constantFrom('x', 'é', '€', '😀'), fc.integer({ min: 1, max: 800 })).map(([c, n]) => c.repeat(n)),
        async (ops, maxBatch, maxFrameBytes, payload) => {
          const { frames, pushed } = await play(ops, maxBatch, maxFrameBytes, payload);
          for (const frame of frames) {
            expect(encodedBytes(frame)).toBeLessThanOrEqual(maxFrameBytes);
          }
          expect(frames.flat()).toEqual(pushed.flat());
          const tickOf = new Map(pushed.flatMap((t, i) => t.map((r) => [r, i] as const)));
          const budget = maxFrameBytes - FRAME_OVERHEAD_BYTES;
          for (let i = 1; i < frames.length; i += 1) {
            const [prev, next] = [frames[i - 1], frames[i]];
            if (tickOf.get(prev[prev.length - 1]) === tickOf.get(next[0])) {
              const bytes = prev.reduce((n, r) => n + resultWireBytes(r), 0);
              // A frame of a tick ends early only when it is full (count or bytes).
              expect(prev.length === maxBatch || bytes + resultWireBytes(next[0]) > budget).toBe(true);
            }
          }
          const all = frames.flat();
          for (const runId of new Set(all.map((r) => r.run_id))) {
            const mine = all.filter((r) => r.run_id === runId);
            expect(mine.map((r) => r.sequence)).toEqual(mine.map((_, i) => i + 1));
            const tooLarge = mine.findIndex((r) => r.data.code === RESULT_TOO_LARGE);
            expect(tooLarge === -1 || tooLarge === mine.length - 1).toBe(true);
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it('resultWireBytes is what protobuf encodes for one result', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer({ min: 0, max: 2 ** 40 }), fc.boolean(), (json, n, usage) => {
        const result: RunResult = {
          run_id: 'r',
          type: 'demo.custom',
          data: { json: json as never },
          sequence: n,
          timestamp: n,
        };
        if (usage) {
          result.usage = { total_tokens: n };
        }
        // A lone result travels as PluginMessage.result: its field is the whole message.
        expect(resultWireBytes(result)).toBe(encodedBytes([result]));
      }),
      // A `__proto__` key (JSON.parse keeps it as an own key) once encoded as nothing: pinned.
      { numRuns: 300, examples: [[JSON.parse('{"__proto__":[]}') as fc.JsonValue, 0, false]] },
    );
  });

  it('resultWireBytes counts UTF-8 bytes of any string: ASCII, non-ASCII, surrogate pairs, long or short', () => {
    const text = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 300 }),
      fc.string({ unit: 'grapheme', maxLength: 300 }),
      fc.string({ maxLength: 400 }),
    );
    fc.assert(
      fc.property(text, text, (key, value) => {
        const result: RunResult = {
          run_id: value,
          type: key || 't',
          data: { [key]: value, list: [value] },
          sequence: 1,
          timestamp: 1,
        };
        expect(resultWireBytes(result)).toBe(encodedBytes([result]));
      }),
      {
        numRuns: 300,
        examples: [
          ['é', '😀'.repeat(200)],
          ['k', 'a'.repeat(256) + 'é'],
          ['\u007f', '\u0080'],
        ],
      },
    );
  });

  it('a result that cannot fit one frame is not sent: the run fails runner.result_too_large with the next sequence', async () => {
    const frames: RunResult[][] = [];
    const outbox = new Outbox(
      async (f) => {
        frames.push(f);
        await Promise.resolve();
      },
      DEFAULT_MAX_BATCH,
      8192,
    );
    const a = new RunResults('a', outbox);
    const b = new RunResults('b', outbox);
    void a.delta('before');
    void b.delta('fits');
    void a.emit('demo.blob', { blob: 'x'.repeat(9000) });
    void b.delta('still fits');
    await expect(a.delta('after')).resolves.toBeUndefined();
    await outbox.idle();
    expect(frames.flat().map((r) => [r.run_id, r.type, r.sequence])).toEqual([
      ['a', 'message.delta', 1],
      ['b', 'message.delta', 1],
      ['a', 'run.failed', 2],
      ['b', 'message.delta', 2],
    ]);
    expect(frames.flat()[2].data).toEqual({
      error: expect.stringMatching(
        /^a demo\.blob result of \d+ bytes does not fit one gRPC frame \(maxFrameBytes 8192\)/,
      ),
      code: 'runner.result_too_large',
      retryable: false,
    });
    expect(a.finished).toBe(true);
    // An oversized terminal is replaced the same way.
    const c = new RunResults('c', outbox);
    await c.completed({ message: 'y'.repeat(10_000) });
    expect(frames.flat().at(-1)).toMatchObject({
      run_id: 'c',
      type: 'run.failed',
      sequence: 1,
      data: { code: RESULT_TOO_LARGE },
    });
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
    expect(() => new Outbox(() => Promise.resolve(), 1, 100)).toThrow(
      'maxFrameBytes must be an integer >= 4096 (got 100)',
    );
    expect(DEFAULT_MAX_BATCH).toBe(256);
  });
});
