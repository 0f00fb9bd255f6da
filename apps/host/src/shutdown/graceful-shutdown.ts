/**
 * The graceful shutdown of a host process (docs/deployment.md#graceful-shutdown), as a sequence
 * over its ports so that it is tested with fakes (graceful-shutdown.spec.ts):
 *
 * 1. drain: the process marks itself `draining` (host_processes) and from then on refuses new
 *    events (503 `unavailable`, details.reason `host.draining`, Retry-After) and fails
 *    /health/ready; the conversation dispatcher starts no waiting run (they stay queued for the
 *    other processes);
 * 2. grace: the runs in flight here may finish for up to SHUTDOWN_GRACE_MS (a run cannot move to
 *    another connection in protocol v1, so its runner's stream stays open meanwhile);
 * 3. the runs left end `interrupted` (terminal result, steering items re-queued, as crash
 *    recovery does);
 * 4. the runners' Connect streams are closed with UNAVAILABLE (the SDKs reconnect at once,
 *    elsewhere), and no new one is welcomed;
 * 5. the webhook worker stops and hands its outbox leases back;
 * 6. the rest of the shutdown (Nest's hooks: SSE closed, the registry row deleted, stores closed).
 *
 * A second SIGTERM or SIGINT during the drain cuts the grace short: step 3 runs at once (terminals
 * are still written), then the rest.
 */
export interface ShutdownPorts {
  registry: { drain(): Promise<void> };
  runs: {
    readonly activeRuns: number;
    stopStarting(): Promise<void>;
    idle(signal: AbortSignal): Promise<void>;
    interruptAll(why: string): Promise<number>;
  };
  runners: { closeAll(reason: string): number };
  webhooks: { handOver(): Promise<number> };
  /** The remaining shutdown (app.close()). */
  close(): Promise<void>;
  log(level: 'log' | 'warn' | 'error', msg: string): void;
}

export const INTERRUPTED_AT_SHUTDOWN = 'the host process shut down before the run finished (SHUTDOWN_GRACE_MS)';
export const RECONNECT_ELSEWHERE = 'this host process is shutting down: reconnect (to another process)';

export class GracefulShutdown {
  private readonly hurry = new AbortController();
  private running: Promise<void> | null = null;

  constructor(
    private readonly ports: ShutdownPorts,
    private readonly graceMs: number,
  ) {}

  /** True once the first signal arrived. */
  get started(): boolean {
    return this.running !== null;
  }

  /**
   * A shutdown signal: the first starts the sequence, a later one cuts the grace short. Resolves
   * when the sequence is over (the process may exit then); never rejects.
   */
  signal(name: string): Promise<void> {
    if (this.running) {
      if (!this.hurry.signal.aborted) {
        this.ports.log('warn', `${name} during the drain: the runs still active end now (interrupted)`);
        this.hurry.abort();
      }
      return this.running;
    }
    this.running = this.run(name);
    return this.running;
  }

  private async run(name: string): Promise<void> {
    const { ports } = this;
    ports.log('log', `${name}: draining (admits nothing new; runs in flight have ${this.graceMs} ms to finish)`);
    await this.step('marking the process draining', () => ports.registry.drain());
    await this.step('stopping the conversation dispatcher', () => ports.runs.stopStarting());
    const timer = setTimeout(() => this.hurry.abort(), this.graceMs);
    try {
      await this.step('waiting for the runs in flight', () => ports.runs.idle(this.hurry.signal));
    } finally {
      clearTimeout(timer);
    }
    await this.step('interrupting the runs left', async () => {
      const n = await ports.runs.interruptAll(INTERRUPTED_AT_SHUTDOWN);
      if (n > 0) {
        ports.log('warn', `${n} run(s) still active after the grace ended interrupted`);
      }
    });
    await this.step('closing the runners’ streams', () => {
      const n = ports.runners.closeAll(RECONNECT_ELSEWHERE);
      ports.log('log', `${n} runner stream(s) closed (told to reconnect elsewhere)`);
      return Promise.resolve();
    });
    await this.step('handing the webhook leases back', async () => {
      const n = await ports.webhooks.handOver();
      if (n > 0) {
        ports.log('log', `${n} webhook lease(s) handed back`);
      }
    });
    await this.step('closing the application', () => ports.close());
  }

  /** One step; a failure is logged and the sequence goes on (the process must still stop). */
  private async step(what: string, fn: () => Promise<unknown>): Promise<void> {
    try {
      await fn();
    } catch (e) {
      this.ports.log('error', `shutdown: ${what} failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
}
