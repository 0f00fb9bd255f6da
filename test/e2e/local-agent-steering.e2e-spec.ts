import { scripts } from '@libs/testing';
import { LocalAgentWorld, shown, waitFor } from './local-agent-setup';

/*
 * A steered follow-up through the real host: a second message for a conversation whose
 * local-agent run is active is steered into that run (disposition `steered`, same run id); the
 * agent pulls it after its tool batch and the model sees it at the next turn; the pull is
 * audited like a plugin's.
 */

jest.setTimeout(120_000);

describe('the built-in local agent takes a steered follow-up', () => {
  const world = new LocalAgentWorld();
  const { host } = world;

  beforeAll(async () => {
    await world.start();
    await world.agent('steerable', { tools: ['current_time'], concurrency: 'steer' });
  });

  afterAll(() => world.stop());

  it('steers the follow-up into the active run; the model sees it at its next turn', async () => {
    // First turn: a slow answer asking for a tool call, so the run is still working when the
    // follow-up arrives; the agent pulls steering after the tool batch.
    world.server.chat(
      scripts.completion({ tool_calls: [{ id: 'call_t', name: 'current_time', arguments: '{}' }] }, { delay_ms: 1500 }),
      scripts.reply('Noted: I will remind you to call Bob.'),
    );
    const runId = await world.say('steerable', 'conv-steer', 'Plan my day.');
    await waitFor('the first model request', () => Promise.resolve(world.server.requests.length >= 1));
    const follow = await host.api('POST', '/v1/events', {
      agent_id: 'steerable',
      event: { event_type: 'message.received', source: 'api' },
      conversation: { conversation_id: 'conv-steer' },
      actor: { actor_type: 'user', actor_id: 'u1' },
      input: { text: 'Also remind me to call Bob.' },
    });
    expect(follow.status).toBe(202);
    expect(follow.body).toMatchObject({ disposition: 'steered', run_id: runId, position: 1 });

    const events = await world.results(runId);
    expect(events.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    const chats = world.chats();
    expect(chats).toHaveLength(2);
    // The second request shows both user messages, in order.
    expect(chats[1].messages.filter((m: any) => m.role === 'user').map((m: any) => shown([m]))).toEqual([
      expect.stringContaining('Plan my day.'),
      expect.stringContaining('Also remind me to call Bob.'),
    ]);
    expect(shown(chats[0].messages)).not.toContain('call Bob');
    const pulls = (await world.audit(runId)).filter((a) => a.action === 'steering.pull');
    expect(pulls.length).toBeGreaterThan(0);
    expect(pulls[0]).toMatchObject({ outcome: 'allowed', plugin_id: 'builtin' });
    // One run answered both; the admin view says the item was injected (pulled) into it, once.
    const runs = (await host.api('GET', '/v1/runs?conversation_id=conv-steer')).body.items;
    expect(runs.map((r: any) => r.run_id)).toEqual([runId]);
    const view = (await host.api('GET', '/v1/admin/steering?conversation_id=conv-steer')).body;
    expect(view.items).toEqual([
      expect.objectContaining({ run_id: runId, state: 'injected', pull_mode: 'all', next_run_id: null }),
    ]);
    const transcript = await host.api('GET', '/v1/conversations/conv-steer/transcript?order=oldest&limit=10');
    expect(transcript.body.items.map((i: any) => [i.role, i.content])).toEqual([
      ['user', 'Plan my day.'],
      ['user', 'Also remind me to call Bob.'],
      ['assistant', 'Noted: I will remind you to call Bob.'],
    ]);
  });
});
