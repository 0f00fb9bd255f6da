import { FakeHost, call, fakeContext, hostError } from '../testing/fake-host';
import { runAgent, terminal } from '../testing/run-agent';

/* Issue 23 item 4e: a request the host refuses for its size fails the run with that cause, not retryable. */

describe('local agent size limits', () => {
  it('does not make a tool call whose arguments exceed the host limits: runner.tool_arguments_too_large', async () => {
    const big = JSON.stringify({ text: 'x'.repeat(10_000) });
    const host = new FakeHost().script('m1', { tool_calls: [call('c1', 'echo', big)] }, { text: 'never' });
    host.tool('echo', () => ({ ok: true }));
    host.limits = { max_request_bytes: 1_000_000, max_result_bytes: 8192 };
    await runAgent(host, fakeContext());
    expect(host.callsOf('tool.call')).toEqual([]);
    expect(host.typesOf()).toEqual(['run.failed']);
    expect(terminal(host)[0].data).toEqual({
      error: `the model called tool 'echo' with ${big.length} bytes of arguments; the host takes at most ${8192 - 512} bytes of tool-call arguments: the call was not made`,
      code: 'runner.tool_arguments_too_large',
      retryable: false,
    });
  });

  it('arguments within the limits are called as before', async () => {
    const host = new FakeHost().script('m1', { tool_calls: [call('c1', 'echo', { text: 'hi' })] }, { text: 'done' });
    host.tool('echo', () => ({ ok: true }));
    host.limits = { max_request_bytes: 1_000_000, max_result_bytes: 8192 };
    await runAgent(host, fakeContext());
    expect(host.typesOf()).toEqual(['tool.call.started', 'tool.call.completed', 'message.completed', 'run.completed']);
  });

  it('a model request the host refuses as too large fails runner.request_too_large, not retryable', async () => {
    const host = new FakeHost()
      .script('m1', { error: hostError('payload_too_large', 'request is 5000000 bytes; the limit is 1048576') })
      .script('m2', { error: hostError('payload_too_large', 'request is 5000000 bytes; the limit is 1048576') });
    await runAgent(host, fakeContext());
    expect(terminal(host)[0].data).toMatchObject({
      code: 'runner.request_too_large',
      retryable: false,
      error: expect.stringContaining('request is 5000000 bytes; the limit is 1048576') as unknown,
    });
  });
});
