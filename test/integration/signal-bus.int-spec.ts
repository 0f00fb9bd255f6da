import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import { NatsSignalBus, PostgresSignalBus, waitForTruth, type SignalBus } from '@libs/cluster';
import { postgresDatabase, type TestDatabase } from './support/databases';

jest.setTimeout(60_000);

const NATS_URL = process.env.IT_NATS_URL ?? 'nats://127.0.0.1:4222';

/** The first payload `bus` receives on `channel` (rejects after `ms`). */
function nextPayload(bus: SignalBus, channel: string, ms = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`no signal on ${channel} within ${ms} ms`));
    }, ms);
    const off = bus.subscribe(channel, (p) => {
      clearTimeout(timer);
      off();
      resolve(p);
    });
  });
}

async function eventually(what: string, ok: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > until) {
      throw new Error(`not within ${ms} ms: ${what}`);
    }
    await sleep(25);
  }
}

describe('PostgreSQL LISTEN/NOTIFY signal bus, two processes on one database', () => {
  let db: TestDatabase;
  let url: string;
  let a: PostgresSignalBus;
  let b: PostgresSignalBus;
  let admin: Client;

  beforeEach(async () => {
    db = await postgresDatabase();
    url = (db.config as { url: string }).url;
    a = new PostgresSignalBus({ url, healthCheckMs: 500 });
    b = new PostgresSignalBus({ url, healthCheckMs: 500 });
    await Promise.all([a.start(), b.start()]);
    admin = new Client({ connectionString: url });
    await admin.connect();
    await admin.query(`CREATE TABLE "truth" ("id" TEXT PRIMARY KEY)`);
  });

  afterEach(async () => {
    await Promise.all([a.close(), b.close(), admin.end()]);
    await db.dispose();
  });

  it('a signal published at one wakes the other, both ways, each once (no echo)', async () => {
    const atA: string[] = [];
    a.subscribe('steering', (p) => atA.push(p));
    // LISTEN is issued on the first subscription: wait until the server has answered it.
    const atB = nextPayload(b, 'steering');
    await Promise.all([a.listening(), b.listening()]);
    a.publish('steering', '{"run_id":"r1"}');
    await expect(atB).resolves.toBe('{"run_id":"r1"}');
    const backAtA = nextPayload(a, 'conversation');
    await a.listening();
    b.publish('conversation', '{"key":"k1"}');
    await expect(backAtA).resolves.toBe('{"key":"k1"}');
    await sleep(200);
    // A's own steering signal came back from the database once and was skipped.
    expect(atA).toEqual(['{"run_id":"r1"}']);
    expect(a.stats()).toMatchObject({ sent: 1, received: 1, connected: true });
  });

  it('holds one listener connection per process', async () => {
    a.subscribe('steering', () => undefined);
    a.subscribe('conversation', () => undefined);
    a.subscribe('cancel', () => undefined);
    await a.listening();
    const rows = await admin.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'runner-host signal bus'`,
    );
    expect(Number(rows.rows[0].n)).toBe(2);
  });

  it('listener killed (pg_terminate_backend): the wait still ends by polling, and the bus reconnects and wakes again', async () => {
    a.subscribe('steering', () => undefined);
    await a.listening();
    const pid = a.listenerPid();
    expect(pid).not.toBeNull();

    // A waits for run r1's item; B writes it and signals while A's listener is being killed.
    const found = waitForTruth({
      bus: a,
      channel: 'steering',
      check: async () =>
        (await admin.query<{ id: string }>(`SELECT "id" FROM "truth" WHERE "id" = 'r1'`)).rows[0]?.id ?? null,
      pollMs: 200,
      timeoutMs: 20_000,
    });
    await admin.query(`SELECT pg_terminate_backend($1)`, [pid]);
    await admin.query(`INSERT INTO "truth" ("id") VALUES ('r1')`);
    b.publish('steering', '{"run_id":"r1"}');
    await expect(found).resolves.toBe('r1');

    await eventually('A reconnected', () => a.stats().connected && a.stats().disconnects >= 1);
    expect(a.listenerPid()).not.toBe(pid);
    // Listening again on the new connection: a signal wakes A with no poll behind it.
    const woke = nextPayload(a, 'steering');
    await a.listening();
    b.publish('steering', '{"run_id":"r2"}');
    await expect(woke).resolves.toBe('{"run_id":"r2"}');
  });

  it('a bus that cannot reach the database starts anyway, delivers in process, and counts the drops', async () => {
    const lost = new PostgresSignalBus({ url: 'postgres://postgres@127.0.0.1:1/none', startTimeoutMs: 300 });
    try {
      await lost.start();
      const here: string[] = [];
      lost.subscribe('cancel', (p) => here.push(p));
      lost.publish('cancel', '{"run_id":"r","reason":"x"}');
      expect(here).toEqual(['{"run_id":"r","reason":"x"}']);
      expect(lost.stats()).toMatchObject({ connected: false, dropped: 1 });
    } finally {
      await lost.close();
    }
  });
});

describe('NATS signal bus, two processes', () => {
  let a: NatsSignalBus;
  let b: NatsSignalBus;

  beforeEach(async () => {
    // A subject prefix of its own: test runs sharing the NATS server keep apart.
    const subjectPrefix = `it_${randomBytes(6).toString('hex')}`;
    a = new NatsSignalBus({ servers: [NATS_URL], subjectPrefix });
    b = new NatsSignalBus({ servers: [NATS_URL], subjectPrefix });
    await Promise.all([a.start(), b.start()]);
  });

  afterEach(async () => {
    await Promise.all([a.close(), b.close()]);
  });

  it('a signal published at one wakes the other, both ways, each once (no echo)', async () => {
    expect(a.stats().connected).toBe(true);
    const atA: string[] = [];
    a.subscribe('cancel', (p) => atA.push(p));
    const atB = nextPayload(b, 'cancel');
    await Promise.all([a.listening(), b.listening()]);
    a.publish('cancel', '{"run_id":"r1","reason":"stop"}');
    await expect(atB).resolves.toBe('{"run_id":"r1","reason":"stop"}');
    const backAtA = nextPayload(a, 'steering');
    await a.listening();
    b.publish('steering', '{"run_id":"r2"}');
    await expect(backAtA).resolves.toBe('{"run_id":"r2"}');
    await sleep(200);
    expect(atA).toEqual(['{"run_id":"r1","reason":"stop"}']);
  });

  it('does not hear another deployment (another subject prefix)', async () => {
    const other = new NatsSignalBus({ servers: [NATS_URL], subjectPrefix: `it_${randomBytes(6).toString('hex')}` });
    await other.start();
    try {
      const heard: string[] = [];
      b.subscribe('steering', (p) => heard.push(p));
      await b.listening();
      other.publish('steering', '{"run_id":"elsewhere"}');
      await sleep(300);
      expect(heard).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it('a bus that cannot reach NATS starts anyway and delivers in process', async () => {
    const lost = new NatsSignalBus({ servers: ['nats://127.0.0.1:1'], subjectPrefix: 'it_lost', startTimeoutMs: 300 });
    try {
      await lost.start();
      const here: string[] = [];
      lost.subscribe('steering', (p) => here.push(p));
      lost.publish('steering', '{"run_id":"r"}');
      expect(here).toEqual(['{"run_id":"r"}']);
      expect(lost.stats()).toMatchObject({ connected: false, dropped: 1 });
    } finally {
      await lost.close();
    }
  });
});
