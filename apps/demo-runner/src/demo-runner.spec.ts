import { setTimeout as sleep } from 'node:timers/promises';
import type { JsonObject, RunResult } from '@runner-host/runner-sdk';
import { FakeHost, type FakeRun, type StartOptions } from '@runner-host/runner-sdk/testing';
import { demoRunner, splitIntoChunks } from './demo-runner';
import { silentLogger } from './log';
import { longAnswerText } from './long-answer';

/* The demo runner's modes, run by the SDK's fake host (libs/runner-sdk/src/testing). */

function setup(
  opts: { crash?: () => void; steering?: boolean; host?: Partial<ConstructorParameters<typeof FakeHost>[0]> } = {},
) {
  const runner = demoRunner({ log: silentLogger, crash: opts.crash, steering: opts.steering, crashGraceMs: 0 });
  const host = new FakeHost({ runners: [runner], ...opts.host });
  const start = (text: string, config: JsonObject = {}, more: StartOptions = {}) =>
    host.start({ text, config, ...more });
  const run = async (text: string, config: JsonObject = {}, more: StartOptions = {}) => {
    const r = start(text, config, more);
    await r.done;
    await sleep(1); // whatever follows the terminal result
    return r.results;
  };
  return { host, runner, start, run };
}

const types = (results: RunResult[]) => results.map((r) => r.type);
const deltaText = (results: RunResult[]) =>
  results
    .filter((r) => r.type === 'message.delta')
    .map((r) => (r.data.chunk as JsonObject).content as string)
    .join('');

/** Resolves once the run has sent `n` results. */
async function resultsOf(run: FakeRun, n: number): Promise<void> {
  while (run.results.length < n) {
    await new Promise((r) => setImmediate(r));
  }
}

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

describe('demo runner', () => {
  it('declares its manifest: modes, config, steering only with DEMO_STEERING', () => {
    const { runner } = setup();
    expect(runner.name).toBe('default');
    expect(runner.capabilities).toEqual({ streaming: true, interrupt: true, interactions: true });
    expect(setup({ steering: true }).runner.capabilities?.steering).toBe(true);
    const mode = runner.configSchema?.find((c) => c.name === 'mode');
    expect(mode?.options?.map((o) => o.name)).toContain('ignore_cancel');
  });

  it('DEMO_LOG_RUNS: one "run executing" line per run handed to it, none without the option', async () => {
    const lines: { msg: string; fields?: Record<string, unknown> }[] = [];
    const log = (_level: string, msg: string, fields?: Record<string, unknown>) => void lines.push({ msg, fields });
    const host = new FakeHost({ runners: [demoRunner({ log, logRuns: true })] });
    const a = host.start({ text: 'one', config: {} });
    const b = host.start({ text: 'two', config: {} });
    await Promise.all([a.done, b.done]);
    const executing = lines.filter((l) => l.msg === 'run executing').map((l) => l.fields?.run_id);
    expect(executing.sort()).toEqual([a.runId, b.runId].sort());

    lines.length = 0;
    const quiet = new FakeHost({ runners: [demoRunner({ log })] });
    await quiet.start({ text: 'three', config: {} }).done;
    expect(lines.filter((l) => l.msg === 'run executing')).toEqual([]);
  });

  it('echo: streams the text back, then message.completed and run.completed with usage', async () => {
    const { run } = setup();
    const results = await run('hello big world', { mode: 'echo' });
    expect(types(results)).toEqual([
      'message.delta',
      'message.delta',
      'message.delta',
      'message.completed',
      'run.completed',
    ]);
    expect(results.map((r) => r.sequence)).toEqual([1, 2, 3, 4, 5]);
    expect(deltaText(results)).toBe('hello big world');
    // Content only: the text so far is not repeated in every delta (docs/protocol.md#the-text-of-a-message).
    expect(results.slice(0, 3).map((r) => r.data)).toEqual([
      { chunk: { role: 'assistant', content: 'hello ', msg_sequence: 1 } },
      { chunk: { role: 'assistant', content: 'big ', msg_sequence: 2 } },
      { chunk: { role: 'assistant', content: 'world', msg_sequence: 3 } },
    ]);
    expect(results[3].data).toEqual({ message: { role: 'assistant', content: 'hello big world' } });
    expect(results[4].data).toEqual({ finish_reason: 'stop' });
    expect(results[4].usage).toEqual({ prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 });
  });

  it('echo with cumulative: every delta also carries the text so far (all_content)', async () => {
    const { run } = setup();
    const results = await run('hello big world', { mode: 'echo', cumulative: true });
    expect(results.slice(0, 3).map((r) => r.data)).toEqual([
      { chunk: { role: 'assistant', content: 'hello ', all_content: 'hello ', msg_sequence: 1 } },
      { chunk: { role: 'assistant', content: 'big ', all_content: 'hello big ', msg_sequence: 2 } },
      { chunk: { role: 'assistant', content: 'world', all_content: 'hello big world', msg_sequence: 3 } },
    ]);
    expect(results[3].data).toEqual({ message: { role: 'assistant', content: 'hello big world' } });
  });

  it('echo with chunk_delay_ms: paces the deltas', async () => {
    const { run } = setup();
    const t0 = Date.now();
    const results = await run('a b c', { mode: 'echo', chunk_delay_ms: 30 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(55);
    expect(deltaText(results)).toBe('a b c');
  });

  it('defaults to echo when config has no mode', async () => {
    const { run } = setup();
    expect(types(await run('hi'))).toEqual(['message.delta', 'message.completed', 'run.completed']);
  });

  it('long_answer: content-only deltas of the given size, blank lines as asked, then run.completed', async () => {
    const { run } = setup();
    const results = await run('ignored', { mode: 'long_answer', deltas: 4, delta_chars: 12, paragraph_every: 2 });
    expect(types(results)).toEqual([...Array(4).fill('message.delta'), 'run.completed']);
    const chunks = results.slice(0, 4).map((r) => r.data.chunk as JsonObject);
    expect(chunks.every((c) => c.all_content === undefined && (c.content as string).length === 12)).toBe(true);
    expect(chunks.map((c) => (c.content as string).endsWith('\n\n'))).toEqual([false, true, false, true]);
    expect(chunks.map((c) => c.msg_sequence)).toEqual([1, 2, 3, 4]);
    expect(deltaText(results)).toBe(longAnswerText({ deltas: 4, delta_chars: 12, paragraph_every: 2 }));
    expect(results[4].data).toEqual({ finish_reason: 'stop' }); // no message: the streamed text is the answer
  });

  it('long_answer: a bad setting fails the run naming it', async () => {
    const { run } = setup();
    const results = await run('ignored', { mode: 'long_answer', delta_chars: 2 });
    expect(results.map((r) => [r.type, r.data.code, r.data.error])).toEqual([
      ['run.failed', 'runner.invalid_config', 'long_answer: delta_chars: must be an integer from 4 to 1048576'],
    ]);
  });

  it('fail: one delta, then run.failed', async () => {
    const { run } = setup();
    const results = await run('hello world', { mode: 'fail' });
    expect(types(results)).toEqual(['message.delta', 'run.failed']);
    expect(results[1].data).toEqual({ error: 'demo failure requested', code: 'runner.error', retryable: false });
  });

  it('bad_sequence: 1, 1, 3, then results without a sequence', async () => {
    const { run } = setup();
    const results = await run('ignored', { mode: 'bad_sequence' });
    expect(results.map((r) => [r.type, r.sequence])).toEqual([
      ['message.delta', 1],
      ['message.delta', 1],
      ['message.delta', 3],
      ['message.delta', undefined],
      ['message.completed', undefined],
      ['run.completed', undefined],
    ]);
  });

  it('unknown_type: a demo.custom result between the deltas and the completion', async () => {
    const { run } = setup();
    const results = await run('a b', { mode: 'unknown_type' });
    expect(types(results)).toEqual([
      'message.delta',
      'message.delta',
      'demo.custom',
      'message.completed',
      'run.completed',
    ]);
    expect(results[2].data).toEqual({ note: 'x' });
  });

  it('bad_payload: an invalid message.delta first, then a normal echo', async () => {
    const { run } = setup();
    const results = await run('a b', { mode: 'bad_payload' });
    expect(results[0]).toMatchObject({ type: 'message.delta', data: { wrong: 1 }, sequence: 1 });
    expect(types(results.slice(1))).toEqual(['message.delta', 'message.delta', 'message.completed', 'run.completed']);
  });

  it('after_terminal: one more delta after the terminal result', async () => {
    const { start } = setup();
    const r = start('a', { mode: 'echo', after_terminal: true });
    await r.done;
    // Waits for the late delta itself: a 1 ms sleep after the terminal result raced its frame on a busy machine.
    await resultsOf(r, 4);
    const results = r.results;
    expect(types(results)).toEqual(['message.delta', 'message.completed', 'run.completed', 'message.delta']);
    expect(results[3].data).toEqual({ chunk: { role: 'assistant', content: 'too late' } });
  });

  it('stall: one delta, then nothing until cancelled; cancel reports run.failed cancelled', async () => {
    const { host, start } = setup();
    const run = start('hello world', { mode: 'stall' });
    await run.waitFor('message.delta');
    await sleep(20);
    expect(run.ended).toBe(false);
    host.cancel(run.runId, 'user asked');
    const outcome = await run.done;
    expect(types(outcome.results)).toEqual(['message.delta', 'run.failed']);
    expect(outcome.results[1]).toMatchObject({
      sequence: 2,
      data: { error: 'cancelled: user asked', code: 'cancelled', retryable: false },
    });
  });

  it('cancel stops an echo in the middle', async () => {
    const { host, start } = setup();
    // Twenty words at 20 ms each: on a busy machine a delta or two more may leave before the
    // cancel is read, but never the whole answer.
    const words = Array.from({ length: 20 }, (_, i) => `w${i}`).join(' ');
    const run = start(words, { mode: 'echo', chunk_delay_ms: 20 });
    await resultsOf(run, 2);
    host.cancel(run.runId, 'stop');
    const outcome = await run.done;
    const kinds = types(outcome.results);
    expect(kinds.at(-1)).toBe('run.failed');
    expect(outcome.results.at(-1)?.data).toMatchObject({ code: 'cancelled' });
    const deltas = kinds.slice(0, -1);
    expect(deltas.every((k) => k === 'message.delta')).toBe(true);
    expect(deltas.length).toBeGreaterThanOrEqual(2);
    expect(deltas.length).toBeLessThan(20);
  });

  it('ignore_cancel: ignores cancel and the deadline; only losing the stream ends it, silently', async () => {
    const { host, start } = setup();
    const run = start('hello', { mode: 'ignore_cancel' }, { deadlineMs: 20 });
    await run.waitFor('message.delta');
    host.cancel(run.runId, 'please');
    await sleep(40);
    expect(run.ended).toBe(false);
    host.disconnect();
    await sleep(5);
    expect(types(run.results)).toEqual(['message.delta']);
  });

  it('stream loss stops a run without a terminal result', async () => {
    const { host, start } = setup();
    const run = start('hello', { mode: 'stall' });
    await run.waitFor('message.delta');
    host.disconnect();
    await sleep(5);
    expect(types(run.results)).toEqual(['message.delta']);
  });

  it('crash: one delta, then calls the crash hook', async () => {
    const crash = jest.fn();
    const { start } = setup({ crash });
    const run = start('hello world', { mode: 'crash' });
    await run.waitFor('message.delta');
    while (crash.mock.calls.length === 0) {
      await sleep(1);
    }
    expect(types(run.results)).toEqual(['message.delta']);
    expect(crash).toHaveBeenCalledTimes(1);
  });

  it('runs several runs at once, each with its own sequence', async () => {
    const { host, start, run } = setup();
    const stalled = start('x y', { mode: 'stall' });
    const echoed = await run('a b', { mode: 'echo' });
    expect(echoed.map((r) => r.sequence)).toEqual([1, 2, 3, 4]);
    host.cancel(stalled.runId, 'done');
    expect((await stalled.done).results.map((r) => [r.type, r.sequence])).toEqual([
      ['message.delta', 1],
      ['run.failed', 2],
    ]);
  });

  it('an unknown mode fails the run', async () => {
    const { run } = setup();
    expect(await run('a', { mode: 'nope' })).toEqual([
      expect.objectContaining({
        type: 'run.failed',
        sequence: 1,
        data: expect.objectContaining({ code: 'runner.invalid_config', error: 'unknown mode "nope"' }),
      }),
    ]);
  });

  it('interaction: asks with a form and ends the run; the submitted answer continues the conversation', async () => {
    const { run } = setup();
    const ask = await run('hi', { mode: 'interaction', interaction_expires_in: 60, interaction_id: 'p1' });
    expect(types(ask)).toEqual(['action.requested', 'run.completed']);
    expect(ask[0].data).toMatchObject({
      action: 'interaction.requested',
      payload: { interaction_id: 'p1', kind: 'form', description: 'You said: hi' },
    });
    const expiresAt = (ask[0].data.payload as JsonObject).expires_at as number;
    expect(Math.abs(expiresAt - (Date.now() / 1000 + 60))).toBeLessThan(3);
    expect(ask[1].data).toEqual({ finish_reason: 'interaction_requested' });

    const answer = await run(
      '',
      { mode: 'interaction' },
      {
        context: (ctx) => ({
          ...ctx,
          event: { ...ctx.event!, event_type: 'interaction.submitted' },
          input: { ...ctx.input!, interaction: { interaction_id: 'p1', action_id: 'submit', values: { name: 'Ada' } } },
        }),
      },
    );
    expect(answer[0].data).toEqual({
      message: { role: 'assistant', content: 'received "p1": action="submit" values={"name":"Ada"}' },
    });
    expect(types(answer)).toEqual(['message.completed', 'run.completed']);
  });
});

describe('demo runner, mode steer', () => {
  it('echoes the input, then each pulled follow-up as a turn, until a pull comes back empty', async () => {
    const pulls: JsonObject[] = [];
    const batches = [
      [
        { item_id: 'e2', position: 1, input: { text: 'second' } },
        { item_id: 'e3', position: 2, input: { text: 'third' } },
      ],
      [],
    ];
    const { run } = setup({
      steering: true,
      host: {
        handlers: {
          SteeringPull: (req) => {
            pulls.push(req as unknown as JsonObject);
            return { items: batches.shift() ?? [] };
          },
        },
      },
    });
    const results = await run('first', { mode: 'steer', steer_wait_ms: 250, steer_mode: 'one' });
    const completed = results.filter((r) => r.type === 'message.completed').map((r) => r.data.message);
    expect(completed).toEqual([
      { role: 'assistant', content: 'first' },
      { role: 'assistant', content: 'second', steering_item_id: 'e2' },
      { role: 'assistant', content: 'third', steering_item_id: 'e3' },
    ]);
    expect(types(results).at(-1)).toBe('run.completed');
    expect(pulls.map((p) => [p.mode, p.wait_ms])).toEqual([
      ['one', 250],
      ['one', 250],
    ]);
  });

  it('a follow-up steered while the run echoes is pulled at the turn boundary', async () => {
    const { host, start } = setup({ steering: true });
    const run = start('first turn', { mode: 'steer', chunk_delay_ms: 20, steer_wait_ms: 50 });
    host.steer(run.runId, 'follow up');
    const outcome = await run.done;
    expect(outcome.messages).toEqual(['first turn', 'follow up']);
    expect(outcome.status).toBe('completed');
  });

  it('without the steering grant: one turn, then run.completed', async () => {
    const { run } = setup();
    const results = await run('only', { mode: 'steer' });
    expect(types(results)).toEqual(['message.delta', 'message.completed', 'run.completed']);
  });
});
