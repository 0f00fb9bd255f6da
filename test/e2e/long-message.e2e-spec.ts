import { longAnswerText, type LongAnswerConfig } from '../../apps/demo-runner/src/long-answer';
import { ADMIN_KEY, Host, TestDatabase, event, parseSse, startDemoRunner, type Proc } from './harness';

/*
 * Issue 23, "one long message stalls every run": a runner streaming one long answer without
 * paragraph breaks (the demo runner's `long_answer` mode: content-only deltas) must not make the
 * host's cost per delta grow with the message. Through the real interfaces: the run completes,
 * every delta and the delivered answer are intact, and /health/live keeps answering meanwhile.
 * The bound on one message (MAX_MESSAGE_BYTES) fails the run with a named code. No timings are
 * asserted here; bench/delivery measures them.
 */

jest.setTimeout(600_000);

interface Op {
  op: string;
  delivery_id: string;
  target_delivery_id: string | null;
  payload: Record<string, any>;
}

async function deliveries(host: Host, runId: string): Promise<Op[]> {
  const res = await fetch(`${host.http}/v1/runs/${runId}/deliveries`, {
    headers: { authorization: `Bearer ${ADMIN_KEY}` },
  });
  expect(res.status).toBe(200);
  return parseSse(await res.text()).map((e) => e.data as unknown as Op);
}

/** Probes /health/live one after another until `stop()`; every answer must be 200. */
function healthProbes(host: Host) {
  let running = true;
  const statuses: number[] = [];
  const loop = (async () => {
    while (running) {
      const res = await fetch(`${host.http}/health/live`);
      await res.arrayBuffer();
      statuses.push(res.status);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    answered: () => statuses.length,
    async stop() {
      running = false;
      await loop;
      return statuses;
    },
  };
}

async function setUp(host: Host, agents: [string, LongAnswerConfig][]): Promise<Proc> {
  await host.start();
  const { runner, runnerId } = await startDemoRunner(host);
  for (const [agent_id, config] of agents) {
    const r = await host.api('POST', '/v1/admin/agents', {
      agent_id,
      runner_id: runnerId,
      runner_config: { mode: 'long_answer', ...config },
    });
    expect(r.status).toBe(201);
  }
  return runner;
}

async function start(host: Host, agentId: string, delivery?: Record<string, unknown>): Promise<string> {
  const r = await host.api('POST', '/v1/events', event(agentId, 'write a long answer', delivery ? { delivery } : {}));
  expect(r.status).toBe(202);
  return r.body.run_id as string;
}

describe('one long message (4,000 deltas of 8 KiB, no paragraph break)', () => {
  const db = new TestDatabase();
  const host = new Host(db);
  let runner: Proc;
  const long: LongAnswerConfig = { deltas: 4000, delta_chars: 8192, paragraph_every: 0 };
  const paragraphs: LongAnswerConfig = { deltas: 300, delta_chars: 8192, paragraph_every: 1 };

  beforeAll(async () => {
    runner = await setUp(host, [
      ['long', long],
      ['paragraphs', paragraphs],
    ]);
  });

  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await db.drop();
  });

  it('completes with every delta and the whole answer delivered while /health/live keeps answering', async () => {
    const probes = healthProbes(host);
    const runId = await start(host, 'long');
    // A reader of the ops from the run's start gets the huge message.final live: its frame is built
    // from the payload JSON the writer made (docs/delivery.md#long-answers), the same op as replayed.
    const liveOps = deliveries(host, runId);
    const events = await host.sse(runId);
    const answeredDuringRun = probes.answered();
    const statuses = await probes.stop();

    const expected = longAnswerText(long);
    expect(expected.length).toBe(4000 * 8192);
    const deltas = events.filter((e) => e.event === 'message.delta');
    expect(deltas).toHaveLength(4000);
    expect(deltas.map((e) => e.data.data.chunk.content as string).join('')).toBe(expected);
    expect(events[events.length - 1].event).toBe('run.completed');
    const run = await host.api('GET', `/v1/runs/${runId}`);
    expect(run.body).toMatchObject({ status: 'completed', error: null });

    // The default surface (parts mode): nothing to send before the end, then the whole answer.
    const ops = await deliveries(host, runId);
    expect(ops.map((o) => o.op)).toEqual(['message.final']);
    expect(ops[0].payload.text).toBe(expected);
    expect(await liveOps).toEqual(ops);

    expect(answeredDuringRun).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 200)).toBe(true);
  });

  it('parts mode sends each paragraph as it completes; an edit surface ends showing the whole answer', async () => {
    const expected = longAnswerText(paragraphs);
    const partsRun = await start(host, 'paragraphs');
    await host.sse(partsRun);
    const parts = await deliveries(host, partsRun);
    expect(parts.filter((o) => o.op === 'message.send').length).toBeGreaterThan(250);
    expect(parts.map((o) => o.payload.text as string).join('')).toBe(expected);

    const editRun = await start(host, 'paragraphs', { surface: 'edit', supports_streaming: true, supports_edit: true });
    await host.sse(editRun);
    const edits = await deliveries(host, editRun);
    expect(edits[0].op).toBe('message.send');
    const last = edits[edits.length - 1];
    expect(last).toMatchObject({ op: 'message.final', target_delivery_id: edits[0].delivery_id });
    expect(last.payload.text).toBe(expected);
  });
});

describe('the bound on one message (MAX_MESSAGE_BYTES)', () => {
  const db = new TestDatabase();
  const host = new Host(db, { MAX_MESSAGE_BYTES: String(1024 * 1024) });
  let runner: Proc;
  const config: LongAnswerConfig = { deltas: 200, delta_chars: 8192, paragraph_every: 0 };

  beforeAll(async () => {
    runner = await setUp(host, [['too-long', config]]);
  });

  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await db.drop();
  });

  it('fails the run runner.message_too_large, keeps what fit, ends the delivered answer incomplete with the notice', async () => {
    const runId = await start(host, 'too-long');
    const events = await host.sse(runId);
    const deltas = events.filter((e) => e.event === 'message.delta');
    // 128 deltas of 8 KiB are 1 MiB exactly: the 129th would pass the bound.
    expect(deltas).toHaveLength(128);
    const streamed = deltas.map((e) => e.data.data.chunk.content as string).join('');
    expect(streamed).toBe(longAnswerText({ ...config, deltas: 128 }));
    const last = events[events.length - 1];
    expect(last.data).toMatchObject({
      type: 'run.failed',
      source: 'host',
      data: { code: 'runner.message_too_large', retryable: false },
    });
    expect(last.data.data.error).toContain('MAX_MESSAGE_BYTES');
    const run = await host.api('GET', `/v1/runs/${runId}`);
    expect(run.body).toMatchObject({ status: 'failed', error: { code: 'runner.message_too_large' } });

    const ops = await deliveries(host, runId);
    expect(ops.map((o) => o.op)).toEqual(['message.final', 'notice.send']);
    expect(ops[0].payload).toMatchObject({ text: streamed, incomplete: true });
    expect(ops[1].payload).toMatchObject({ kind: 'failed', retryable: false });

    expect((await fetch(`${host.http}/health/live`)).status).toBe(200);
  });
});
