import { scripts } from '@libs/testing';
import { LocalAgentWorld } from './local-agent-setup';

/*
 * Issue 23 item 4e: what the built-in local agent's runs end with when they meet the host's
 * limits, through the real host, the in-process host API and the scripted OpenAI-compatible
 * server. A low per-run rate (5 calls/s, burst 1) makes a fast tool loop meet it at once.
 */

jest.setTimeout(180_000);

describe('the local agent at the host limits', () => {
  const world = new LocalAgentWorld({ HOSTAPI_CALLS_PER_SECOND: '5', HOSTAPI_BURST: '1' });

  beforeAll(async () => {
    await world.start();
    await world.agent('looper', { tools: ['add', 'echo'] });
  });

  afterAll(() => world.stop());

  beforeEach(() => world.server.reset());

  it('a tool loop faster than the per-run rate is paced, not failed: every call allowed, the run completes', async () => {
    const iterations = 12;
    world.server.chat(
      ...Array.from({ length: iterations }, (_, i) =>
        scripts.toolCalls([{ id: `call_${i}`, name: 'add', arguments: `{"a":${i},"b":1}` }]),
      ),
      scripts.reply('all added'),
    );
    const runId = await world.say('looper', 'conv-loop', 'add them all');
    const events = await world.results(runId);
    expect(events.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    expect(events.filter((e) => e.event === 'tool.call.completed')).toHaveLength(iterations);
    const audit = await world.audit(runId);
    expect(audit.filter((a) => a.action === 'tool.call')).toHaveLength(iterations);
    expect(audit.filter((a) => a.outcome !== 'allowed')).toEqual([]);
    expect(audit.length).toBeGreaterThan(iterations * 2); // well over what burst 1 at 5/s lets through at once
  });

  it('5 MB of tool-call arguments: the call is not made and the run fails runner.tool_arguments_too_large, not retryable', async () => {
    const args = JSON.stringify({ text: 'x'.repeat(5_000_000) });
    world.server.chat(scripts.toolCalls([{ id: 'call_big', name: 'echo', arguments: args }]), scripts.reply('never'));
    const runId = await world.say('looper', 'conv-big', 'say something long');
    const events = await world.results(runId);
    expect(events.filter((e) => e.event.startsWith('tool.call'))).toEqual([]);
    expect(events.at(-1)!.data).toMatchObject({
      type: 'run.failed',
      data: {
        code: 'runner.tool_arguments_too_large',
        retryable: false,
        error: `the model called tool 'echo' with ${args.length} bytes of arguments; the host takes at most ${1024 * 1024 - 512} bytes of tool-call arguments: the call was not made`,
      },
    });
    expect(world.chats()).toHaveLength(1);
    expect((await world.audit(runId)).filter((a) => a.action === 'tool.call')).toEqual([]);
    expect(await world.run(runId)).toMatchObject({ status: 'failed' });
  });
});
