import * as http from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { HostFixture } from '../dispatch/host-fixture';
import type { BenchDatabase } from '../dispatch/postgres';
import { summarize } from '../common/stats';

/*
 * The dead-endpoint level (docs/delivery.md, "Webhook fairness"): an agent whose webhook never
 * answers, with DEAD_RUNS runs, beside an agent with a healthy webhook. Figure: the healthy
 * endpoint's delivery latency (POST /v1/events → its receiver gets the run's op) alone, beside the
 * dead one, and beside the dead one with the per-endpoint limit at all 16 workers and the breaker
 * never opening (round-robin still on: the first wave of the dead endpoint's requests holds every
 * worker until it times out, as before).
 */

const DEAD_RUNS = 32;
const SAMPLES = 20;
/** The unfair configuration waits about one timeout per sample: fewer samples. */
const UNFAIR_SAMPLES = 3;
const TIMEOUT_MS = 5000;
const SECRET_ENV = 'RUNNERHOST_SECRET_BENCH_HOOK';

export interface DeadEndpointRow {
  database: string;
  setting: string;
  samples: number;
  /** The first healthy delivery after the dead endpoint's runs: the one that waits for a wave of timeouts. */
  first_ms: number;
  p50_ms: number;
  max_ms: number;
}

/** A local receiver: answers 200 (healthy) or never (dead); reports each op's arrival. */
class Receiver {
  private server?: http.Server;
  private readonly sockets = new Set<Socket>();
  private readonly waiters = new Map<string, (at: number) => void>();
  private readonly arrived = new Map<string, number>();
  received = 0;

  constructor(private readonly answers: boolean) {}

  async start(): Promise<string> {
    const server = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        this.received++;
        const runId = (JSON.parse(raw) as { run_id: string }).run_id;
        if (this.answers) {
          res.writeHead(200).end('ok');
          const at = performance.now();
          this.arrived.set(runId, at);
          this.waiters.get(runId)?.(at);
        }
      });
    });
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.server = server;
    return `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
  }

  /** When the run's first op arrived (performance.now()), now or once it does. */
  arrival(runId: string): Promise<number> {
    const at = this.arrived.get(runId);
    return at !== undefined ? Promise.resolve(at) : new Promise((resolve) => this.waiters.set(runId, resolve));
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) {
      s.destroy();
    }
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

async function oneHost(
  database: string,
  makePg: () => Promise<BenchDatabase | null>,
  setting: string,
  env: Record<string, string>,
  withDead: boolean,
  samples: number,
  progress: (msg: string) => void,
): Promise<DeadEndpointRow> {
  const dead = new Receiver(false);
  const healthy = new Receiver(true);
  const deadUrl = await dead.start();
  const healthyUrl = await healthy.start();
  // HostFixture passes this process's environment on to the host.
  const saved = { ...process.env };
  Object.assign(process.env, env, {
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
    [SECRET_ENV]: 'bench-secret',
  });
  const pg = await makePg();
  let fixture: HostFixture;
  try {
    fixture = await HostFixture.start('bench-dead-unused', { mode: 'echo' }, pg);
  } finally {
    process.env = saved;
  }
  try {
    for (const [agent, url] of [
      ['bench-dead', deadUrl],
      ['bench-live', healthyUrl],
    ]) {
      await fixture.http.expect(201, 'POST', '/v1/admin/agents', {
        agent_id: agent,
        runner_id: 'plugin:demo/echo/default',
        runner_config: { mode: 'echo' },
        delivery_policy: { webhook: { url, secret_env: SECRET_ENV } },
      });
    }
    const post = async (agent: string, i: number) =>
      (
        (await fixture.http.expect(202, 'POST', '/v1/events', {
          agent_id: agent,
          event: { event_type: 'message.received', source: 'api' },
          conversation: { conversation_id: `${agent}-${i}` },
          actor: { actor_type: 'user', actor_id: 'bench' },
          input: { text: `hello ${i}` },
          delivery: { surface: 'webhook' },
        })) as { run_id: string }
      ).run_id;
    if (withDead) {
      progress(`${database}: ${setting}: ${DEAD_RUNS} runs to the dead endpoint`);
      for (let i = 0; i < DEAD_RUNS; i++) {
        await post('bench-dead', i);
      }
      const until = Date.now() + 60_000;
      while (dead.received < 4 && Date.now() < until) {
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    progress(`${database}: ${setting}: ${samples} healthy deliveries, one at a time`);
    const latencies: number[] = [];
    for (let i = 0; i < samples; i++) {
      const t0 = performance.now();
      // The op can only arrive after the 202 tells its run id: register on the id, then wait.
      const runId = await post('bench-live', i);
      let timer: NodeJS.Timeout | undefined;
      const at = await Promise.race([
        healthy.arrival(runId),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('healthy op not delivered in 120 s')), 120_000);
        }),
      ]);
      clearTimeout(timer);
      latencies.push(at - t0);
    }
    const s = summarize(latencies);
    return { database, setting, samples: s.count, first_ms: latencies[0], p50_ms: s.p50, max_ms: s.max };
  } finally {
    await fixture.stop();
    fixture.removeDataDir();
    await pg?.drop();
    await dead.stop();
    await healthy.stop();
  }
}

/** The three rows of the level on one database (a fresh host each). */
export async function deadEndpointLevel(
  database: string,
  makePg: () => Promise<BenchDatabase | null>,
  progress: (msg: string) => void,
): Promise<DeadEndpointRow[]> {
  const fair = {};
  const unfair = { WEBHOOK_ENDPOINT_CONCURRENCY: '16', WEBHOOK_BREAKER_FAILURES: '1000' };
  return [
    await oneHost(database, makePg, 'healthy endpoint alone', fair, false, SAMPLES, progress),
    await oneHost(database, makePg, 'beside a dead endpoint (defaults)', fair, true, SAMPLES, progress),
    await oneHost(
      database,
      makePg,
      'beside a dead endpoint, per-endpoint limit 16 and breaker off',
      unfair,
      true,
      UNFAIR_SAMPLES,
      progress,
    ),
  ];
}

export const DEAD_ENDPOINT_NOTE = `${DEAD_RUNS} runs to a webhook that never answers (WEBHOOK_TIMEOUT_MS ${TIMEOUT_MS}, WEBHOOK_CONCURRENCY 16), then healthy-endpoint runs one at a time; latency = POST /v1/events → its op at the healthy receiver`;
