import type { AppConfig } from '@libs/config';
import {
  DbSessions,
  type HostProcessEntity,
  type HostProcessesRepository,
  type NewHostProcess,
} from '@libs/persistence';
import { ProcessRegistry } from './process-registry';

/** host_processes in memory, on a clock the test moves. */
class FakeRepo {
  now = 1_000_000;
  readonly rows = new Map<string, HostProcessEntity>();
  failNext = false;
  /** What happened, in order: `dead:<id>` (row deleted), `end:<id>` (its sessions ended). */
  readonly log: string[] = [];
  failTerminate = false;

  register(p: NewHostProcess): Promise<HostProcessEntity> {
    const row = { ...p, state: 'running' as const, started_at: this.now, heartbeat_at: this.now };
    this.rows.set(p.id, row);
    return Promise.resolve(row);
  }
  heartbeat(id: string): Promise<boolean> {
    if (this.failNext) {
      this.failNext = false;
      return Promise.reject(new Error('connection refused'));
    }
    const row = this.rows.get(id);
    if (row) {
      row.heartbeat_at = this.now;
    }
    return Promise.resolve(!!row);
  }
  setState(id: string, state: 'running' | 'draining'): Promise<boolean> {
    const row = this.rows.get(id);
    if (row) {
      row.state = state;
    }
    return Promise.resolve(!!row);
  }
  setAddresses(id: string, http: string, grpc: string): Promise<boolean> {
    const row = this.rows.get(id);
    if (row) {
      Object.assign(row, { http_address: http, grpc_address: grpc });
    }
    return Promise.resolve(!!row);
  }
  remove(id: string): Promise<void> {
    this.rows.delete(id);
    return Promise.resolve();
  }
  expired(leaseMs: number): Promise<HostProcessEntity[]> {
    return Promise.resolve([...this.rows.values()].filter((r) => r.heartbeat_at < this.now - leaseMs));
  }
  claimDead(id: string, leaseMs: number): Promise<boolean> {
    const row = this.rows.get(id);
    if (!row || row.heartbeat_at >= this.now - leaseMs) {
      return Promise.resolve(false);
    }
    this.rows.delete(id);
    this.log.push(`dead:${id}`);
    return Promise.resolve(true);
  }
  terminateSessions(id: string): Promise<{ ended: number; left: number }> {
    if (this.failTerminate) {
      return Promise.reject(new Error('permission denied to terminate process'));
    }
    this.log.push(`end:${id}`);
    return Promise.resolve({ ended: 1, left: 0 });
  }
}

const config = {
  instanceId: 'host-a:1',
  http: { host: '0.0.0.0', port: 3000 },
  grpc: { host: '0.0.0.0', port: 50051, maxConcurrentStreams: 1 },
  cluster: { heartbeatMs: 1000, leaseMs: 3000, advertiseHost: 'host-a', signalBus: 'memory', nats: null, pollMs: 1000 },
} as unknown as AppConfig;

function registryOn(repo: FakeRepo, sessions = new DbSessions()): ProcessRegistry {
  return new ProcessRegistry(repo as unknown as HostProcessesRepository, config, sessions);
}

describe('ProcessRegistry', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('registers at boot with its addresses, heartbeats every period, and removes its row at shutdown', async () => {
    const repo = new FakeRepo();
    const registry = registryOn(repo);
    await registry.onApplicationBootstrap();
    expect(repo.rows.get(registry.id)).toMatchObject({
      instance: 'host-a:1',
      http_address: 'host-a:3000',
      grpc_address: 'host-a:50051',
      state: 'running',
    });
    repo.now += 1000;
    await jest.advanceTimersByTimeAsync(1000);
    expect(repo.rows.get(registry.id)!.heartbeat_at).toBe(repo.now);
    await registry.beforeApplicationShutdown();
    expect(repo.rows.size).toBe(0);
  });

  it('keeps heartbeating after a failed heartbeat (the next tick retries)', async () => {
    const repo = new FakeRepo();
    const registry = registryOn(repo);
    await registry.onApplicationBootstrap();
    repo.failNext = true;
    repo.now += 1000;
    await jest.advanceTimersByTimeAsync(1000);
    expect(repo.rows.get(registry.id)!.heartbeat_at).toBe(repo.now - 1000);
    repo.now += 1000;
    await jest.advanceTimersByTimeAsync(1000);
    expect(repo.rows.get(registry.id)!.heartbeat_at).toBe(repo.now);
    await registry.beforeApplicationShutdown();
  });

  it('sweeps: declares an expired process dead once, tells the listeners, leaves live ones and itself', async () => {
    const repo = new FakeRepo();
    const a = registryOn(repo);
    const b = registryOn(repo);
    await a.onApplicationBootstrap();
    await b.onApplicationBootstrap();
    await repo.register({ id: 'fresh', instance: 'c', http_address: 'c:1', grpc_address: 'c:2' });
    const dead: string[] = [];
    a.onDead(() => {
      throw new Error('a failing listener is logged, not fatal');
    });
    a.onDead((p) => {
      dead.push(p.id);
    });
    repo.now += 3001;
    repo.rows.get('fresh')!.heartbeat_at = repo.now;
    repo.rows.get(a.id)!.heartbeat_at = repo.now;
    // b stopped heartbeating (paused): a sweeps it; a second sweep finds nothing.
    expect((await a.sweep()).map((p) => p.id)).toEqual([b.id]);
    expect(await a.sweep()).toEqual([]);
    expect(dead).toEqual([b.id]);
    expect([...repo.rows.keys()].sort()).toEqual([a.id, 'fresh'].sort());
    await a.beforeApplicationShutdown();
  });

  it("ends a dead process's database sessions after its row is deleted and before the listeners run; a failure is not fatal", async () => {
    const repo = new FakeRepo();
    const a = registryOn(repo);
    await a.onApplicationBootstrap();
    for (const id of ['b', 'c']) {
      await repo.register({ id, instance: id, http_address: `${id}:1`, grpc_address: `${id}:2` });
    }
    a.onDead((p) => {
      repo.log.push(`listener:${p.id}`);
    });
    repo.now += 3001;
    repo.rows.get(a.id)!.heartbeat_at = repo.now;
    repo.rows.get('c')!.heartbeat_at = repo.now;
    expect((await a.sweep()).map((p) => p.id)).toEqual(['b']);
    // Never a live process's (c heartbeated, a is itself): only the one whose row this sweep deleted.
    expect(repo.log).toEqual(['dead:b', 'end:b', 'listener:b']);
    repo.log.length = 0;
    repo.failTerminate = true;
    repo.now += 3001;
    repo.rows.get(a.id)!.heartbeat_at = repo.now;
    expect((await a.sweep()).map((p) => p.id)).toEqual(['c']);
    expect(repo.log).toEqual(['dead:c', 'listener:c']);
    await a.beforeApplicationShutdown();
  });

  it("registers under its sessions' id, and renames them when it registers again", async () => {
    const repo = new FakeRepo();
    const sessions = new DbSessions('first');
    const registry = registryOn(repo, sessions);
    await registry.onApplicationBootstrap();
    expect(registry.id).toBe('first');
    expect(repo.rows.has('first')).toBe(true);
    repo.rows.delete('first');
    await registry.heartbeat();
    expect(registry.id).not.toBe('first');
    expect(sessions.processId).toBe(registry.id);
    expect(sessions.name('writer')).toBe(`runner-host ${registry.id} writer`);
    await registry.beforeApplicationShutdown();
  });

  it('a process that finds its row gone registers again under a new id and says so', async () => {
    const repo = new FakeRepo();
    const registry = registryOn(repo);
    await registry.onApplicationBootstrap();
    const first = registry.id;
    const replaced: Array<[string, string]> = [];
    registry.onReplaced((o, n) => replaced.push([o, n]));
    repo.rows.delete(first);
    await registry.heartbeat();
    expect(registry.id).not.toBe(first);
    expect(replaced).toEqual([[first, registry.id]]);
    expect(repo.rows.has(registry.id)).toBe(true);
    await registry.beforeApplicationShutdown();
  });

  it('drain marks the row draining', async () => {
    const repo = new FakeRepo();
    const registry = registryOn(repo);
    await registry.onApplicationBootstrap();
    await registry.drain();
    expect(repo.rows.get(registry.id)!.state).toBe('draining');
    await registry.beforeApplicationShutdown();
  });

  it('records the bound ports once the listeners are up (PORT=0 / GRPC_PORT=0), and keeps them when it registers again', async () => {
    const repo = new FakeRepo();
    const onZero = { ...config, http: { host: '0.0.0.0', port: 0 }, grpc: { host: '0.0.0.0', port: 0 } } as AppConfig;
    const registry = new ProcessRegistry(repo as unknown as HostProcessesRepository, onZero, new DbSessions());
    await registry.onApplicationBootstrap();
    await registry.advertise({ http: 41234, grpc: 41235 });
    expect(repo.rows.get(registry.id)).toMatchObject({
      http_address: 'host-a:41234',
      grpc_address: 'host-a:41235',
    });
    repo.rows.delete(registry.id); // declared dead while paused
    await registry.heartbeat();
    expect(repo.rows.get(registry.id)).toMatchObject({
      http_address: 'host-a:41234',
      grpc_address: 'host-a:41235',
    });
    await registry.beforeApplicationShutdown();
  });

  it('refuses a port that is not a bound one, naming the listener', async () => {
    const repo = new FakeRepo();
    const registry = registryOn(repo);
    await registry.onApplicationBootstrap();
    await expect(registry.advertise({ http: 8080, grpc: 0 })).rejects.toThrow(/grpc port 0/);
    expect(repo.rows.get(registry.id)!.grpc_address).toBe('host-a:50051');
    await registry.beforeApplicationShutdown();
  });
});
