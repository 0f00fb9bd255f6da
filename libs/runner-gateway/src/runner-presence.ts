import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { ProcessRegistry } from '@libs/cluster';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { PluginsRepository, RunnerPresenceRepository, type RunnerHolder } from '@libs/persistence';
import { RunnerConnections, type RunnerSession } from './runner-connections';

/**
 * Runner presence (docs/scale-out.md#runner-presence): this process's RunnerConnections mirrored
 * into `runner_presence` under its `host_processes` id, so that a run admitted at another process
 * is dispatched here. Written on attach and detach (in order, one write at a time; a failed write
 * is logged and the next change or the re-registration writes the truth again); the process's
 * rows are deleted at its clean stop, and a dead process's by the sweeper that declared it dead.
 * A process declared dead while paused moves its rows to its new id.
 *
 * One connection per plugin per process stays the rule (RunnerConnections); across processes a
 * plugin may hold streams to two processes at once and both are kept: each process dispatches on
 * its own stream, and the claim of a waiting run (docs/scale-out.md#routing) lets one of them
 * take it.
 */
@Injectable()
export class RunnerPresence implements OnApplicationBootstrap, BeforeApplicationShutdown, OnModuleDestroy {
  private readonly logger = new Logger('RunnerPresence');
  private chain: Promise<void> = Promise.resolve();
  private readonly unsubscribe: Array<() => void> = [];
  private stopped = false;

  constructor(
    private readonly connections: RunnerConnections,
    private readonly repo: RunnerPresenceRepository,
    private readonly registry: ProcessRegistry,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly plugins: PluginsRepository,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.unsubscribe.push(
      this.connections.onChange((c) =>
        c.kind === 'attached' ? this.write('attach', () => this.attach(c.session)) : this.detachLater(c.session),
      ),
      this.registry.onDead(async (dead) => {
        await this.repo.removeProcess(dead.id);
      }),
      this.registry.onReplaced((oldId) =>
        this.write('re-register', async () => {
          await this.repo.removeProcess(oldId);
          for (const s of this.connections.sessions()) {
            await this.attach(s);
          }
        }),
      ),
    );
    // Sessions attached before this hook (none in practice: gRPC listens after bootstrap).
    for (const s of this.connections.sessions()) {
      this.write('attach', () => this.attach(s));
    }
    await this.repo
      .removeOrphans()
      .catch((e: unknown) => this.logger.warn({ msg: `removing stale presence rows failed: ${message(e)}` }));
  }

  onModuleDestroy(): void {
    for (const u of this.unsubscribe.splice(0)) {
      u();
    }
  }

  /** The clean stop: this process holds nothing any more (the registry row goes too). */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    await this.chain;
    await this.repo
      .removeProcess(this.registry.id)
      .catch((e: unknown) => this.logger.warn({ msg: `removing this process's presence failed: ${message(e)}` }));
  }

  /** Live processes other than this one holding a stream of the runner (longest-connected first). */
  holdersElsewhere(runnerId: string): Promise<RunnerHolder[]> {
    return this.repo.holders(runnerId, this.registry.id, this.config.cluster.leaseMs);
  }

  /** Whether another live process holds a stream of the runner. */
  async heldElsewhere(runnerId: string): Promise<boolean> {
    return (await this.holdersElsewhere(runnerId)).length > 0;
  }

  /**
   * Whether the runner pulls steering, by the manifest its plugin last registered (stored at its
   * hello): what a process that does not hold the runner's stream knows of its capabilities.
   */
  async steersElsewhere(runnerId: string): Promise<boolean> {
    const manifest = (await this.plugins.getRunner(runnerId))?.manifest;
    const capabilities = manifest?.capabilities;
    return typeof capabilities === 'object' && capabilities !== null && Reflect.get(capabilities, 'steering') === true;
  }

  /** Resolves once every presence write queued so far is done (tests, shutdown). */
  settled(): Promise<void> {
    return this.chain;
  }

  private attach(s: RunnerSession): Promise<void> {
    // Only the runners this session still serves here (a later session of another plugin may have taken one).
    const served = s.runners.filter((r) => this.connections.runner(r.runner_id)?.session === s).map((r) => r.runner_id);
    if (this.connections.session(s.plugin_id) !== s) {
      return Promise.resolve();
    }
    return this.repo.attach(this.registry.id, s, served);
  }

  private detachLater(s: RunnerSession): void {
    this.write('detach', async () => {
      await this.repo.detach(this.registry.id, s.session_id);
    });
  }

  private write(what: string, job: () => Promise<unknown>): void {
    if (this.stopped) {
      return;
    }
    this.chain = this.chain
      .then(job)
      .then(() => undefined)
      .catch((e: unknown) => this.logger.warn({ msg: `presence ${what} failed: ${message(e)}` }));
  }
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
