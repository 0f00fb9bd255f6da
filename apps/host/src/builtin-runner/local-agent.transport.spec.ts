import type { AppConfig } from '@libs/config';
import type { HostActions } from '@libs/host-api';
import type { AgentRunContext, LocalAgentHostPort } from '@libs/local-agent';
import { RunnerConnections, RunnerDispatch, type InboundEvent } from '@libs/runner-gateway';
import type { RunGrants } from '@libs/runs';
import { BUILTIN_PLUGIN_ID, LocalAgentTransport } from './local-agent.transport';

/** The agent under the transport: each test says what it does with its port. */
let agent: (port: LocalAgentHostPort, context: AgentRunContext) => Promise<void>;
jest.mock('@libs/local-agent', () => ({
  ...jest.requireActual<object>('@libs/local-agent'),
  runLocalAgent: (port: LocalAgentHostPort, context: AgentRunContext) => agent(port, context),
}));

function setup() {
  const connections = new RunnerConnections();
  const dispatch = new RunnerDispatch(connections);
  const inbound: InboundEvent[] = [];
  connections.inbound$.subscribe((e) => inbound.push(e));
  const transport = new LocalAgentTransport(
    dispatch,
    connections,
    {} as HostActions,
    { grant: () => undefined, find: () => Promise.resolve(undefined) } satisfies RunGrants,
    {
      localAgent: { skillsDir: null },
      hostApi: { maxPayloadBytes: 1024 * 1024 },
      runs: { maxResultBytes: 1024 * 1024 },
    } as AppConfig,
  );
  transport.onModuleInit();
  const target = dispatch.target('builtin:local-agent/default')!;
  const start = (runId: string) =>
    target.session.send({
      run: {
        runner_id: target.runner.runner_id,
        runner_name: target.runner.name,
        context: { run_id: runId },
        traceparent: '',
      },
    });
  const settled = () => new Promise((resolve) => setTimeout(resolve, 20));
  return { transport, target, start, inbound, settled };
}

describe('LocalAgentTransport: builtin:local-agent/default as a runner session in process', () => {
  it('registers on the dispatch port with its manifest and the built-in identity', () => {
    const { target } = setup();
    expect(target.session.plugin_id).toBe(BUILTIN_PLUGIN_ID);
    expect(target.runner.manifest.capabilities).toMatchObject({ streaming: true, steering: true });
  });

  it("delivers the agent's results as the run's results on its session, in order", async () => {
    const { start, inbound, target, settled } = setup();
    agent = async (port) => {
      await port.emit({ type: 'message.completed', data: { message: { role: 'assistant', content: 'hi' } } });
      await port.emit({ type: 'run.completed', data: { finish_reason: 'stop' } });
    };
    start('run-1');
    await settled();
    expect(inbound.map((e) => e.kind === 'result' && [e.session, e.result.run_id, e.result.type])).toEqual([
      [target.session, 'run-1', 'message.completed'],
      [target.session, 'run-1', 'run.completed'],
    ]);
  });

  it('a cancel message aborts that run’s signal, with the reason', async () => {
    const { start, target, transport, settled } = setup();
    let seen: unknown = null;
    agent = (port) =>
      new Promise((resolve) =>
        port.signal.addEventListener('abort', () => {
          seen = port.signal.reason;
          resolve();
        }),
      );
    start('run-2');
    await settled();
    expect(transport.activeCount).toBe(1);
    target.session.send({ cancel: { run_id: 'run-2', reason: 'deadline exceeded' } });
    await settled();
    expect(seen).toBe('deadline exceeded');
    expect(transport.activeCount).toBe(0);
  });

  it('an agent that throws still ends its run with run.failed', async () => {
    const { start, inbound, settled } = setup();
    agent = () => Promise.reject(new Error('bug'));
    start('run-3');
    await settled();
    expect(inbound.map((e) => e.kind === 'result' && [e.result.type, e.result.data])).toEqual([
      ['run.failed', { error: 'the local agent failed', code: 'runner.error', retryable: false }],
    ]);
  });
});
