import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { HostActions, InProcessHostPort } from '@libs/host-api';
import { LOCAL_AGENT_MANIFEST, runLocalAgent, type AgentResult, type AgentRunContext } from '@libs/local-agent';
import { BUILTIN_LOCAL_AGENT_ID, type RunContext, type RunnerCommand } from '@libs/protocol';
import {
  RunnerConnections,
  RunnerDispatch,
  type ConnectedRunner,
  type RunnerSession,
  type RunnerTarget,
  type RunnerTransport,
} from '@libs/runner-gateway';
import { RunGrants } from '@libs/runs';
import { telemetry } from '@libs/telemetry';
import { skillRoots } from './skill-roots';

/**
 * The identity the built-in runner calls the host API with. Plugin ids are `author/name`, so no
 * registered plugin can hold it; the gate checks it against the run's session like any plugin's.
 */
export const BUILTIN_PLUGIN_ID = 'builtin';

/**
 * `builtin:local-agent/default`, served in process: a runner session that is always connected.
 * A `run` message starts the local agent on the in-process host API port, bound to the run; a
 * `cancel` message (cancel, deadline) aborts its signal. Its results enter the host exactly as a
 * plugin's do — RunnerConnections.deliver into the one result ingest (sequence rules, payload
 * validation, one terminal result) — and its host API calls pass the same gate and audit.
 */
@Injectable()
export class LocalAgentTransport implements RunnerTransport, OnModuleInit {
  readonly kind = 'builtin';
  private readonly logger = new Logger('LocalAgent');
  private readonly runner: ConnectedRunner = {
    runner_id: BUILTIN_LOCAL_AGENT_ID,
    name: LOCAL_AGENT_MANIFEST.name,
    manifest: LOCAL_AGENT_MANIFEST,
  };
  private readonly session: RunnerSession;
  /** Runs the agent is working on: their stop switch. */
  private readonly running = new Map<string, AbortController>();

  constructor(
    private readonly dispatch: RunnerDispatch,
    private readonly connections: RunnerConnections,
    private readonly actions: HostActions,
    private readonly grants: RunGrants,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    const now = Date.now();
    this.session = {
      session_id: `builtin-${randomUUID()}`,
      plugin_id: BUILTIN_PLUGIN_ID,
      connected_at: now,
      last_seen_at: now,
      runners: [this.runner],
      send: (message) => this.receive(message),
      close: () => undefined, // nothing to close: the runner lives as long as the host
    };
  }

  onModuleInit(): void {
    this.dispatch.register(this);
  }

  target(runnerId: string): RunnerTarget | undefined {
    return runnerId === this.runner.runner_id ? { session: this.session, runner: this.runner } : undefined;
  }

  targets(): RunnerTarget[] {
    return [{ session: this.session, runner: this.runner }];
  }

  /** Runs the agent is still working on (for tests and shutdown). */
  get activeCount(): number {
    return this.running.size;
  }

  private receive(message: RunnerCommand): void {
    if (message.run?.context) {
      this.start(message.run.context);
    } else if (message.cancel) {
      this.running.get(message.cancel.run_id)?.abort(message.cancel.reason);
    }
  }

  private start(context: RunContext): void {
    const runId = context.run_id;
    const stop = new AbortController();
    // The run's own signal also ends the agent's calls when the host ends the run for another reason.
    const run = this.grants.grant(runId);
    const signal = run ? AbortSignal.any([stop.signal, run.signal]) : stop.signal;
    this.running.set(runId, stop);
    // After the dispatching admission returns, as a plugin would get the run off its stream.
    setImmediate(() => {
      void this.run(runId, context, signal).finally(() => this.running.delete(runId));
    });
  }

  private async run(runId: string, context: AgentRunContext, signal: AbortSignal): Promise<void> {
    const warn = (msg: string) => this.logger.warn({ run_id: runId, msg });
    try {
      const roots = await skillRoots(this.config.localAgent.skillsDir, warn);
      const port = new InProcessHostPort(
        this.actions,
        runId,
        BUILTIN_PLUGIN_ID,
        signal,
        (result) => this.deliver(runId, result),
        roots,
        { max_request_bytes: this.config.hostApi.maxPayloadBytes, max_result_bytes: this.config.runs.maxResultBytes },
        (this.grants.grant(runId)?.snapshot.interactions ?? []).includes('request'),
      );
      await runLocalAgent(port, context, context.config ?? {}, {
        warn,
        traceTurn: (n, fn) => telemetry.tracing.agentTurn(runId, n, fn),
      });
    } catch (e) {
      // runLocalAgent never rejects; if it did, the run still ends with a terminal result.
      this.logger.error({ run_id: runId, msg: `local agent crashed: ${e instanceof Error ? e.stack : String(e)}` });
      this.deliver(runId, {
        type: 'run.failed',
        data: { error: 'the local agent failed', code: 'runner.error', retryable: false },
      });
    }
  }

  private deliver(runId: string, result: AgentResult): void {
    this.connections.deliver(this.session, {
      run_id: runId,
      type: result.type,
      data: result.data,
      usage: 'usage' in result ? result.usage : undefined,
      timestamp: Math.floor(Date.now() / 1000),
    });
  }
}
