import { RunnerConnections, type RunnerSession } from '../runner-connections';
import { RunnerDispatch, type RunnerTarget, type RunnerTransport } from './runner-dispatch';

const session = (plugin_id: string, runnerIds: string[]): RunnerSession => ({
  session_id: `s-${plugin_id}`,
  plugin_id,
  connected_at: 0,
  last_seen_at: 0,
  runners: runnerIds.map((runner_id) => ({ runner_id, name: 'default', manifest: {} as never })),
  send: () => undefined,
  close: () => undefined,
});

class Builtin implements RunnerTransport {
  readonly kind = 'builtin';
  readonly session = session('builtin', ['builtin:local-agent/default']);
  target(runnerId: string): RunnerTarget | undefined {
    return runnerId === 'builtin:local-agent/default'
      ? { session: this.session, runner: this.session.runners[0] }
      : undefined;
  }
  targets(): RunnerTarget[] {
    return [{ session: this.session, runner: this.session.runners[0] }];
  }
}

describe('RunnerDispatch: one port over the plugin and built-in transports', () => {
  it('resolves a plugin runner to its live Connect session, and nothing once it is gone', () => {
    const connections = new RunnerConnections();
    const dispatch = new RunnerDispatch(connections);
    const live = session('acme/bot', ['plugin:acme/bot/default']);
    connections.attach(live);
    expect(dispatch.target('plugin:acme/bot/default')?.session).toBe(live);
    connections.detach(live, 'bye');
    expect(dispatch.target('plugin:acme/bot/default')).toBeUndefined();
  });

  it('resolves a registered built-in runner and lists every live target with its kind', () => {
    const connections = new RunnerConnections();
    const dispatch = new RunnerDispatch(connections);
    expect(dispatch.target('builtin:local-agent/default')).toBeUndefined();
    const builtin = new Builtin();
    dispatch.register(builtin);
    connections.attach(session('acme/bot', ['plugin:acme/bot/default', 'plugin:acme/bot/other']));
    expect(dispatch.target('builtin:local-agent/default')?.session).toBe(builtin.session);
    expect(dispatch.targets().map((t) => [t.kind, t.runner.runner_id])).toEqual([
      ['builtin', 'builtin:local-agent/default'],
      ['plugin', 'plugin:acme/bot/default'],
      ['plugin', 'plugin:acme/bot/other'],
    ]);
  });
});
