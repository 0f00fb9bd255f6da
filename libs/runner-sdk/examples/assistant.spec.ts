import { messageText } from '@runner-host/runner-sdk';
import { FakeHost } from '@runner-host/runner-sdk/testing';
import { assistant } from './assistant';

// The test-kit example of the runner SDK's documentation (docs/runner-sdk.md), as it is written there.

describe('the example assistant on the fake host', () => {
  it('answers and follows up', async () => {
    const host = new FakeHost({
      runners: [assistant],
      models: { m1: (messages) => `echo: ${messageText(messages.at(-1))}` },
      tools: { current_time: () => ({ iso: '2026-01-01T00:00:00Z' }) },
    });
    const run = host.start({ text: 'hi', config: { steer_wait_ms: 0 } });
    host.steer(run.runId, 'and then?');
    const outcome = await run.done;
    expect(outcome.messages).toEqual(['echo: hi', 'echo: and then?']);
    expect(outcome.streamed).toBe('echo: hiecho: and then?');
    expect(host.calls.map((c) => c.method)).toEqual([
      'CallTool',
      'StreamModel',
      'SteeringPull',
      'StreamModel',
      'SteeringPull',
    ]);
  });

  it('fails with runner.no_model when the agent granted no model', async () => {
    const host = new FakeHost({ runners: [assistant], tools: { current_time: () => ({}) } });
    expect(await host.run({ text: 'hi' })).toMatchObject({ status: 'failed', code: 'runner.no_model' });
  });

  it('a cancel during the model stream ends the run as cancelled', async () => {
    let release!: () => void;
    const host = new FakeHost({
      runners: [assistant],
      models: { m1: () => new Promise<string>((resolve) => (release = () => resolve('late'))) },
      tools: { current_time: () => ({}) },
    });
    const run = host.start({ text: 'hi' });
    await run.waitFor('tool.call.completed');
    host.cancel(run.runId, 'stop');
    release?.();
    expect(await run.done).toMatchObject({ status: 'failed', code: 'cancelled', error: 'cancelled: stop' });
    expect(run.results.some((r) => r.type === 'message.delta')).toBe(false);
  });
});
