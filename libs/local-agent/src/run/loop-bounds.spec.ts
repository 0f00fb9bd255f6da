import { FakeHost, fakeContext, withApis } from '../testing/fake-host';
import { runAgent } from '../testing/run-agent';
import { MAX_STEERING_FOLLOW_UPS } from './agent-loop';

/* The loop is bounded: tool batches by max-tool-iterations (behaviour 36), steering follow-ups by a cap. */

describe('local agent loop bounds', () => {
  it('steering follow-ups after final answers stop at MAX_STEERING_FOLLOW_UPS; the run still completes', async () => {
    const turns = MAX_STEERING_FOLLOW_UPS + 1;
    const host = new FakeHost().script('m1', ...Array.from({ length: turns }, (_, i) => ({ text: `answer ${i}` })));
    host.steering = Array.from({ length: turns + 5 }, (_, i) => [{ input: { text: `follow-up ${i}` } }]);
    await runAgent(host, withApis(fakeContext(), { steering_pull: true }));
    expect(host.modelRequests).toHaveLength(turns);
    expect(host.callsOf('steering.pull')).toHaveLength(MAX_STEERING_FOLLOW_UPS);
    expect(host.typesOf()).toEqual(['message.completed', 'run.completed']);
    expect(host.resultsOf('message.completed')[0].data.message.content).toBe(`answer ${turns - 1}`);
  });
});
