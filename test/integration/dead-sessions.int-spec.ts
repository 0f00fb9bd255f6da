import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestingModule } from '@nestjs/testing';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { ProcessRegistry } from '@libs/cluster';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import {
  DbSessions,
  FencedError,
  HostProcessesRepository,
  RunEntity,
  RunsRepository,
  sessionName,
  type AdmissionRows,
  type RunLease,
} from '@libs/persistence';
import { postgresDatabase, storesModule, type TestDatabase } from './support/databases';
import { interruptedEnd as interrupted, logOf, newEvent, newResult, newRun, T0 } from './support/run-rows';

jest.setTimeout(60_000);

/**
 * A process declared dead while paused in a transaction (docs/scale-out.md#sessions-of-a-paused-process),
 * on PostgreSQL: its sweeper ends its sessions (by the process id their application_name names)
 * before the takeover, so the run row its open transaction locked is taken at once instead of
 * being skipped until it resumes; no live process's session is touched; the dead process's
 * writer makes its connection again and its late writes are refused; and a session left idle in
 * a transaction is ended by the server after the timeout the host sets when the sweeper cannot.
 */

const LEASE_MS = 600;

const config = {
  instanceId: 'it-sweeper',
  http: { host: '0.0.0.0', port: 3000 },
  grpc: { host: '0.0.0.0', port: 50051, maxConcurrentStreams: 1 },
  cluster: { heartbeatMs: 100, leaseMs: LEASE_MS, advertiseHost: 'it', signalBus: 'memory', nats: null, pollMs: 1000 },
} as unknown as AppConfig;

/** A run started at admission, claimed by `owner` (attempt 1), in a conversation of its own. */
function admitRows(owner: string): AdmissionRows {
  const conversation = `conv-${randomUUID()}`;
  const run = newRun({ owner_process_id: owner, conversation_id: conversation });
  const event = { ...newEvent({ run_id: run.run_id, conversation_id: conversation }), event_id: run.event_id };
  return { event, readmit: false, log: logOf(event), user: null, run, terminal: null, conversation: null };
}

/** A run admitted by `repo` and started, claimed by `owner`: its id and lease. */
async function admit(repo: RunsRepository, owner: string): Promise<{ runId: string; lease: RunLease }> {
  const o = await repo.admit(admitRows(owner));
  if (!o.admitted || o.disposition !== 'started') {
    throw new Error(`expected a start, got ${JSON.stringify(o)}`);
  }
  return { runId: o.run_id!, lease: { run_id: o.run_id!, attempt: o.attempt!, owner_process_id: owner } };
}

describe('sessions of a dead process on postgres', () => {
  let db: TestDatabase;
  let url: string;
  /** The sweeper (process A): its registry declares B dead. */
  let a: TestingModule;
  let registry: ProcessRegistry;
  let processes: HostProcessesRepository;
  let runs: RunsRepository;
  let ds: DataSource;
  const opened: Client[] = [];

  beforeAll(async () => {
    db = await postgresDatabase();
    url = (db.config as { url: string }).url;
    a = await storesModule(db, [
      { provide: APP_CONFIG, useValue: config },
      HostProcessesRepository,
      RunsRepository,
      ProcessRegistry,
    ]);
    registry = a.get(ProcessRegistry);
    processes = a.get(HostProcessesRepository);
    runs = a.get(RunsRepository);
    ds = a.get(DataSource);
  });

  beforeEach(async () => {
    await ds.query('DELETE FROM "host_processes"');
  });

  afterAll(async () => {
    for (const c of opened) {
      await c.end().catch(() => undefined);
    }
    await a?.close();
    await db?.dispose();
  });

  /** A connection as the host opens one for `sessions` (name, timeout); its errors are kept, never thrown. */
  async function connectionOf(sessions: DbSessions): Promise<{ client: Client; errors: Error[] }> {
    const client = new Client({ connectionString: url, ...sessions.options('writer') });
    const errors: Error[] = [];
    client.on('error', (e) => errors.push(e));
    await client.connect();
    opened.push(client);
    return { client, errors };
  }

  /** Opens a transaction on `client` that locks the run's row, as a fence does, and leaves it open. */
  async function lockRun(client: Client, runId: string): Promise<void> {
    await client.query('BEGIN');
    await client.query(`UPDATE "runs" SET "last_write_at" = 1 WHERE "run_id" = $1`, [runId]);
  }

  async function registerExpired(id: string): Promise<void> {
    await processes.register({ id, instance: id, http_address: 'h:1', grpc_address: 'h:2' });
    while (!(await processes.expired(LEASE_MS)).some((p) => p.id === id)) {
      await sleep(50);
    }
  }

  const started = (owner: string) => admit(runs, owner);

  const takeOver = (runId: string, owner: string) =>
    runs.takeOver({
      orphan: { run_id: runId, owner_process_id: owner, attempt: 1 },
      terminal: newResult(runId, 0, { type: 'run.failed', source: 'host', data: { code: 'host.interrupted' } }),
      end: interrupted,
      outbox: [],
      at: T0 + 100,
    });

  const sessionsNamed = async (id: string, where = ''): Promise<string[]> =>
    (
      await ds.query<{ name: string }[]>(
        `SELECT "application_name" AS "name" FROM pg_stat_activity
          WHERE "datname" = current_database() AND split_part("application_name", ' ', 2) = $1 ${where} ORDER BY 1`,
        [id],
      )
    ).map((r) => r.name);

  it("the sweep ends the dead process's sessions, so its run locked in an open transaction is taken over at once; a live one's is untouched", async () => {
    const dead = randomUUID();
    const live = randomUUID();
    const { runId } = await started(dead);
    const other = await started(live);
    await processes.register({ id: live, instance: live, http_address: 'h:1', grpc_address: 'h:2' });
    // B was paused in a writer transaction that fenced its run: the row stays locked.
    const b = await connectionOf(new DbSessions(dead));
    await lockRun(b.client, runId);
    // A live process C in a transaction too (its run's row locked): never touched.
    const c = await connectionOf(new DbSessions(live));
    await lockRun(c.client, other.runId);
    await registerExpired(dead);
    await processes.heartbeat(live);

    expect((await registry.sweep()).map((p) => p.id)).toEqual([dead]);
    // Its session is gone and its lock with it: the takeover (FOR UPDATE SKIP LOCKED) takes the
    // run on its first try; before, it skipped the row until B resumed.
    expect(await takeOver(runId, dead)).toMatchObject({ taken: true, kind: 'interrupted', sequence: 1 });
    expect(await sessionsNamed(dead)).toEqual([]);
    expect(await ds.getRepository(RunEntity).findOneByOrFail({ run_id: runId })).toMatchObject({
      status: 'interrupted',
      attempt: 2,
      owner_process_id: null,
    });
    // B learns it at its next use of the connection: terminated by the server (admin_shutdown).
    await expect(b.client.query('SELECT 1')).rejects.toThrow();
    expect(b.errors.map((e) => (e as Error & { code?: string }).code)).toContain('57P01');
    // C's session and transaction are as they were.
    expect(await sessionsNamed(live)).toEqual([sessionName(live, 'writer')]);
    await expect(c.client.query('SELECT 1 AS "one"')).resolves.toMatchObject({ rows: [{ one: 1 }] });
    await c.client.query('COMMIT');
    expect(c.errors).toEqual([]);
  });

  it("the dead process's own writer and pool, in transactions when it is declared dead: ended, connected again, its late writes refused; its idle sessions left alone", async () => {
    const dead = randomUUID();
    const bSessions = new DbSessions(dead, 10_000);
    const b = await storesModule(db, [HostProcessesRepository, RunsRepository], bSessions);
    const holder = new Client({ connectionString: url });
    await holder.connect();
    opened.push(holder);
    try {
      const bRuns = b.get(RunsRepository);
      const bProcesses = b.get(HostProcessesRepository);
      const bDs = b.get(DataSource);
      await bProcesses.register({ id: dead, instance: 'b', http_address: 'h:1', grpc_address: 'h:2' });
      const { runId, lease } = await admit(bRuns, dead);
      await bRuns.insertResult(newResult(runId, 1), null, [], lease);
      // B's pool: an admin transaction open (as a paused TypeORM transaction would be).
      const tx = bDs.createQueryRunner();
      await tx.connect();
      await tx.startTransaction();
      await tx.query('SELECT pg_advisory_xact_lock(4242)');
      // B's writer mid-group: its fence waits for the run row another session holds.
      await lockRun(holder, runId);
      const late = bRuns.insertResult(newResult(runId, 2), null, [], lease).then(
        () => 'written',
        (e: unknown) => e,
      );
      while (!(await sessionsNamed(dead, `AND "state" = 'active'`)).includes(sessionName(dead, 'writer'))) {
        await sleep(20);
      }
      while (!(await processes.expired(LEASE_MS)).some((p) => p.id === dead)) {
        await sleep(50);
      }

      expect((await registry.sweep()).map((p) => p.id)).toEqual([dead]);
      // Its sessions in a transaction are gone; the idle ones (the reader pool's, say) hold nothing and stay.
      expect(await sessionsNamed(dead, `AND "state" <> 'idle'`)).toEqual([]);
      // The group in flight failed with its connection (nothing of it written).
      expect(await late).toBeInstanceOf(Error);
      await expect(tx.query('SELECT 1')).rejects.toThrow();
      await tx.release().catch(() => undefined);
      await holder.query('ROLLBACK');
      expect(await takeOver(runId, dead)).toMatchObject({ taken: true, sequence: 2 });

      // B goes on: its writer makes its connection again and its late write is fenced (not a
      // connection error); its repositories read through the pool again; nothing was thrown
      // unhandled (an 'error' event of pg without a listener would fail this file).
      await expect(bRuns.insertResult(newResult(runId, 2), null, [], lease)).rejects.toBeInstanceOf(FencedError);
      expect(await bProcesses.heartbeat(dead)).toBe(false);
      expect((await bRuns.get(runId))?.status).toBe('interrupted');
      // Registered again under a new id (ProcessRegistry.heartbeat does this): its connections
      // are renamed at their next use, so a later death ends them too.
      const again = randomUUID();
      bSessions.rename(again);
      await bProcesses.register({ id: again, instance: 'b', http_address: 'h:1', grpc_address: 'h:2' });
      const next = await admit(bRuns, again);
      await bRuns.get(next.runId);
      expect(await sessionsNamed(again)).toEqual(
        expect.arrayContaining([sessionName(again, 'writer'), sessionName(again, 'pool')]),
      );
    } finally {
      await b.close();
    }
  });

  it('a session left idle in a transaction is ended by the server after the timeout the host gives its connections (the net when the sweeper cannot end it)', async () => {
    const dead = randomUUID();
    const { runId } = await started(dead);
    const b = await connectionOf(new DbSessions(dead, 300));
    expect((await b.client.query('SHOW idle_in_transaction_session_timeout')).rows).toEqual([
      { idle_in_transaction_session_timeout: '300ms' },
    ]);
    await lockRun(b.client, runId);
    // No terminate: the server ends the session by itself (idle_in_transaction_session_timeout).
    while (b.errors.length === 0) {
      await sleep(50);
    }
    expect((b.errors[0] as Error & { code?: string }).code).toBe('25P03');
    await registerExpired(dead);
    await processes.claimDead(dead, LEASE_MS);
    expect(await takeOver(runId, dead)).toMatchObject({ taken: true, kind: 'interrupted' });
  });
});
