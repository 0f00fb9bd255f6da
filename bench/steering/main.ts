import * as os from 'node:os';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { BuiltHost, waitFor } from '../common/host-process';
import { machineJson, num, writeJson } from '../common/json-out';
import { fmtDuration, markdownTable, summarize, type Summary } from '../common/stats';
import { BenchRunner, BENCH_RUNNER_ID, type Arrival } from './runner';

/*
 * npm run bench:steering — steering (docs/conversations-and-steering.md), end to end over real HTTP and gRPC:
 *  1. latency from POST /v1/events (disposition steered) to the item returned by the runner's
 *     waiting SteeringPull, p50/p99; same-run baseline: POST of a fresh event to the run reaching
 *     the runner (the start path);
 *  2. a burst of follow-ups (default 1,000 over 50 conversations) into busy conversations: every
 *     message must reach the runner exactly once (pulled into the running run, or run as its own
 *     after the run ended), in arrival order per conversation — prints lost, duplicated, out of order.
 * Options: --samples N (200), --conversations N (50), --per-conversation N (20), --end-after N (7:
 * a pulling run ends after N items, so the burst also crosses run ends), --json FILE,
 * --database-url URL (PostgreSQL; default SQLite in a temp dir).
 */

/** Polls every 20 ms: the probes here are cheap in-process checks or one local HTTP call. */
const until = <T>(what: string, ms: number, probe: () => Promise<T | undefined | false>): Promise<T> =>
  waitFor(what, ms, probe, [], 20);

function event(agent: string, conversation: string, text: string) {
  return {
    agent_id: agent,
    event: { event_type: 'message.received', source: 'api' },
    conversation: { conversation_id: conversation },
    actor: { actor_type: 'user', actor_id: 'bench' },
    input: { text },
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      samples: { type: 'string', default: '200' },
      conversations: { type: 'string', default: '50' },
      'per-conversation': { type: 'string', default: '20' },
      'end-after': { type: 'string', default: '7' },
      json: { type: 'string' },
      'database-url': { type: 'string' },
    },
  });
  const samples = Number(values.samples);
  const conversations = Number(values.conversations);
  const perConversation = Number(values['per-conversation']);
  const endAfter = Number(values['end-after']);
  const host = await BuiltHost.start({
    tmpPrefix: 'runner-host-bench-steering-',
    // One run pulls continuously: the per-run host API rate limit is not what this measures.
    env: { HOSTAPI_CALLS_PER_SECOND: '100000', HOSTAPI_BURST: '100000' },
    databaseUrl: values['database-url'],
    pollMs: 20,
  });
  const http = host.http;
  let runner: BenchRunner | undefined;
  try {
    const plugin = (await http.expect(201, 'POST', '/v1/admin/plugins', { author: 'bench', name: 'steer' })) as {
      token: string;
    };
    runner = new BenchRunner(host.grpcAddress, plugin.token, 5_000);
    await runner.connect();
    await http.expect(201, 'POST', '/v1/admin/agents', { agent_id: 'bench', runner_id: BENCH_RUNNER_ID });
    const r = runner;

    // Waits for the arrival of one text at the runner.
    const waiters = new Map<string, (a: Arrival) => void>();
    r.onArrival = (a) => waiters.get(a.text)?.(a);
    const arrival = (text: string) => new Promise<Arrival>((resolve) => waiters.set(text, resolve));
    const post = (body: unknown) => http.json('POST', '/v1/events', body);

    // 1a. Baseline: a fresh event's run reaching the runner.
    const baseline: number[] = [];
    for (let i = 0; i < samples + 20; i++) {
      const text = `base ${i}`;
      const got = arrival(text);
      const t0 = performance.now();
      const res = await post(event('bench', `base-${i}`, text));
      if (res.status !== 202) {
        throw new Error(`baseline POST answered ${res.status}: ${JSON.stringify(res.body)}`);
      }
      const a = await got;
      if (i >= 20) {
        baseline.push(a.at - t0); // the first 20 warm up
      }
    }
    // 1b. Steering: a follow-up into a running run, to the runner's waiting pull.
    const started = arrival('pull: latency');
    await post(event('bench', 'lat', 'pull: latency'));
    await started;
    const steer: number[] = [];
    const admit: number[] = [];
    for (let i = 0; i < samples + 20; i++) {
      const text = `steer ${i}`;
      const got = arrival(text);
      await sleep(1); // the runner is back in its waiting pull
      const t0 = performance.now();
      const res = await post(event('bench', 'lat', text));
      const t1 = performance.now();
      if ((res.body as { disposition?: string }).disposition !== 'steered') {
        throw new Error(`follow-up ${i} was not steered: ${JSON.stringify(res.body)}`);
      }
      const a = await got;
      if (i >= 20) {
        steer.push(a.at - t0);
        admit.push(t1 - t0);
      }
    }
    await r.finishAll();

    // 2. Burst: busy conversations, follow-ups posted concurrently across them (in order within each).
    // Runs end every `endAfter` pulled items while follow-ups keep coming: the burst also goes
    // through run ends (queue release, re-dispatch) and waiting runs, not only the steering queue.
    r.pullPrefixes = ['pull:', 'burst-'];
    r.endAfter = endAfter;
    r.waitMs = 1_000;
    const convs = Array.from({ length: conversations }, (_, c) => `burst-${c}`);
    const openers = convs.map((c) => arrival(`pull: open ${c}`));
    await Promise.all(convs.map((c) => post(event('bench', c, `pull: open ${c}`))));
    await Promise.all(openers);
    const before = r.arrivals.length;
    const dispositions = new Map<string, number>();
    const t0 = performance.now();
    await Promise.all(
      convs.map(async (c) => {
        for (let i = 0; i < perConversation; i++) {
          const res = await post(event('bench', c, `${c} #${i}`));
          const d = (res.body as { disposition?: string }).disposition ?? `http ${res.status}`;
          dispositions.set(d, (dispositions.get(d) ?? 0) + 1);
        }
      }),
    );
    const postSeconds = (performance.now() - t0) / 1000;
    const total = conversations * perConversation;
    const seenOf = () => r.arrivals.slice(before).filter((a) => a.text.startsWith('burst-'));
    // From now on a run ends at its first empty pull; what is left on it is re-dispatched.
    r.draining = true;
    await until('every follow-up to arrive', 60_000, () => Promise.resolve(seenOf().length >= total)).catch(
      () => undefined,
    );
    await sleep(500); // a duplicate would arrive late
    const seen = seenOf();
    const counts = new Map<string, number>();
    for (const a of seen) {
      counts.set(a.text, (counts.get(a.text) ?? 0) + 1);
    }
    let lost = 0;
    let outOfOrder = 0;
    for (const c of convs) {
      const expected = Array.from({ length: perConversation }, (_, i) => `${c} #${i}`);
      lost += expected.filter((t) => !counts.has(t)).length;
      const got = seen.filter((a) => a.text.startsWith(`${c} #`)).map((a) => a.text);
      const firsts = got.filter((t, i) => got.indexOf(t) === i);
      outOfOrder += firsts.filter((t, i) => t !== expected.filter((e) => counts.has(e))[i]).length;
    }
    const duplicated = [...counts.values()].filter((n) => n > 1).reduce((a, n) => a + n - 1, 0);
    const viaRun = seen.filter((a) => a.via === 'run').length;

    const s = summarize(steer);
    const b = summarize(baseline);
    const a = summarize(admit);
    const row = (name: string, x: Summary) => [
      name,
      String(x.count),
      fmtDuration(x.p50),
      fmtDuration(x.p99),
      fmtDuration(x.max),
    ];
    const database = values['database-url'] ? 'postgres' : 'sqlite';
    process.stdout.write(`\nSteering latency (${database}, ${os.cpus().length} cores)\n\n`);
    process.stdout.write(
      markdownTable(
        ['path', 'samples', 'p50', 'p99', 'max'],
        [
          row('POST (steered) → item returned by a waiting SteeringPull', s),
          row('  of which: POST /v1/events answered (steered)', a),
          row('baseline: POST (started) → run request at the runner', b),
        ],
      ) + '\n',
    );
    process.stdout.write(
      `\nBurst: ${total} follow-ups over ${conversations} busy conversations, posted in ${postSeconds.toFixed(2)} s ` +
        `(${[...dispositions].map(([k, v]) => `${k} ${v}`).join(', ')}); runs end after ${endAfter} pulled items; ` +
        `${seen.length - viaRun} pulled into running runs, ${viaRun} run on their own\n`,
    );
    process.stdout.write(`lost=${lost} duplicated=${duplicated} out_of_order=${outOfOrder}\n`);
    if (values.json) {
      const ms = (x: Summary) => ({ count: x.count, p50_ms: num(x.p50), p99_ms: num(x.p99), max_ms: num(x.max) });
      writeJson(values.json, {
        bench: 'steering',
        database,
        machine: machineJson(),
        latency: { steered_to_pull: ms(s), steered_post_answer: ms(a), baseline_started_to_runner: ms(b) },
        burst: {
          follow_ups: total,
          conversations,
          end_after: endAfter,
          post_seconds: num(postSeconds),
          dispositions: Object.fromEntries(dispositions),
          pulled: seen.length - viaRun,
          run_on_their_own: viaRun,
          lost,
          duplicated,
          out_of_order: outOfOrder,
        },
      });
    }
    if (lost > 0 || duplicated > 0) {
      process.exitCode = 1;
    }
  } finally {
    runner?.close();
    await host.stop();
    host.removeDataDir();
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`bench: ${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
