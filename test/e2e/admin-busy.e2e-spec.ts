import * as path from 'node:path';
import Database from 'better-sqlite3';
import { Host, TestDatabase } from './harness';

jest.setTimeout(90_000);

const HTTP_TOOL = { name: 't', url: 'http://127.0.0.1:9/x', description: 'd', parameters: { type: 'object' } };

/**
 * Admin writes (TypeORM) when another connection holds the SQLite writer lock — an operator's
 * sqlite3 shell, a backup — like the hot writer: they wait off the event loop, and past
 * SQLITE_BUSY_WAIT_MS fail 503 `database.busy` with nothing written
 * (docs/durability.md#a-busy-writer-lock). Always SQLite, whichever database the e2e run selected.
 */
describe('admin writes under a busy SQLite writer lock', () => {
  const db = new TestDatabase();
  const file = path.join(db.dataDir, 'runner-host.sqlite');
  const host = new Host(db, { DATABASE_URL: `sqlite:${file}`, SQLITE_BUSY_WAIT_MS: '1500' });
  let other: Database.Database;

  beforeAll(async () => {
    await host.start();
    other = new Database(file);
    other.pragma('busy_timeout = 5000');
    expect((await host.api('POST', '/v1/admin/workspaces', { workspace_id: 'w1', name: 'first' })).status).toBe(201);
    const source = { source_id: 's1', kind: 'http', config: { tools: [HTTP_TOOL] } };
    expect((await host.api('POST', '/v1/admin/tools/sources', source)).status).toBe(201);
  });

  afterAll(async () => {
    if (other?.inTransaction) {
      other.exec('ROLLBACK');
    }
    other?.close();
    await host.stop();
    await db.drop();
  });

  /** Holds the writer lock while `during` runs and `holdMs` longer at least (released from a timer). */
  async function holding<T>(during: () => Promise<T>, releaseAfterMs: number | 'after'): Promise<T> {
    other.exec('BEGIN IMMEDIATE');
    const release = () => other.inTransaction && other.exec('ROLLBACK');
    const timer = releaseAfterMs === 'after' ? undefined : setTimeout(release, releaseAfterMs);
    try {
      return await during();
    } finally {
      clearTimeout(timer);
      release();
    }
  }

  it('a write that meets a lock held ~300 ms waits and succeeds after it', async () => {
    const put = await holding(() => host.api('PUT', '/v1/admin/workspaces/w1', { name: 'renamed' }), 300);
    expect(put.status).toBe(200);
    expect(put.body.name).toBe('renamed');
    const created = await holding(
      () => host.api('POST', '/v1/admin/agents', { agent_id: 'a1', runner_id: 'builtin:local-agent/default' }),
      300,
    );
    expect(created.status).toBe(201);
    expect((await host.api('GET', '/v1/admin/workspaces/w1')).body.name).toBe('renamed');
  });

  it('a lock held past the bound answers 503 database.busy, and the row is unchanged', async () => {
    const put = await holding(() => host.api('PUT', '/v1/admin/workspaces/w1', { name: 'never' }), 'after');
    expect(put.status).toBe(503);
    expect(put.body.error).toMatchObject({
      code: 'unavailable',
      retryable: true,
      details: { reason: 'database.busy' },
    });
    expect((await host.api('GET', '/v1/admin/workspaces/w1')).body.name).toBe('renamed');
  });

  it('a transaction (deleting a tool source and its tools) past the bound: 503 and nothing deleted', async () => {
    const del = await holding(() => host.api('DELETE', '/v1/admin/tools/sources/s1'), 'after');
    expect(del.status).toBe(503);
    expect(del.body.error.details.reason).toBe('database.busy');
    const source = await host.api('GET', '/v1/admin/tools/sources/s1');
    expect(source.status).toBe(200);
    expect(source.body.tools).toEqual(['t']);
    expect((await host.api('DELETE', '/v1/admin/tools/sources/s1')).status).toBe(204);
  });

  it('the host serves as before once the lock is free', async () => {
    expect((await host.api('GET', '/health/ready')).status).toBe(200);
    expect((await host.api('PUT', '/v1/admin/workspaces/w1', { name: 'again' })).body.name).toBe('again');
  });
});

/** docs/api.md, "null in admin bodies": null on an optional PUT field clears it or equals absent; on a required one, 400. */
describe('null in admin PUT bodies', () => {
  const db = new TestDatabase();
  const host = new Host(db);

  beforeAll(async () => {
    await host.start();
  });

  afterAll(async () => {
    await host.stop();
    await db.drop();
  });

  it('agent PUT: version null is no version check (not 409); runner_id null is 400 naming it', async () => {
    const agent = { agent_id: 'n1', runner_id: 'builtin:local-agent/default' };
    expect((await host.api('POST', '/v1/admin/agents', agent)).status).toBe(201);
    const put = await host.api('PUT', '/v1/admin/agents/n1', { runner_id: agent.runner_id, version: null });
    expect(put.status).toBe(200);
    expect(put.body.version).toBe(2);
    const stale = await host.api('PUT', '/v1/admin/agents/n1', { runner_id: agent.runner_id, version: 1 });
    expect(stale.status).toBe(409);
    const bad = await host.api('PUT', '/v1/admin/agents/n1', { runner_id: null });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.field).toBe('runner_id');
    expect((await host.api('GET', '/v1/admin/agents/n1')).body.version).toBe(2);
  });

  it('workspace PUT: name null leaves the name (not 400); quotas null clears every quota', async () => {
    const created = await host.api('POST', '/v1/admin/workspaces', {
      workspace_id: 'n1',
      name: 'named',
      quotas: { max_active_runs: 3 },
    });
    expect(created.status).toBe(201);
    const put = await host.api('PUT', '/v1/admin/workspaces/n1', { name: null });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ name: 'named', quotas: { max_active_runs: 3 } });
    const cleared = await host.api('PUT', '/v1/admin/workspaces/n1', { quotas: null });
    expect(cleared.body).toMatchObject({ name: 'named', quotas: {} });
    const bad = await host.api('PUT', '/v1/admin/workspaces/n1', { name: '' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.field).toBe('name');
  });
});
