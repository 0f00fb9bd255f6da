import { call, FakeHost, fakeContext } from '../testing/fake-host';
import { runAgent } from '../testing/run-agent';
import { RunControls, RunStopped } from './controls';

/* Run controls (docs/local-agent.md#deadline-and-cancel) and run isolation. */

const port = () => ({ signal: new AbortController().signal });

describe('local agent run controls', () => {
  it("an operation's own timeout error propagates as the same object, with or without a deadline", async () => {
    const own = new Error('TimeoutError: the operation timed out');
    for (const timeout of [null, 60]) {
      const c = new RunControls(port(), timeout, null, false);
      await expect(c.race(Promise.reject(own))).rejects.toBe(own);
      expect(c.stopReason).toBeNull();
      c.dispose();
    }
  });

  it('a stop rejects every race in flight with RunStopped and later races at once', async () => {
    const ac = new AbortController();
    const c = new RunControls({ signal: ac.signal }, null, null, false);
    const pending = c.race(new Promise(() => undefined));
    ac.abort();
    await expect(pending).rejects.toEqual(new RunStopped('cancelled'));
    await expect(c.race(Promise.resolve(1))).rejects.toBeInstanceOf(RunStopped);
    c.dispose();
  });

  it('a host abort after the host deadline is a timeout, before it a cancel', () => {
    const ac = new AbortController();
    const past = new RunControls({ signal: ac.signal }, null, Date.now() - 1, false);
    expect(past.stopReason).toBe('timeout');
    past.dispose();
    const ac2 = new AbortController();
    const future = new RunControls({ signal: ac2.signal }, null, Date.now() + 60_000, false);
    ac2.abort();
    expect(future.stopReason).toBe('cancelled');
    future.dispose();
  });

  it('a host deadline already passed ends the run runner.timeout before any model call', async () => {
    const host = new FakeHost().script('m1', { text: 'never' });
    await runAgent(host, fakeContext({ runtime: { deadline_at: Date.now() / 1000 - 1, metadata: {} } }));
    expect(host.modelRequests).toEqual([]);
    expect(host.results).toEqual([
      { type: 'run.failed', data: { error: 'Agent run timed out', code: 'runner.timeout', retryable: true } },
    ]);
  });

  it('concurrent runs do not share per-run state', async () => {
    const a = new FakeHost()
      .script('m1', { tool_calls: [call('c1', 't')] }, { text: 'answer A' })
      .tool('t', () => 'A data');
    const b = new FakeHost().script('m1', { text: 'answer B' });
    const ctx = fakeContext({ resources: { ...fakeContext().resources, tools: [{ tool_name: 't', parameters: {} }] } });
    await Promise.all([runAgent(a, ctx), runAgent(b, { ...ctx, input: { text: 'other' } })]);
    expect(a.resultsOf('message.completed')[0].data.message.content).toBe('answer A');
    expect(b.resultsOf('message.completed')[0].data.message.content).toBe('answer B');
    expect(JSON.stringify(b.modelRequests)).not.toContain('A data');
  });

  it('nothing is emitted after the terminal result (a parallel tool finishing late is dropped)', async () => {
    let finishLate!: () => void;
    const host = new FakeHost()
      .script('m1', { tool_calls: [call('c1', 'late'), call('c2', 'stop')] })
      .tool('late', () => new Promise((r) => (finishLate = () => r('late'))))
      .tool('stop', () => {
        host.abort.abort();
        return 'x';
      });
    const ctx = fakeContext({
      resources: {
        ...fakeContext().resources,
        tools: [
          { tool_name: 'late', parameters: {} },
          { tool_name: 'stop', parameters: {} },
        ],
      },
    });
    await runAgent(host, ctx);
    finishLate();
    await new Promise((r) => setImmediate(r));
    expect(host.typesOf().at(-1)).toBe('run.failed');
    expect(host.typesOf().filter((t) => t === 'run.failed' || t === 'run.completed')).toHaveLength(1);
  });
});
