import { getEventListeners } from 'node:events';
import { hostApiError, RunAbortedError, UnauthorizedError } from './errors';
import { defineRunner, manifestOf, type RunIO } from './runner';
import { FakeHost } from './testing';
import { messageText, type RunContext } from './types';

/** A promise and its resolver: lets a test decide when a handler goes on (no timers). */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

function abortedWith(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));
}

describe('runners on the fake host', () => {
  it('streams, calls a model and a tool through the host, and completes', async () => {
    const assistant = defineRunner({
      name: 'default',
      capabilities: { streaming: true, tool_calling: true },
      permissions: { models: ['invoke', 'stream'], tools: ['call'] },
      async run(ctx, io) {
        const time = await io.toolCall('clock', { tz: 'UTC' });
        const stream = io.host.models.stream(
          'm1',
          `${ctx.input?.text ?? ''} at ${typeof time.now === 'string' ? time.now : ''}`,
        );
        for await (const chunk of stream) {
          await io.delta(messageText(chunk));
        }
        await io.completed({ usage: stream.usage ?? undefined });
      },
    });
    const host = new FakeHost({
      runners: [assistant],
      models: {
        m1: (messages) => ({
          message: { role: 'assistant', content: `echo: ${messageText(messages[0])}` },
          usage: { total_tokens: 7 },
        }),
      },
      tools: { clock: (p) => ({ now: p.tz === 'UTC' ? '12:00 UTC' : 'unknown zone' }) },
    });
    const outcome = await host.run({ text: 'hello' });
    expect(outcome.status).toBe('completed');
    expect(outcome.streamed).toBe('echo: hello at 12:00 UTC');
    expect(outcome.messages).toEqual(['echo: hello at 12:00 UTC']);
    expect(outcome.results.map((r) => r.type)).toEqual([
      'tool.call.started',
      'tool.call.completed',
      ...Array(5).fill('message.delta'),
      'message.completed',
      'run.completed',
    ]);
    expect(outcome.results[1].data).toEqual({
      tool_call_id: 'call_1',
      tool_name: 'clock',
      result: { now: '12:00 UTC' },
      error: null,
    });
    expect(outcome.results.at(-1)?.usage).toEqual({ total_tokens: 7 });
    expect(host.calls.map((c) => c.method)).toEqual(['CallTool', 'StreamModel']);
  });

  it('a handler that returns without a terminal result completes its run', async () => {
    const host = new FakeHost({
      runners: [defineRunner({ name: 'default', run: (_ctx, io) => void io.message('hi') })],
    });
    const outcome = await host.run();
    expect(outcome.results.map((r) => r.type)).toEqual(['message.completed', 'run.completed']);
  });

  it('a handler that throws fails only its run (code runner.exception); the other run completes', async () => {
    const g = gate();
    const runner = defineRunner({
      name: 'default',
      async run(ctx, io) {
        await io.delta('working ');
        await g.opened;
        if (ctx.config.explode === true) {
          throw new Error('kaboom');
        }
        await io.completed();
      },
    });
    const host = new FakeHost({ runners: [runner] });
    const bad = host.start({ config: { explode: true } });
    const good = host.start();
    await Promise.all([bad.waitFor('message.delta'), good.waitFor('message.delta')]);
    g.open();
    const [b, o] = await Promise.all([bad.done, good.done]);
    expect(b).toMatchObject({ status: 'failed', code: 'runner.exception', error: 'kaboom' });
    expect(o.status).toBe('completed');
    expect(o.messages).toEqual(['working ']);
  });

  it("the host's cancel fires the run's signal and fails the run with code cancelled at once", async () => {
    let seen: unknown;
    const runner = defineRunner({
      name: 'default',
      async run(_ctx, io) {
        await io.delta('a');
        seen = await abortedWith(io.signal);
        await io.delta('after cancel: dropped');
      },
    });
    const host = new FakeHost({ runners: [runner] });
    const run = host.start();
    await run.waitFor('message.delta');
    host.cancel(run.runId, 'user pressed stop');
    const outcome = await run.done;
    expect(outcome).toMatchObject({ status: 'failed', code: 'cancelled', error: 'cancelled: user pressed stop' });
    await new Promise((r) => setImmediate(r));
    expect(seen).toBeInstanceOf(RunAbortedError);
    expect(seen).toMatchObject({ kind: 'cancelled', message: 'user pressed stop' });
    expect(run.results.map((r) => r.type)).toEqual(['message.delta', 'run.failed']);
  });

  it("the run's deadline fires its signal (kind deadline) and fails it with runner.timeout; host calls reject", async () => {
    let callError: unknown;
    const runner = defineRunner({
      name: 'default',
      capabilities: { steering: true },
      async run(_ctx, io) {
        // A long steering wait: the deadline ends it.
        callError = await io.host.steering.pull({ wait_ms: 30_000 }).catch((e: unknown) => e);
      },
    });
    const host = new FakeHost({ runners: [runner] });
    const outcome = await host.run({ deadlineMs: 50 });
    expect(outcome).toMatchObject({ status: 'failed', code: 'runner.timeout' });
    expect(outcome.results.at(-1)!.data.retryable).toBe(true); // as the host's verdict (docs/protocol.md#deadline)
    await new Promise((r) => setImmediate(r));
    expect(callError).toMatchObject({ name: 'RunAbortedError', kind: 'deadline' });
  });

  it('host API refusals are typed errors a handler can catch', async () => {
    let caught: unknown;
    const runner = defineRunner({
      name: 'default',
      async run(_ctx, io) {
        try {
          await io.host.tools.call('rm_rf');
        } catch (e) {
          caught = e;
        }
        await io.host.models.invoke('not-granted', 'hi'); // uncaught: fails the run
      },
    });
    const host = new FakeHost({ runners: [runner] });
    const outcome = await host.run();
    expect(caught).toBeInstanceOf(UnauthorizedError);
    expect(caught).toMatchObject({ code: 'unauthorized', method: 'CallTool' });
    expect(outcome).toMatchObject({ status: 'failed', code: 'runner.exception' });
    expect(outcome.error).toContain('unauthorized: model not-granted is not authorized');
  });

  it('a host call the host stopped because it is cancelling the run reports cancelled, not an exception', async () => {
    const runner = defineRunner({ name: 'default', run: async (_ctx, io) => void (await io.host.tools.call('slow')) });
    const host = new FakeHost({
      runners: [runner],
      handlers: {
        CallTool: () => {
          throw hostApiError('deadline_exceeded', 'tool call stopped: the run ended or was cancelled');
        },
        RunGet: (r) => ({ run_id: r.run_id, status: 'running', cancel_requested: true }),
      },
    });
    expect(await host.run()).toMatchObject({ status: 'failed', code: 'cancelled' });
    const other = new FakeHost({
      runners: [runner],
      handlers: {
        CallTool: () => {
          throw hostApiError('invalid_argument', 'parameters.x: required', { method: 'CallTool' });
        },
        RunGet: (r) => ({ run_id: r.run_id, status: 'running', cancel_requested: false }),
      },
    });
    expect(await other.run()).toMatchObject({
      status: 'failed',
      code: 'runner.exception',
      error: 'CallTool: invalid_argument: parameters.x: required',
    });
  });

  it('turns(): the input, then each steered follow-up at a turn boundary, until a pull finds none', async () => {
    const g = gate();
    const runner = defineRunner({
      name: 'default',
      capabilities: { steering: true },
      async run(_ctx, io) {
        for await (const turn of io.turns()) {
          if (turn.index === 0) {
            await g.opened;
          }
          await io.message(`answer ${turn.index}: ${turn.text}`);
        }
      },
    });
    const host = new FakeHost({ runners: [runner] });
    const run = host.start({ text: 'first' });
    host.steer(run.runId, 'second');
    host.steer(run.runId, 'third');
    g.open();
    const outcome = await run.done;
    expect(outcome.messages).toEqual(['answer 0: first', 'answer 1: second', 'answer 2: third']);
    expect(host.calls.filter((c) => c.method === 'SteeringPull')).toHaveLength(2);
  });

  it('steering pulls that wait leave no listener on the run’s signal (the fake host removed none)', async () => {
    let left = -1;
    const runner = defineRunner({
      name: 'default',
      capabilities: { steering: true },
      async run(_ctx, io) {
        for (let i = 0; i < 12; i++) {
          await io.host.steering.pull({ wait_ms: 1 }); // nothing steered: each pull waits and times out
        }
        left = getEventListeners(io.signal, 'abort').length;
      },
    });
    const outcome = await new FakeHost({ runners: [runner] }).run({ text: 'x' });
    expect(outcome.status).toBe('completed');
    expect(left).toBe(0);
  });

  it('turns() without the steering_pull grant: one turn, and no pull', async () => {
    const texts: string[] = [];
    const runner = defineRunner({
      name: 'default',
      async run(_ctx, io: RunIO) {
        for await (const turn of io.turns({ waitMs: 1000 })) {
          texts.push(turn.text);
        }
        expect(await io.drainSteering()).toEqual([]);
      },
    });
    const host = new FakeHost({ runners: [runner] });
    const run = host.start({ text: 'only' });
    expect((await run.done).status).toBe('completed');
    expect(texts).toEqual(['only']);
    expect(host.calls).toEqual([]);
  });

  it('state, storage and prompt through the fake host; ungranted APIs are refused', async () => {
    const runner = defineRunner({
      name: 'default',
      permissions: { storage: ['plugin'] },
      async run(_ctx: RunContext, io) {
        await io.host.state.set('conversation', 'n', 1);
        await io.state('conversation', 'm', { a: 1 });
        await io.host.storage.set('plugin', 'k', 'v');
        const got = (await io.host.storage.get('plugin', 'k'))?.toString();
        const missing = await io.host.storage.get('plugin', 'none');
        const n = await io.host.state.get('conversation', 'n');
        const history = await io.host.history.page().catch((e: unknown) => e);
        await io.message(JSON.stringify({ got, missing, n, history: (history as UnauthorizedError).code }));
      },
    });
    const host = new FakeHost({ runners: [runner] });
    const outcome = await host.run();
    expect(JSON.parse(outcome.messages[0])).toEqual({ got: 'v', missing: null, n: 1, history: 'unauthorized' });
    expect(host.state.conversation.get('n')).toBe(1);
    expect(outcome.results.find((r) => r.type === 'state.updated')?.data).toEqual({
      scope: 'conversation',
      key: 'm',
      value: { a: 1 },
    });
  });

  it('many large results of one tick leave in frames under maxFrameBytes; one result too large fails only its run', async () => {
    const maxFrameBytes = 64 * 1024;
    const runner = defineRunner({
      name: 'default',
      async run(ctx, io) {
        const size = Number(ctx.config.size ?? 0);
        // 40 results of `size` bytes, all in one tick: far more than one frame holds.
        const written = Array.from({ length: 40 }, (_, i) => io.emit('demo.chunk', { i, blob: 'z'.repeat(size) }));
        await Promise.all(written);
        await io.completed();
      },
    });
    const host = new FakeHost({ runners: [runner], maxFrameBytes });
    const big = host.start({ config: { size: 10_000 } });
    const huge = host.start({ config: { size: maxFrameBytes } });
    const [ok, failed] = await Promise.all([big.done, huge.done]);
    expect(ok.status).toBe('completed');
    expect(ok.results.map((r) => r.sequence)).toEqual(ok.results.map((_, i) => i + 1));
    expect(ok.results.slice(0, 40).map((r) => r.data.i)).toEqual(Array.from({ length: 40 }, (_, i) => i));
    expect(failed).toMatchObject({ status: 'failed', code: 'runner.result_too_large' });
    expect(failed.error).toMatch(
      /^a demo\.chunk result of \d+ bytes does not fit one gRPC frame \(maxFrameBytes 65536\)/,
    );
    expect(failed.results.map((r) => [r.type, r.sequence])).toEqual([['run.failed', 1]]);
    // The frames of that tick: several, each under the bound (an estimate of the JSON is enough here;
    // results.spec.ts checks the encoded bytes).
    expect(host.frames.length).toBeGreaterThan(5);
    for (const frame of host.frames) {
      expect(frame.reduce((n, r) => n + Buffer.byteLength(JSON.stringify(r.data)), 0)).toBeLessThanOrEqual(
        maxFrameBytes,
      );
    }
  });

  it('builds the manifest the host expects and refuses bad definitions, naming the rule', () => {
    const r = defineRunner({ name: 'default', capabilities: { streaming: true }, run: () => undefined });
    expect(manifestOf(r, 'acme', 'bot')).toEqual({
      id: 'plugin:acme/bot/default',
      name: 'default',
      label: { en_US: 'default' },
      description: null,
      protocol_version: '1',
      capabilities: { streaming: true },
      permissions: {},
      config_schema: [],
      metadata: {},
    });
    expect(() => defineRunner({ name: 'a/b', run: () => undefined })).toThrow('runner name must match');
    expect(() => new FakeHost({ runners: [r, r] })).toThrow('two runners are named "default"');
  });
  it('sends the run’s traceparent with each of its host calls, streams included', async () => {
    const runner = defineRunner({
      name: 'traced',
      async run(_ctx, io) {
        await io.host.tools.call('t');
        for await (const chunk of io.host.models.stream('m', 'hi')) {
          await io.delta(chunk);
        }
      },
    });
    const host = new FakeHost({ runners: [runner], tools: { t: () => ({}) }, models: { m: () => 'ok' } });
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    expect((await host.run({ traceparent })).status).toBe('completed');
    expect(host.calls.map((c) => [c.method, c.traceparent])).toEqual([
      ['CallTool', traceparent],
      ['StreamModel', traceparent],
    ]);
    await host.run();
    expect(host.calls.slice(2).map((c) => c.traceparent)).toEqual([undefined, undefined]);
  });
});
