import { EchoRunner, splitIntoChunks, type OutgoingResult, type ResultSink } from './echo-runner';
import { silentLogger } from './log';
import { longAnswerText } from './long-answer';
import type { HostApi } from './host-api';
import { toStruct, type JsonObject } from './struct';

/** Records results; `onSend` lets a test act (e.g. cancel) when a given result goes out. */
class FakeSink implements ResultSink {
  readonly results: OutgoingResult[] = [];
  onSend: (result: OutgoingResult) => void = () => undefined;
  flushed = 0;

  send(result: OutgoingResult): Promise<void> {
    this.results.push(result);
    this.onSend(result);
    return Promise.resolve();
  }

  flush(): Promise<void> {
    this.flushed++;
    return Promise.resolve();
  }

  of(runId: string): OutgoingResult[] {
    return this.results.filter((r) => r.run_id === runId);
  }
}

function setup(crash?: () => void) {
  const sink = new FakeSink();
  const runner = new EchoRunner(sink, { log: silentLogger, crash });
  const run = (runId: string, text: string, config: JsonObject = {}) => runner.start({ runId, text, config });
  return { sink, runner, run };
}

const types = (results: OutgoingResult[]) => results.map((r) => r.type);
const deltaText = (results: OutgoingResult[]) =>
  results
    .filter((r) => r.type === 'message.delta')
    .map((r) => (r.data.chunk as JsonObject).content as string)
    .join('');

describe('splitIntoChunks', () => {
  it.each(['hello world', '  leading and trailing  ', 'a\n\tb  c', 'single', '   '])(
    'keeps every character of %j',
    (text) => {
      expect(splitIntoChunks(text).join('')).toBe(text);
    },
  );

  it('splits on words and handles empty text', () => {
    expect(splitIntoChunks('hello big world')).toEqual(['hello ', 'big ', 'world']);
    expect(splitIntoChunks('')).toEqual([]);
  });
});

describe('EchoRunner', () => {
  it('echo: streams the text back, then message.completed and run.completed with usage', async () => {
    const { sink, run } = setup();
    await run('r1', 'hello big world', { mode: 'echo' });

    const results = sink.of('r1');
    expect(types(results)).toEqual([
      'message.delta',
      'message.delta',
      'message.delta',
      'message.completed',
      'run.completed',
    ]);
    expect(results.map((r) => r.sequence)).toEqual([1, 2, 3, 4, 5]);
    expect(deltaText(results)).toBe('hello big world');
    expect(results[1].data).toEqual({
      chunk: { role: 'assistant', content: 'big ', all_content: 'hello big ', msg_sequence: 2 },
    });
    expect(results[3].data).toEqual({ message: { role: 'assistant', content: 'hello big world' } });
    expect(results[4].data).toEqual({ finish_reason: 'stop' });
    expect(results[4].usage).toEqual({ prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 });
    expect(results.every((r) => Number.isInteger(r.timestamp) && r.timestamp > 1_600_000_000)).toBe(true);
  });

  it('defaults to echo when config has no mode', async () => {
    const { sink, run } = setup();
    await run('r1', 'hi');
    expect(types(sink.results)).toEqual(['message.delta', 'message.completed', 'run.completed']);
  });

  it('long_answer: content-only deltas of the given size, blank lines as asked, then run.completed', async () => {
    const { sink, run } = setup();
    await run('r1', 'ignored', { mode: 'long_answer', deltas: 4, delta_chars: 12, paragraph_every: 2 });
    expect(types(sink.results)).toEqual([...Array(4).fill('message.delta'), 'run.completed']);
    const chunks = sink.results.slice(0, 4).map((r) => r.data.chunk as JsonObject);
    expect(chunks.every((c) => c.all_content === undefined && (c.content as string).length === 12)).toBe(true);
    expect(chunks.map((c) => (c.content as string).endsWith('\n\n'))).toEqual([false, true, false, true]);
    expect(deltaText(sink.results)).toBe(longAnswerText({ deltas: 4, delta_chars: 12, paragraph_every: 2 }));
  });

  it('long_answer: a bad setting fails the run naming it', async () => {
    const { sink, run } = setup();
    await run('r1', 'ignored', { mode: 'long_answer', delta_chars: 2 });
    expect(sink.results.map((r) => [r.type, r.data.code, r.data.error])).toEqual([
      ['run.failed', 'runner.invalid_config', 'long_answer: delta_chars: must be an integer from 4 to 1048576'],
    ]);
  });

  it('fail: one delta, then run.failed', async () => {
    const { sink, run } = setup();
    await run('r1', 'hello world', { mode: 'fail' });
    expect(types(sink.results)).toEqual(['message.delta', 'run.failed']);
    expect(sink.results[1].data).toEqual({ error: 'demo failure requested', code: 'runner.error', retryable: false });
  });

  it('bad_sequence: 1, 1, 3, then results without a sequence', async () => {
    const { sink, run } = setup();
    await run('r1', 'ignored', { mode: 'bad_sequence' });
    expect(sink.results.map((r) => [r.type, r.sequence])).toEqual([
      ['message.delta', 1],
      ['message.delta', 1],
      ['message.delta', 3],
      ['message.delta', undefined],
      ['message.completed', undefined],
      ['run.completed', undefined],
    ]);
  });

  it('unknown_type: a demo.custom result between the deltas and the completion', async () => {
    const { sink, run } = setup();
    await run('r1', 'a b', { mode: 'unknown_type' });
    expect(types(sink.results)).toEqual([
      'message.delta',
      'message.delta',
      'demo.custom',
      'message.completed',
      'run.completed',
    ]);
    expect(sink.results[2].data).toEqual({ note: 'x' });
  });

  it('bad_payload: an invalid message.delta first, then a normal echo', async () => {
    const { sink, run } = setup();
    await run('r1', 'a b', { mode: 'bad_payload' });
    expect(sink.results[0]).toMatchObject({ type: 'message.delta', data: { wrong: 1 }, sequence: 1 });
    expect(types(sink.results.slice(1))).toEqual([
      'message.delta',
      'message.delta',
      'message.completed',
      'run.completed',
    ]);
  });

  it('after_terminal: one more delta after the terminal result', async () => {
    const { sink, run } = setup();
    await run('r1', 'a', { mode: 'echo', after_terminal: true });
    expect(types(sink.results)).toEqual(['message.delta', 'message.completed', 'run.completed', 'message.delta']);
    expect(sink.results[3].sequence).toBe(4);
  });

  it('stall: one delta, then nothing until cancelled; cancel reports run.failed cancelled', async () => {
    const { sink, runner, run } = setup();
    sink.onSend = (r) => {
      if (r.type === 'message.delta') {
        expect(runner.activeRunIds()).toEqual(['r1']);
        runner.cancel('r1', 'user asked');
      }
    };
    await run('r1', 'hello world', { mode: 'stall' });
    expect(types(sink.results)).toEqual(['message.delta', 'run.failed']);
    expect(sink.results[1]).toMatchObject({
      sequence: 2,
      data: { error: 'cancelled: user asked', code: 'cancelled', retryable: false },
    });
    expect(runner.activeRunIds()).toEqual([]);
  });

  it('cancel stops an echo in the middle', async () => {
    const { sink, runner, run } = setup();
    sink.onSend = (r) => {
      if (r.sequence === 2) {
        runner.cancel('r1', 'stop');
      }
    };
    await run('r1', 'one two three four', { mode: 'echo' });
    expect(types(sink.results)).toEqual(['message.delta', 'message.delta', 'run.failed']);
  });

  it('ignore_cancel: ignores cancel; only losing the stream ends it, silently', async () => {
    const { sink, runner, run } = setup();
    sink.onSend = () => {
      runner.cancel('r1', 'please');
      expect(runner.activeRunIds()).toEqual(['r1']);
      runner.abortAll();
    };
    await run('r1', 'hello', { mode: 'ignore_cancel' });
    expect(types(sink.results)).toEqual(['message.delta']);
  });

  it('stream loss stops a run without a terminal result', async () => {
    const { sink, runner, run } = setup();
    sink.onSend = () => runner.abortAll();
    await run('r1', 'hello', { mode: 'stall' });
    expect(types(sink.results)).toEqual(['message.delta']);
  });

  it('crash: one delta, flushes, then calls the crash hook', async () => {
    const crash = jest.fn();
    const { sink, run } = setup(crash);
    await run('r1', 'hello world', { mode: 'crash' });
    expect(types(sink.results)).toEqual(['message.delta']);
    expect(sink.flushed).toBe(1);
    expect(crash).toHaveBeenCalledTimes(1);
  });

  it('runs several runs at once, each with its own sequence', async () => {
    const { sink, runner, run } = setup();
    const stalled = run('s', 'x y', { mode: 'stall' });
    await run('e', 'a b', { mode: 'echo' });
    expect(runner.activeRunIds()).toEqual(['s']);
    runner.cancel('s', 'done');
    await stalled;
    expect(sink.of('e').map((r) => r.sequence)).toEqual([1, 2, 3, 4]);
    expect(sink.of('s').map((r) => [r.type, r.sequence])).toEqual([
      ['message.delta', 1],
      ['run.failed', 2],
    ]);
  });

  it('ignores a cancel for a run that is not active', async () => {
    const { sink, runner, run } = setup();
    await run('r1', 'a');
    runner.cancel('r1', 'late');
    runner.cancel('nope', 'x');
    expect(types(sink.results)).toEqual(['message.delta', 'message.completed', 'run.completed']);
  });

  it('an unknown mode fails the run', async () => {
    const { sink, run } = setup();
    await run('r1', 'a', { mode: 'nope' });
    expect(sink.results).toEqual([expect.objectContaining({ type: 'run.failed', sequence: 1 })]);
  });
});

describe('EchoRunner steer mode', () => {
  it('echoes the input, then each pulled follow-up as a turn, until a pull comes back empty', async () => {
    const sink = new FakeSink();
    const pulls: unknown[] = [];
    const batches = [
      [
        { item_id: 'e2', position: 1, input: { text: 'second' } },
        { item_id: 'e3', position: 2, input: { text: 'third' } },
      ],
      [],
    ];
    const hostApi = {
      call: (method: string, req: unknown) => {
        pulls.push([method, req]);
        const items = (batches.shift() ?? []).map((i) => toStruct(i));
        return Promise.resolve({ items });
      },
    } as unknown as HostApi;
    const runner = new EchoRunner(sink, { log: silentLogger, hostApi });
    await runner.start({
      runId: 'r1',
      text: 'first',
      config: { mode: 'steer', steer_wait_ms: 250, steer_mode: 'one' },
    });

    const results = sink.of('r1');
    const completed = results.filter((r) => r.type === 'message.completed').map((r) => r.data.message);
    expect(completed).toEqual([
      { role: 'assistant', content: 'first' },
      { role: 'assistant', content: 'second', steering_item_id: 'e2' },
      { role: 'assistant', content: 'third', steering_item_id: 'e3' },
    ]);
    expect(types(results).at(-1)).toBe('run.completed');
    expect(pulls).toEqual([
      ['SteeringPull', { run_id: 'r1', mode: 'one', wait_ms: 250 }],
      ['SteeringPull', { run_id: 'r1', mode: 'one', wait_ms: 250 }],
    ]);
  });

  it('fails the run without a host API client', async () => {
    const sink = new FakeSink();
    await new EchoRunner(sink, { log: silentLogger }).start({ runId: 'r2', text: 'x', config: { mode: 'steer' } });
    expect(sink.of('r2').map((r) => [r.type, r.data.code])).toEqual([['run.failed', 'runner.invalid_config']]);
  });
});
