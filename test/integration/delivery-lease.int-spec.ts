/**
 * The webhook outbox lease (docs/scale-out.md#webhook-outbox-lease) on both dialects: two webhook
 * workers with two process ids on one database (on PostgreSQL each with its own store and
 * connections, as two processes) never send one run's ops at the same time, keep the order per
 * run, and a worker whose process row is gone loses its runs to the other, which resumes at the
 * first op not recorded as sent.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestingModule } from '@nestjs/testing';
import type { AppConfig } from '@libs/config';
import { WebhookWorker } from '@libs/delivery';
import {
  HostProcessesRepository,
  HotStore,
  claimSenderUnit,
  outboxOfRunUnit,
  outboxUnit,
  senderOfUnit,
  type NewOutboxRow,
} from '@libs/persistence';
import { PERSISTENT_DIALECTS, storesModule, type TestDatabase } from './support/databases';

jest.setTimeout(60_000);

const SECRET_ENV = 'RUNNERHOST_SECRET_LEASE_IT';

function config(): AppConfig {
  return {
    webhooks: {
      timeoutMs: 20_000,
      retryBaseMs: 50,
      retryMaxMs: 200,
      maxAttempts: 15,
      concurrency: 8,
      endpointConcurrency: 8,
      breakerFailures: 1000,
      breakerOpenMs: 1000,
      allowPrivate: true,
    },
    secret: (name: string) => (name === SECRET_ENV ? 'lease-secret' : null),
    // Two processes on one database, also on the SQLite file: not the SQLite boot take-back of a
    // single host (the worker frees other processes' leases at boot only on SQLite).
    database: { type: 'postgres', url: 'postgres://unused' },
  } as unknown as AppConfig;
}

interface Hit {
  run_id: string;
  sequence: number;
  key: string;
}

/** A local receiver: records every request; tracks requests in flight per run; can hold chosen ones. */
class Receiver {
  readonly hits: Hit[] = [];
  readonly inflight = new Map<string, number>();
  maxInflightPerRun = 0;
  /** Requests to hold (`run:sequence`, first arrival only) until released. */
  readonly hold = new Set<string>();
  readonly held = new Map<string, () => void>();
  private server!: http.Server;
  url = '';

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const op = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { run_id: string; sequence: number };
        const key = String(req.headers['idempotency-key']);
        this.hits.push({ run_id: op.run_id, sequence: op.sequence, key });
        const n = (this.inflight.get(op.run_id) ?? 0) + 1;
        this.inflight.set(op.run_id, n);
        this.maxInflightPerRun = Math.max(this.maxInflightPerRun, n);
        const id = `${op.run_id}:${op.sequence}`;
        let answered = false;
        const answer = () => {
          if (answered) {
            return;
          }
          answered = true;
          if (this.held.get(id) === answer) {
            this.held.delete(id);
          }
          this.inflight.set(op.run_id, (this.inflight.get(op.run_id) ?? 1) - 1);
          if (!res.destroyed) {
            res.writeHead(200).end('ok');
          }
        };
        if (this.hold.delete(id)) {
          this.held.set(id, answer);
        } else {
          // A little later, from another turn of the loop: gives a second sender time to overlap.
          setTimeout(answer, 5 + (op.sequence % 3) * 5);
        }
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }

  sequencesOf(runId: string): number[] {
    return this.hits.filter((h) => h.run_id === runId).map((h) => h.sequence);
  }

  async stop(): Promise<void> {
    for (const answer of [...this.held.values()]) {
      answer();
    }
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

function op(url: string, runId: string, sequence: number): NewOutboxRow {
  return {
    delivery_id: `${runId}-d${sequence}`,
    run_id: runId,
    agent_id: 'agent',
    sequence,
    op: 'message.send',
    idempotency_key: `${runId}:${sequence}`,
    reply_target: null,
    target_delivery_id: null,
    result_sequence: sequence,
    payload: { text: `part ${sequence}` },
    created_at: Date.now(),
    webhook_url: url,
    webhook_secret_env: SECRET_ENV,
    webhook_state: 'pending',
  };
}

async function until<T>(what: string, fn: () => Promise<T | null | undefined | false>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const v = await fn();
    if (v) {
      return v;
    }
    if (Date.now() > deadline) {
      throw new Error(`gave up waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

const registration = (id: string) => ({ id, instance: id, http_address: `${id}:1`, grpc_address: `${id}:2` });

describe.each(PERSISTENT_DIALECTS)('webhook outbox lease on %s', (name, factory) => {
  let db: TestDatabase;
  let modA: TestingModule;
  let modB: TestingModule;
  let hotA: HotStore;
  let hotB: HotStore;
  let receiver: Receiver;
  const workers: WebhookWorker[] = [];

  const worker = (hot: HotStore, id: string, cfg: AppConfig = config()): WebhookWorker => {
    const w = new WebhookWorker(hot, cfg, { id });
    workers.push(w);
    void w.onApplicationBootstrap();
    return w;
  };

  const states = async (runId: string) =>
    (await hotA.read(outboxOfRunUnit(runId, 100))).map((o) => `${o.sequence}:${o.webhook_state}`);

  beforeEach(async () => {
    db = await factory();
    modA = await storesModule(db, [HostProcessesRepository]);
    hotA = modA.get(HotStore);
    // Two processes on PostgreSQL: their own store, writer and pool. SQLite has one process per
    // file (enforced at boot): both workers share its one writer, the SQL is the same.
    modB = name === 'postgres' ? await storesModule(db, [HostProcessesRepository]) : modA;
    hotB = modB.get(HotStore);
    const repo = modA.get(HostProcessesRepository);
    await repo.register(registration('p1'));
    await repo.register(registration('p2'));
    receiver = new Receiver();
    await receiver.start();
  });

  afterEach(async () => {
    for (const w of workers.splice(0)) {
      w.onModuleDestroy();
    }
    await receiver.stop();
    if (modB !== modA) {
      await modB.close();
    }
    await modA.close();
    await db.dispose();
  });

  it('two workers never send one run concurrently, and keep each run in order', async () => {
    const runs = Array.from({ length: 12 }, (_, i) => `run-${i}`);
    const a = worker(hotA, 'p1');
    const b = worker(hotB, 'p2');
    // Two waves per run: between them a run's lease may pass from one worker to the other.
    for (const [from, to] of [
      [1, 3],
      [4, 6],
    ]) {
      for (const runId of runs) {
        const ops: NewOutboxRow[] = [];
        for (let s = from; s <= to; s++) {
          ops.push(op(receiver.url, runId, s));
        }
        await hotA.write(() => outboxUnit(ops));
      }
      a.wake();
      b.wake();
      await until('the wave delivered', async () =>
        (await Promise.all(runs.map(states))).every((s) => s.slice(0, to).every((x) => x.endsWith(':delivered'))),
      );
    }
    for (const runId of runs) {
      expect(receiver.sequencesOf(runId)).toEqual([1, 2, 3, 4, 5, 6]); // in order, each once
      expect(await hotA.read(senderOfUnit(runId))).toBeNull(); // nothing pending: lease released
    }
    expect(receiver.maxInflightPerRun).toBe(1);
    expect(receiver.hits.every((h) => h.key === `${h.run_id}:${h.sequence}`)).toBe(true);
  });

  it('a worker whose process row is gone loses its runs to the other, from the first unsent op', async () => {
    receiver.hold.add('r:2');
    const a = worker(hotA, 'p1');
    await hotA.write(() => outboxUnit([1, 2, 3].map((s) => op(receiver.url, 'r', s))));
    a.wake();
    await until('op 2 sent by p1', () => Promise.resolve(receiver.held.has('r:2')));
    expect(await hotA.read(senderOfUnit('r'))).toBe('p1');

    // p1 is alive: p2 can neither claim the run nor see it in its queue.
    expect(await hotB.write(() => claimSenderUnit('r', 'p2', Date.now()))).toBeNull();
    const b = worker(hotB, 'p2');
    b.wake();

    // p1 is declared dead (its row deleted, as the registry's sweep does): p2 takes over at op 2.
    await modA.get(HostProcessesRepository).remove('p1');
    b.wake();
    await until('p2 delivered the run', async () => (await states('r')).every((s) => s.endsWith(':delivered')));
    // Op 2 was sent twice (p1's request never answered; p2 sends it again, same Idempotency-Key).
    expect(receiver.sequencesOf('r')).toEqual([1, 2, 2, 3]);
    expect(new Set(receiver.hits.filter((h) => h.sequence === 2).map((h) => h.key))).toEqual(new Set(['r:2']));

    // p1's late answer: its state write is fenced off; nothing changes, p1 sends nothing more.
    const late = receiver.held.get('r:2')!;
    late();
    a.wake();
    await until('p1 dropped the run', () => Promise.resolve(receiver.inflight.get('r') === 0));
    const after = await hotA.read(outboxOfRunUnit('r', 10));
    expect(after.map((o) => [o.sequence, o.webhook_state, o.attempts])).toEqual([
      [1, 'delivered', 1],
      [2, 'delivered', 1],
      [3, 'delivered', 1],
    ]);
    expect(await hotA.read(senderOfUnit('r'))).toBeNull();
    // A dead process claims nothing.
    await hotA.write(() => outboxUnit([op(receiver.url, 'r', 4)]));
    expect(await hotA.write(() => claimSenderUnit('r', 'p1', Date.now()))).toBeNull();
    expect((await hotA.write(() => claimSenderUnit('r', 'p2', Date.now())))?.sequence).toBe(4);
  });

  it('handOver gives the leases back: the other worker takes the run at once', async () => {
    receiver.hold.add('h:1');
    const a = worker(hotA, 'p1');
    await hotA.write(() => outboxUnit([1, 2].map((s) => op(receiver.url, 'h', s))));
    a.wake();
    await until('op 1 sent by p1', () => Promise.resolve(receiver.held.has('h:1')));
    expect(await a.handOver()).toBe(1); // the request in flight is aborted, the lease handed back
    expect(await hotA.read(senderOfUnit('h'))).toBeNull();
    expect((await states('h'))[0]).toBe('1:pending'); // the aborted attempt is not recorded
    const b = worker(hotB, 'p2');
    b.wake();
    await until('p2 delivered the run', async () => (await states('h')).every((s) => s.endsWith(':delivered')));
    expect(receiver.sequencesOf('h')).toEqual([1, 1, 2]);
  });

  it("at boot SQLite takes back a killed predecessor's leases (one process per file); PostgreSQL waits for its row to go", async () => {
    await hotA.write(() => outboxUnit([1, 2].map((s) => op(receiver.url, 'k', s))));
    // p1 claimed the run and was killed: its row is still there (not yet declared dead).
    expect((await hotA.write(() => claimSenderUnit('k', 'p1', Date.now())))?.sequence).toBe(1);
    await modA.get(HostProcessesRepository).register(registration('p3'));
    const single: AppConfig = { ...config(), database: db.config };
    const w = new WebhookWorker(hotA, single, { id: 'p3' });
    workers.push(w);
    await w.onApplicationBootstrap();
    if (name === 'sqlite') {
      await until('p3 delivered the run', async () => (await states('k')).every((s) => s.endsWith(':delivered')));
      expect(receiver.sequencesOf('k')).toEqual([1, 2]);
    } else {
      // PostgreSQL: other processes may be alive; p1's lease holds until its row is gone.
      expect(await hotA.read(senderOfUnit('k'))).toBe('p1');
      expect(await hotA.write(() => claimSenderUnit('k', 'p3', Date.now()))).toBeNull();
    }
  });
});
