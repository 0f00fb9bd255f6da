import { setTimeout as sleep } from 'node:timers/promises';
import type { TestingModule } from '@nestjs/testing';
import { ProcessRegistry } from '@libs/cluster';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { HostProcessesRepository, type HostProcessEntity } from '@libs/persistence';
import { PERSISTENT_DIALECTS, storesModule, type TestDatabase } from './support/databases';

jest.setTimeout(60_000);

const LEASE_MS = 600;

const config = {
  instanceId: 'it-host',
  http: { host: '0.0.0.0', port: 3000 },
  grpc: { host: '0.0.0.0', port: 50051, maxConcurrentStreams: 1 },
  cluster: {
    heartbeatMs: 100,
    leaseMs: LEASE_MS,
    advertiseHost: 'it-host',
    signalBus: 'memory',
    nats: null,
    pollMs: 1000,
  },
} as unknown as AppConfig;

function process(id: string): { id: string; instance: string; http_address: string; grpc_address: string } {
  return { id, instance: `i-${id}`, http_address: `${id}:3000`, grpc_address: `${id}:50051` };
}

describe.each(PERSISTENT_DIALECTS)('process registry on %s', (_name, factory) => {
  let db: TestDatabase;
  let mod: TestingModule;
  let repo: HostProcessesRepository;

  beforeEach(async () => {
    db = await factory();
    mod = await storesModule(db, [{ provide: APP_CONFIG, useValue: config }, HostProcessesRepository, ProcessRegistry]);
    repo = mod.get(HostProcessesRepository);
  });

  afterEach(async () => {
    await mod.close();
    await db.dispose();
  });

  it('registers on the database clock, heartbeats, drains and removes', async () => {
    const before = Date.now();
    const row = await repo.register(process('p1'));
    expect(row).toMatchObject({ ...process('p1'), state: 'running' });
    // The database's clock, read in epoch ms (same machine here: close to this process's clock).
    expect(Math.abs(row.started_at - before)).toBeLessThan(5000);
    expect(row.heartbeat_at).toBe(row.started_at);
    await sleep(20);
    expect(await repo.heartbeat('p1')).toBe(true);
    expect((await repo.get('p1'))!.heartbeat_at).toBeGreaterThan(row.heartbeat_at);
    expect(await repo.setState('p1', 'draining')).toBe(true);
    expect((await repo.get('p1'))!.state).toBe('draining');
    // The bound ports, once the listeners are up.
    expect(await repo.setAddresses('p1', 'p1:41234', 'p1:41235')).toBe(true);
    expect(await repo.get('p1')).toMatchObject({ http_address: 'p1:41234', grpc_address: 'p1:41235' });
    await repo.remove('p1');
    expect(await repo.get('p1')).toBeNull();
    expect(await repo.heartbeat('p1')).toBe(false);
    expect(await repo.setState('p1', 'running')).toBe(false);
    expect(await repo.setAddresses('p1', 'p1:1', 'p1:2')).toBe(false);
  });

  it('the sweep query finds processes past the lease; one sweeper wins each; the swept process learns it', async () => {
    await repo.register(process('alive'));
    await repo.register(process('paused'));
    await sleep(LEASE_MS + 100);
    expect(await repo.heartbeat('alive')).toBe(true);
    expect((await repo.expired(LEASE_MS)).map((p) => p.id)).toEqual(['paused']);
    expect((await repo.live(LEASE_MS)).map((p) => p.id)).toEqual(['alive']);
    const claims = await Promise.all([repo.claimDead('paused', LEASE_MS), repo.claimDead('paused', LEASE_MS)]);
    expect(claims.filter(Boolean)).toHaveLength(1);
    // A live process is never claimed.
    expect(await repo.claimDead('alive', LEASE_MS)).toBe(false);
    // The paused process resumes: its heartbeat finds its row gone.
    expect(await repo.heartbeat('paused')).toBe(false);
  });

  it('a running registry heartbeats in the background and declares a silent process dead', async () => {
    const registry = mod.get(ProcessRegistry);
    const dead: HostProcessEntity[] = [];
    registry.onDead((p) => {
      dead.push(p);
    });
    await repo.register(process('silent'));
    await registry.onApplicationBootstrap();
    const mine = registry.id;
    const until = Date.now() + 10_000;
    while (dead.length === 0 && Date.now() < until) {
      await sleep(50);
    }
    expect(dead.map((p) => p.id)).toEqual(['silent']);
    // Its own heartbeats kept it alive meanwhile.
    expect((await repo.live(LEASE_MS)).map((p) => p.id)).toEqual([mine]);
    await registry.beforeApplicationShutdown();
    expect(await repo.get(mine)).toBeNull();
  });
});
