import { randomUUID } from 'node:crypto';
import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { DbSessions, HostProcessesRepository, type HostProcessEntity } from '@libs/persistence';

/** Told about a process another one declared dead (the hook run leases attach to: docs/scale-out.md#leases-and-fencing). */
export type DeadProcessListener = (dead: HostProcessEntity) => Promise<void> | void;

/**
 * This process's row in host_processes (docs/scale-out.md#process-registry): registered at boot
 * under a fresh id, heartbeated every PROCESS_HEARTBEAT_MS in one statement, marked draining
 * when it stops admitting, deleted at a clean shutdown. Every process also sweeps: a process
 * whose heartbeat is older than PROCESS_LEASE_MS is declared dead by deleting its row (one
 * sweeper wins), and the listeners are told.
 *
 * The addresses carry the ports the process is bound on: the configured PORT / GRPC_PORT at
 * registration, replaced by the bound ones once the listeners are up (`advertise`, from main.ts),
 * so a process started on port 0 advertises the port it got.
 *
 * A process that finds its own row gone was declared dead while it was paused or cut off; it
 * registers again under a new id (its old identity stays dead: whatever it owned was or will be
 * handed over by the sweeper's listeners) and tells its `onReplaced` listeners.
 *
 * The id is the one this process's database sessions name (`DbSessions`): the sweeper that
 * declares a process dead ends that process's sessions before it tells its listeners, so a
 * transaction it was paused in holds no lock the takeover needs
 * (docs/scale-out.md#sessions-of-a-paused-process).
 */
@Injectable()
export class ProcessRegistry implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('ProcessRegistry');
  private registered = false;
  private heartbeatTimer?: NodeJS.Timeout;
  private sweepTimer?: NodeJS.Timeout;
  private readonly running = new Map<'heartbeat' | 'sweep', Promise<void>>();
  private readonly deadListeners = new Set<DeadProcessListener>();
  private readonly replacedListeners = new Set<(oldId: string, newId: string) => void>();
  /** Set by drain(): this process admits nothing new (docs/deployment.md#graceful-shutdown). */
  private drainingNow = false;
  /** The bound ports once `advertise` told them; until then the configured ones. */
  private bound: { http: number; grpc: number } | null = null;

  constructor(
    private readonly repo: HostProcessesRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly sessions: DbSessions,
  ) {}

  /** This process's id in host_processes (changes only when it was declared dead and registered again). */
  get id(): string {
    return this.sessions.processId;
  }

  private get currentId(): string {
    return this.sessions.processId;
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.register();
    const { heartbeatMs, leaseMs } = this.config.cluster;
    this.heartbeatTimer = setInterval(() => void this.tick('heartbeat', () => this.heartbeat()), heartbeatMs);
    this.heartbeatTimer.unref();
    // Sweeps at half the lease, started at a random offset so that processes do not sweep in step.
    const sweepMs = Math.max(100, Math.floor(leaseMs / 2));
    const first = setTimeout(
      () => {
        void this.tick('sweep', () => this.sweep());
        this.sweepTimer = setInterval(() => void this.tick('sweep', () => this.sweep()), sweepMs);
        this.sweepTimer.unref();
      },
      Math.floor(Math.random() * sweepMs),
    );
    first.unref();
    this.sweepTimer = first;
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.heartbeatTimer);
    clearInterval(this.sweepTimer);
    clearTimeout(this.sweepTimer);
    await Promise.all(this.running.values());
    if (this.registered) {
      this.registered = false;
      await this.repo
        .remove(this.currentId)
        .catch((e: unknown) =>
          this.logger.warn({ msg: `could not remove this process's row (the sweep will): ${message(e)}` }),
        );
    }
  }

  /** Called for each process this one declares dead. */
  onDead(listener: DeadProcessListener): () => void {
    this.deadListeners.add(listener);
    return () => this.deadListeners.delete(listener);
  }

  /** Called when this process learns it was declared dead and registers again under a new id. */
  onReplaced(listener: (oldId: string, newId: string) => void): () => void {
    this.replacedListeners.add(listener);
    return () => this.replacedListeners.delete(listener);
  }

  /**
   * The ports the listeners are bound on (after listen: PORT=0 / GRPC_PORT=0 become real ports):
   * recorded in this process's row now and in every later registration.
   */
  async advertise(ports: { http: number; grpc: number }): Promise<void> {
    for (const [field, port] of [
      ['http', ports.http],
      ['grpc', ports.grpc],
    ] as const) {
      if (!Number.isInteger(port) || port < 1 || port > 65535) {
        throw new Error(`advertise: ${field} port ${port} is not a bound port (1..65535)`);
      }
    }
    this.bound = { ...ports };
    if (!this.registered) {
      return;
    }
    const { http, grpc } = this.addresses();
    if (!(await this.repo.setAddresses(this.currentId, http, grpc))) {
      // The heartbeat registers again under a new id, with these addresses.
      this.logger.warn({ msg: 'recording the bound addresses: this process was already declared dead' });
    }
  }

  /** True once drain() was called: the process refuses new events and reports not ready. */
  get draining(): boolean {
    return this.drainingNow;
  }

  /**
   * Stops admitting: `draining` is true at once in this process (admission and readiness read it),
   * and other processes see `draining` in its row (and route new work elsewhere).
   */
  async drain(): Promise<void> {
    this.drainingNow = true;
    if (!(await this.repo.setState(this.currentId, 'draining'))) {
      this.logger.warn({ msg: 'marking draining: this process was already declared dead' });
    }
  }

  /**
   * One heartbeat; when the row is gone, the `onReplaced` listeners fence this process first (its
   * runs dropped without writing: docs/scale-out.md#fenced-writes), then it registers again under
   * a new id.
   */
  async heartbeat(): Promise<void> {
    if (await this.repo.heartbeat(this.currentId)) {
      return;
    }
    const oldId = this.currentId;
    const newId = randomUUID();
    this.logger.error({
      msg: `this process (${oldId}) was declared dead by another (heartbeat older than the lease); fencing itself, then registering again as ${newId}`,
    });
    for (const listener of this.replacedListeners) {
      try {
        listener(oldId, newId);
      } catch (e) {
        this.logger.error({ msg: `replaced listener failed: ${message(e)}` });
      }
    }
    this.sessions.rename(newId);
    await this.register();
  }

  /**
   * One sweep: declares every expired process dead (one sweeper wins each), ends its database
   * sessions (only after its row is deleted, by the sweeper that deleted it), and tells the listeners.
   */
  async sweep(): Promise<HostProcessEntity[]> {
    const claimed: HostProcessEntity[] = [];
    for (const p of await this.repo.expired(this.config.cluster.leaseMs)) {
      if (p.id === this.currentId || !(await this.repo.claimDead(p.id, this.config.cluster.leaseMs))) {
        continue;
      }
      claimed.push(p);
      this.logger.warn({
        msg: `process ${p.instance} (${p.id}) declared dead: last heartbeat ${new Date(p.heartbeat_at).toISOString()}`,
      });
      await this.endSessions(p);
      for (const listener of this.deadListeners) {
        try {
          await listener(p);
        } catch (e) {
          this.logger.error({ msg: `dead-process listener failed for ${p.id}: ${message(e)}` });
        }
      }
    }
    return claimed;
  }

  /**
   * The dead process's sessions are ended, so that a transaction it was paused in (its run rows
   * locked) does not hold off the takeover until it resumes. A failure (a role that may not
   * signal them) is logged: the server's idle-in-transaction timeout ends such a session anyway.
   */
  private async endSessions(p: HostProcessEntity): Promise<void> {
    try {
      const { ended, left } = await this.repo.terminateSessions(p.id);
      if (ended > 0 || left > 0) {
        this.logger.warn({
          msg: `process ${p.instance} (${p.id}): ${ended} database session(s) ended${left > 0 ? `, ${left} not gone within the wait` : ''}`,
        });
      }
    } catch (e) {
      this.logger.error({
        msg: `process ${p.instance} (${p.id}): its database sessions could not be ended (their idle-in-transaction timeout will): ${message(e)}`,
      });
    }
  }

  private async register(): Promise<void> {
    const { http, grpc } = this.addresses();
    await this.repo.register({
      id: this.currentId,
      instance: this.config.instanceId,
      http_address: http,
      grpc_address: grpc,
    });
    this.registered = true;
  }

  private addresses(): { http: string; grpc: string } {
    const { advertiseHost } = this.config.cluster;
    const ports = this.bound ?? { http: this.config.http.port, grpc: this.config.grpc.port };
    return { http: `${advertiseHost}:${ports.http}`, grpc: `${advertiseHost}:${ports.grpc}` };
  }

  /**
   * One run of each job at a time: a slow database never stacks heartbeats or sweeps, and a long
   * sweep never delays a heartbeat (each has its own slot).
   */
  private async tick(name: 'heartbeat' | 'sweep', job: () => Promise<unknown>): Promise<void> {
    if (this.running.has(name)) {
      return;
    }
    const run = job()
      .then(() => undefined)
      .catch((e: unknown) => this.logger.warn({ msg: `${name} failed (the next tick retries): ${message(e)}` }))
      .finally(() => this.running.delete(name));
    this.running.set(name, run);
    await run;
  }
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
