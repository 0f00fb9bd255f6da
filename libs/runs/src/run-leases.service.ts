import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { ProcessRegistry } from '@libs/cluster';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { HostProcessesRepository, RunsRepository, type RunLease } from '@libs/persistence';
import { RunnerConnections } from '@libs/runner-gateway';
import { RunLifecycleService } from './run-lifecycle.service';

/** Orphaned runs taken per read of the sweep (each is taken in its own commit). */
const SWEEP_BATCH = 100;

/**
 * Run leases (docs/scale-out.md#leases-and-fencing): the identity a start claims a run with, the
 * dead-owner sweep (when the registry declares a process dead, at every sweep tick behind it,
 * and at boot as crash recovery), and the self-fence of a process that finds itself declared
 * dead. The run's lease is its owner's `host_processes` row: renewed in bulk by the heartbeat.
 */
@Injectable()
export class RunLeases implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('RunLeases');
  private timer?: NodeJS.Timeout;
  private sweeping: Promise<number> | null = null;
  private again = false;
  private readonly unsubscribe: (() => void)[] = [];
  private stopped = false;

  constructor(
    private readonly registry: ProcessRegistry,
    private readonly runs: RunsRepository,
    private readonly processes: HostProcessesRepository,
    private readonly lifecycle: RunLifecycleService,
    private readonly connections: RunnerConnections,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** The owner a start claims its run with: this process's registry id. */
  get owner(): string {
    return this.registry.id;
  }

  /** The lease of a run this process claimed (`attempt` from its start unit); null without a claim. */
  static leaseOf(runId: string, owner: string | null | undefined, attempt: number | null | undefined): RunLease | null {
    return owner && attempt ? { run_id: runId, attempt, owner_process_id: owner } : null;
  }

  onApplicationBootstrap(): void {
    this.unsubscribe.push(
      this.registry.onDead(async () => {
        await this.sweep();
      }),
      this.registry.onReplaced((oldId) => this.selfFence(oldId)),
    );
    // Behind the onDead signal (a sweeper that died between declaring a process dead and taking
    // its runs): every half lease, like the registry's own sweep.
    const every = Math.max(100, Math.floor(this.config.cluster.leaseMs / 2));
    this.timer = setInterval(() => void this.sweep().catch(() => undefined), every);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.unsubscribe.splice(0).forEach((u) => u());
  }

  /**
   * Crash recovery at boot (docs/durability.md#crash-recovery): on SQLite (one process per file)
   * every other registered process is a previous one, dead; its runs and any unowned running run
   * are taken. On PostgreSQL only runs of processes declared dead are taken — never a live
   * process's — and unowned running runs only when this process is alone on the database.
   */
  async recover(): Promise<number> {
    let unowned: boolean;
    if (this.config.database.type === 'postgres') {
      unowned = (await this.processes.count()) <= 1;
    } else {
      const gone = await this.processes.removeOthers(this.registry.id);
      if (gone > 0) {
        this.logger.warn({ msg: `${gone} previous process row(s) of this database removed at boot` });
      }
      unowned = true;
    }
    return this.sweepNow(unowned);
  }

  /**
   * One pass of the dead-owner sweep: every orphaned run, in batches (several sweepers share them:
   * a takeover skips a row another holds). Coalesced: a sweep asked for while one runs runs once more after it.
   */
  sweep(): Promise<number> {
    if (this.sweeping) {
      this.again = true;
      return this.sweeping;
    }
    const run = (async () => {
      let n = 0;
      do {
        this.again = false;
        n += await this.sweepNow(false);
      } while (this.again && !this.stopped);
      return n;
    })().finally(() => (this.sweeping = null));
    this.sweeping = run;
    return run;
  }

  private async sweepNow(withUnowned: boolean): Promise<number> {
    let taken = 0;
    const skipped = new Set<string>();
    for (;;) {
      const found = (await this.runs.orphans(SWEEP_BATCH, withUnowned)).filter((o) => !skipped.has(o.run_id));
      if (found.length === 0 || this.stopped) {
        return taken;
      }
      for (const orphan of found) {
        try {
          if (await this.lifecycle.takeOver(orphan)) {
            taken++;
          } else {
            skipped.add(orphan.run_id);
          }
        } catch (e) {
          skipped.add(orphan.run_id);
          this.logger.error({
            run_id: orphan.run_id,
            msg: `takeover failed (the next sweep retries): ${e instanceof Error ? e.message : String(e)}`,
          });
        }
      }
    }
  }

  /**
   * This process was declared dead (its heartbeat found its row gone): it fences itself before it
   * registers again — every run active here is dropped without writing (their fences would fail
   * anyway: another process ends them), and every runner's Connect stream is closed, so that
   * plugins reconnect (to this process under its new id, or another).
   */
  private selfFence(oldId: string): void {
    const dropped = this.lifecycle.dropAll();
    const sessions = this.connections.sessions();
    for (const session of sessions) {
      try {
        session.close('the host process was declared dead; reconnect');
      } catch {
        // Already closing.
      }
    }
    this.logger.error({
      msg: `self-fence of ${oldId}: ${dropped} run(s) dropped without writing, ${sessions.length} runner stream(s) closed`,
    });
  }
}
