import { modelCandidates, parseAgentConfig } from './config';
import { call, FakeHost, fakeContext, hostError, streaming, withApis } from './testing/fake-host';
import { runAgent, terminal } from './testing/run-agent';

/*
 * Behaviours 1-10 of the local agent (docs/local-agent.md#tests): models, fallback, deadlines,
 * cancel, streaming mode.
 */

const usage = (p: number, c: number) => ({ prompt_tokens: p, completion_tokens: c, total_tokens: p + c });

describe('local agent — behaviours 1-10', () => {
  it('01. model list: primary then fallbacks, trimmed, deduped, __none__/empty/unauthorized removed; none → runner.no_model and zero host calls', async () => {
    const cfg = parseAgentConfig({ model: { primary: ' m1 ', fallbacks: ['__none__', '', 'm3', 'm2', 'm1', ' m2'] } });
    expect(modelCandidates(cfg, new Set(['m1', 'm2']))).toEqual(['m1', 'm2']);
    expect(modelCandidates(parseAgentConfig({ model: { primary: 'x', fallbacks: ['m2'] } }), new Set(['m2']))).toEqual([
      'm2',
    ]);
    expect(modelCandidates(parseAgentConfig({ model: null }), new Set(['m1']))).toEqual([]);
    expect(modelCandidates(parseAgentConfig({ model: 7 }), new Set(['m1']))).toEqual([]);

    const host = await runAgent(
      new FakeHost(),
      fakeContext({}, { model: { primary: 'nope', fallbacks: ['__none__'] } }),
    );
    expect(host.results).toEqual([
      {
        type: 'run.failed',
        data: { error: 'No authorized model for local-agent', code: 'runner.no_model', retryable: false },
      },
    ]);
    expect(host.calls).toEqual([]);
  });

  it('02. timeout: missing/negative/boolean/non-integer → 300 s; 0 or null → no local deadline (a slow run completes)', async () => {
    expect(parseAgentConfig({}).timeout).toBe(300);
    expect(parseAgentConfig({ timeout: 12 }).timeout).toBe(12);
    expect(parseAgentConfig({ timeout: -1 }).timeout).toBe(300);
    expect(parseAgentConfig({ timeout: true }).timeout).toBe(300);
    expect(parseAgentConfig({ timeout: 1.5 }).timeout).toBe(300);
    expect(parseAgentConfig({ timeout: 0 }).timeout).toBeNull();
    expect(parseAgentConfig({ timeout: null }).timeout).toBeNull();

    const host = new FakeHost().script('m1', { text: 'slow but fine' });
    const slow = host.invokeModel.bind(host);
    host.invokeModel = async (req) => {
      await new Promise((r) => setTimeout(r, 30));
      return slow(req);
    };
    await runAgent(host, fakeContext({}, { timeout: 0 }));
    expect(host.typesOf()).toEqual(['message.completed', 'run.completed']);
  });

  it('03. local deadline expiry → exactly one run.failed "Agent run timed out" runner.timeout retryable, with the usage already observed', async () => {
    const host = new FakeHost()
      .script('m1', { tool_calls: [call('c1', 'stall')], usage: usage(7, 3) })
      .tool('stall', () => new Promise(() => undefined));
    const ctx = fakeContext(
      { resources: { ...fakeContext().resources, tools: [{ tool_name: 'stall', parameters: { type: 'object' } }] } },
      { timeout: 1 },
    );
    await runAgent(host, ctx);
    expect(host.typesOf()).toEqual(['tool.call.started', 'run.failed']);
    expect(terminal(host)).toEqual([
      {
        type: 'run.failed',
        data: { error: 'Agent run timed out', code: 'runner.timeout', retryable: true },
        usage: { ...usage(7, 3), model_calls: 1, turns: [usage(7, 3)] },
      },
    ]);
  });

  it('04. host deadline_exceeded from a model call → runner.timeout, retryable, and no fallback model is tried', async () => {
    const host = new FakeHost().script('m1', { error: hostError('deadline_exceeded', 'the run deadline has passed') });
    await runAgent(host, fakeContext());
    expect(host.modelRequests.map((r) => r.model_id)).toEqual(['m1']);
    expect(terminal(host)).toEqual([
      { type: 'run.failed', data: { error: 'the run deadline has passed', code: 'runner.timeout', retryable: true } },
    ]);

    // docs/local-agent.md#deadline-and-cancel: a call's own timeout is not the run deadline: it is
    // an ordinary failure, so fallback applies.
    const own = new FakeHost()
      .script('m1', { error: hostError('deadline_exceeded', 'no answer within timeout_ms', { reason: 'timeout' }) })
      .script('m2', { text: 'from m2' });
    await runAgent(own, fakeContext());
    expect(own.modelRequests.map((r) => r.model_id)).toEqual(['m1', 'm2']);
    expect(own.typesOf()).toEqual(['message.completed', 'run.completed']);
  });

  it('05. cancel → run.failed cancelled (not retryable) with prior usage; discovered at agent end it suppresses message.completed/run.completed', async () => {
    const host = new FakeHost().script('m1', { tool_calls: [call('c1', 'wait')], usage: usage(5, 2) });
    host.tool('wait', () => {
      host.abort.abort(); // the host cancels the run while the tool runs
      return new Promise(() => undefined);
    });
    const ctx = fakeContext({
      resources: { ...fakeContext().resources, tools: [{ tool_name: 'wait', parameters: { type: 'object' } }] },
    });
    await runAgent(host, ctx);
    expect(terminal(host)).toEqual([
      {
        type: 'run.failed',
        data: { error: 'Run cancellation requested', code: 'cancelled', retryable: false },
        usage: { ...usage(5, 2), model_calls: 1, turns: [usage(5, 2)] },
      },
    ]);

    const atEnd = new FakeHost().script('m1', { text: 'done', usage: usage(1, 1) });
    atEnd.onEmit = () => undefined;
    const polls: number[] = [];
    const runGet = atEnd.runGet.bind(atEnd);
    atEnd.runGet = async () => {
      polls.push(1);
      const r = await runGet();
      return polls.length >= 3 ? { status: 'cancelled', cancel_requested: true } : r;
    };
    await runAgent(atEnd, withApis(fakeContext(), { run_get: true }));
    expect(atEnd.typesOf()).toEqual(['run.failed']);
    expect(atEnd.results[0]).toMatchObject({ data: { code: 'cancelled' }, usage: { model_calls: 1 } });
  });

  it('06. streaming only when runtime metadata allows and delivery supports it; otherwise message.completed then run.completed', async () => {
    const plain = new FakeHost().script('m1', { text: 'hi' });
    await runAgent(plain, fakeContext());
    expect(plain.modelRequests.map((r) => r.op)).toEqual(['invoke']);
    expect(plain.typesOf()).toEqual(['message.completed', 'run.completed']);
    expect(plain.results[0]).toEqual({
      type: 'message.completed',
      data: { message: { role: 'assistant', content: 'hi' } },
    });

    const runtimeOff = new FakeHost().script('m1', { text: 'hi' });
    await runAgent(runtimeOff, { ...streaming(fakeContext()), runtime: { metadata: { streaming_supported: false } } });
    expect(runtimeOff.modelRequests.map((r) => r.op)).toEqual(['invoke']);

    const on = new FakeHost().script('m1', { text: 'hi' });
    await runAgent(on, streaming(fakeContext()));
    expect(on.modelRequests.map((r) => r.op)).toEqual(['stream']);
    expect(on.typesOf()).toEqual(['message.delta', 'message.delta', 'message.completed', 'run.completed']);
  });

  it('07. non-streaming fallback: primary throws, fallback answers and serves every later turn ([m1, m2, m2])', async () => {
    const host = new FakeHost()
      .script('m1', { error: new Error('boom') })
      .script('m2', { tool_calls: [call('c1', 'lookup', { q: 1 })] }, { text: 'Done' })
      .tool('lookup', () => 'found');
    const ctx = fakeContext({
      resources: { ...fakeContext().resources, tools: [{ tool_name: 'lookup', parameters: { type: 'object' } }] },
    });
    const warnings: string[] = [];
    await runAgent(host, ctx, warnings);
    expect(host.modelRequests.map((r) => r.model_id)).toEqual(['m1', 'm2', 'm2']);
    expect(host.modelRequests[2].tools.map((t) => t.function.name)).toEqual(['lookup']);
    expect(warnings).toContain('LLM model failed; falling back to next configured model: m1');
    expect(host.resultsOf('message.completed')[0].data.message.content).toBe('Done');
  });

  it('08. streaming fallback only before the first visible chunk; whitespace chunks and empty streams fail that candidate', async () => {
    const host = new FakeHost()
      .script('m1', { stream: [{ delta: '  ' }, { delta: '\n' }, { is_final: true, finish_reason: null }] })
      .script('m2', { text: 'from m2' });
    await runAgent(host, streaming(fakeContext()));
    expect(host.modelRequests.map((r) => r.model_id)).toEqual(['m1', 'm2']);
    expect(host.resultsOf('message.completed')[0].data.message.content).toBe('from m2');

    const empty = new FakeHost().script('m1', { stream: [] }).script('m2', { text: 'ok' });
    await runAgent(empty, streaming(fakeContext()));
    expect(empty.modelRequests.map((r) => r.model_id)).toEqual(['m1', 'm2']);
    expect(empty.typesOf().at(-1)).toBe('run.completed');

    const raises = new FakeHost().script('m1', { error: new Error('connect refused') }).script('m2', { text: 'ok' });
    await runAgent(raises, streaming(fakeContext()));
    expect(raises.typesOf().at(-1)).toBe('run.completed');
  });

  it('09. a stream failing after the first visible chunk → runner.llm_error, not retryable, "no fallback possible", next model never called', async () => {
    const host = new FakeHost().script('m1', { stream: [{ delta: 'First chunk' }], errorAfter: new Error('reset') });
    await runAgent(host, streaming(fakeContext()));
    expect(host.modelRequests.map((r) => r.model_id)).toEqual(['m1']);
    const failed = terminal(host);
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ type: 'run.failed', data: { code: 'runner.llm_error', retryable: false } });
    expect((failed[0].data as { error: string }).error).toContain('no fallback possible');
    expect(host.typesOf()).toEqual(['message.delta', 'run.failed']);

    // LP: a committed stream that just ends, without a final chunk, is truncated output: the same failure.
    const cut = new FakeHost().script('m1', { stream: [{ delta: 'partial' }] });
    await runAgent(cut, streaming(fakeContext()));
    expect(cut.modelRequests.map((r) => r.model_id)).toEqual(['m1']);
    expect(terminal(cut)[0]).toMatchObject({
      data: {
        error: 'Model m1 failed after first chunk (no fallback possible): the stream ended without a final chunk',
        code: 'runner.llm_error',
        retryable: false,
      },
    });
  });

  it('10. all candidates fail → "All models failed" (streaming: "All models failed during streaming setup"), retryable', async () => {
    const host = new FakeHost().script('m1', { error: new Error('a') }).script('m2', { error: new Error('b') });
    await runAgent(host, fakeContext());
    expect(terminal(host)).toEqual([
      {
        type: 'run.failed',
        data: { error: 'All models failed. Last error: b', code: 'runner.llm_error', retryable: true },
      },
    ]);

    const s = new FakeHost().script('m1', { stream: [] }).script('m2', { stream: [{ is_final: true }] });
    await runAgent(s, streaming(fakeContext()));
    const f = terminal(s)[0];
    expect(f).toMatchObject({ type: 'run.failed', data: { code: 'runner.llm_error', retryable: true } });
    expect((f.data as { error: string }).error).toMatch(/^All models failed during streaming setup/);
  });
});
