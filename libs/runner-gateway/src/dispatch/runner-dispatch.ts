import { Injectable } from '@nestjs/common';
import { RunnerConnections, type ConnectedRunner, type RunnerSession } from '../runner-connections';

/** Where a run of one runner goes: the session that takes its run and cancel messages, and the runner's manifest. */
export interface RunnerTarget {
  session: RunnerSession;
  runner: ConnectedRunner;
}

/**
 * One way runs reach runners. Plugins are reached over their gRPC Connect session; the host's own
 * runners in process. Either way a run is a `run` message on the target's session, a cancel a
 * `cancel` message, and results come back through RunnerConnections.deliver into the one result
 * ingest — the run path does not know which transport it used.
 */
export interface RunnerTransport {
  readonly kind: 'builtin' | 'plugin';
  /** The live target serving this runner id, if any. */
  target(runnerId: string): RunnerTarget | undefined;
  /** Every runner this transport serves now. */
  targets(): RunnerTarget[];
}

/** Plugin runners: the live Connect sessions. */
class PluginTransport implements RunnerTransport {
  readonly kind = 'plugin';

  constructor(private readonly connections: RunnerConnections) {}

  target(runnerId: string): RunnerTarget | undefined {
    return this.connections.runner(runnerId);
  }

  targets(): RunnerTarget[] {
    return this.connections.sessions().flatMap((session) => session.runners.map((runner) => ({ session, runner })));
  }
}

/**
 * The runner-dispatch port: resolves a runner id to its live target over every registered
 * transport. Built-in runners register at startup; runner ids of the two kinds never collide
 * (`builtin:…` and `plugin:…`).
 */
@Injectable()
export class RunnerDispatch {
  private readonly transports: RunnerTransport[];

  constructor(connections: RunnerConnections) {
    this.transports = [new PluginTransport(connections)];
  }

  register(transport: RunnerTransport): void {
    this.transports.unshift(transport);
  }

  target(runnerId: string): RunnerTarget | undefined {
    for (const transport of this.transports) {
      const found = transport.target(runnerId);
      if (found) {
        return found;
      }
    }
    return undefined;
  }

  /** Every live target with its transport kind. */
  targets(): (RunnerTarget & { kind: RunnerTransport['kind'] })[] {
    return this.transports.flatMap((t) => t.targets().map((target) => ({ ...target, kind: t.kind })));
  }
}
