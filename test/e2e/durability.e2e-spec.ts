import {
  Host,
  SHORT_LEASE,
  TestDatabase,
  dbRows,
  event,
  parseSse,
  startDemoRunner,
  takenOver,
  waitFor,
  type SseEvent,
} from './harness';
import { RawPlugin, manifestFor } from './raw-plugin';

jest.setTimeout(120_000);

/**
 * The durability rules of the run path (docs/durability.md): what a caller was told is
 * recorded, what a reader saw is committed, one event is one run, every run ends with a
 * terminal result, and the catalogue a run is granted from is the current one.
 */
describe('durability of the run path', () => {
  const db = new TestDatabase();
  let host: Host;

  beforeAll(async () => {
    host = await new Host(db, { MAX_RESULT_BYTES: '4096', OPENAI_API_KEY: 'sk-e2e' }).start();
  });

  afterAll(async () => {
    await host?.stop();
    await db.drop();
  });

  /** A raw plugin connected as `plugin:<author>/raw/default`, with an agent bound to it. */
  async function rawAgent(author: string, agentExtra: Record<string, unknown> = {}, manifestExtra = {}) {
    const reg = await host.api('POST', '/v1/admin/plugins', { author, name: 'raw' });
    expect(reg.status).toBe(201);
    const plugin = new RawPlugin(host.grpc, reg.body.token);
    plugin.hello(author, 'raw', [manifestFor(author, 'raw', manifestExtra)]);
    expect((await plugin.next()).welcome).toBeDefined();
    const agentId = `${author}-agent`;
    const agent = await host.api('POST', '/v1/admin/agents', {
      agent_id: agentId,
      runner_id: `plugin:${author}/raw/default`,
      ...agentExtra,
    });
    expect(agent.status).toBe(201);
    return { plugin, agentId };
  }

  async function startRun(plugin: RawPlugin, agentId: string): Promise<string> {
    const admitted = await host.api('POST', '/v1/events', event(agentId, 'hello'));
    expect(admitted.status).toBe(202);
    const msg = await plugin.next();
    expect(msg.run.context.run_id).toBe(admitted.body.run_id);
    return admitted.body.run_id as string;
  }

  it('answers concurrent duplicates like the first and creates exactly one run (same event_id or Idempotency-Key)', async () => {
    const { runnerId, runner } = await startDemoRunner(host, { author: 'dup' });
    await host.api('POST', '/v1/admin/agents', {
      agent_id: 'dup',
      runner_id: runnerId,
      runner_config: { mode: 'echo' },
    });
    for (const variant of ['event_id', 'idempotency_key'] as const) {
      const body = event('dup', 'once only');
      const id = `dup-${variant}-${Date.now()}`;
      const payload = variant === 'event_id' ? { ...body, event: { ...body.event, event_id: id } } : body;
      const headers: Record<string, string> = variant === 'idempotency_key' ? { 'idempotency-key': id } : {};
      const answers = await Promise.all(
        Array.from({ length: 8 }, () => host.api('POST', '/v1/events', payload, undefined, headers)),
      );
      expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 202]);
      const runIds = new Set(answers.map((a) => a.body.run_id as string));
      expect(runIds.size).toBe(1);
      const eventId = answers[0].body.event_id as string;
      expect((await dbRows(db, 'runs')).filter((r) => r.event_id === eventId)).toHaveLength(1);
      expect((await dbRows(db, 'events')).filter((r) => r.event_id === eventId)).toHaveLength(1);
    }
    await runner.stop();
  });

  it('ends the stream of a run that failed at admission (runner unavailable) with its terminal result', async () => {
    await host.api('POST', '/v1/admin/plugins', { author: 'gone', name: 'raw' });
    await host.api('POST', '/v1/admin/agents', { agent_id: 'gone', runner_id: 'plugin:gone/raw/default' });
    const refused = await host.api('POST', '/v1/events', event('gone', 'anyone?'));
    expect(refused.status).toBe(503);
    const runId = refused.body.error.details.run_id as string;
    const events = await host.sse(runId);
    expect(events.map((e) => e.event)).toEqual(['run.failed']);
    expect(events[0].data).toMatchObject({ source: 'host', data: { code: 'runner.unavailable', retryable: true } });
  });

  it('ends a run at once when its terminal result is refused (too large, invalid payload)', async () => {
    const { plugin, agentId } = await rawAgent('refuse');
    const big = await startRun(plugin, agentId);
    plugin.result(big, 'message.delta', { chunk: { role: 'assistant', content: 'part' } });
    plugin.result(big, 'run.completed', {
      finish_reason: 'stop',
      message: { role: 'assistant', content: 'x'.repeat(8000) },
    });
    const events = await host.sse(big);
    expect(events.map((e) => e.event)).toEqual(['message.delta', 'run.failed']);
    expect(events[1].data).toMatchObject({ source: 'host', data: { code: 'runner.invalid_result', retryable: false } });
    expect((await host.api('GET', `/v1/runs/${big}`)).body).toMatchObject({
      status: 'failed',
      error: { code: 'runner.invalid_result' },
    });

    const invalid = await startRun(plugin, agentId);
    plugin.result(invalid, 'run.failed', { error: 42 });
    const last = (await host.sse(invalid)).at(-1)!;
    expect(last.data).toMatchObject({ type: 'run.failed', source: 'host', data: { code: 'runner.invalid_result' } });
    plugin.close();
  });

  it('takes a sequence beyond what the database can hold as a missing one (the run is not wedged)', async () => {
    const { plugin, agentId } = await rawAgent('seq');
    const runId = await startRun(plugin, agentId);
    plugin.result(runId, 'message.delta', { chunk: { role: 'assistant', content: 'a' } }, 1);
    plugin.result(runId, 'message.delta', { chunk: { role: 'assistant', content: 'b' } }, 3_000_000_000);
    plugin.result(runId, 'run.completed', { finish_reason: 'stop' }, 9_007_199_254_740_000);
    const events = await host.sse(runId);
    expect(events.map((e) => [e.id, e.event])).toEqual([
      [1, 'message.delta'],
      [2, 'message.delta'],
      [3, 'run.completed'],
    ]);
    expect((await host.api('GET', `/v1/runs/${runId}`)).body.status).toBe('completed');
    plugin.close();
  });

  it('never grants a model deleted through the admin API to a later run', async () => {
    const model = await host.api('POST', '/v1/admin/models', {
      model_id: 'doomed',
      kind: 'chat',
      provider: 'openai',
      base_url: 'http://127.0.0.1:9/v1',
      api_key_env: 'OPENAI_API_KEY',
      model_name: 'doomed-model',
      context_window: 8192,
      max_output_tokens: 1024,
      tokenizer: 'o200k_base',
    });
    expect([model.status, model.body.error?.message]).toEqual([201, undefined]);
    const { plugin, agentId } = await rawAgent(
      'grant',
      { resource_policy: { allowed_model_ids: ['doomed'] } },
      { permissions: { models: ['invoke'] } },
    );
    const granted = async (runId: string) =>
      (await host.api('GET', `/v1/admin/runs/${runId}/authorization`)).body.authorization.resources.models.map(
        (m: { model_id: string }) => m.model_id,
      );
    const before = await startRun(plugin, agentId);
    expect(await granted(before)).toEqual(['doomed']);
    expect((await host.api('DELETE', '/v1/admin/models/doomed')).status).toBe(204);
    const after = await startRun(plugin, agentId);
    expect(await granted(after)).toEqual([]);
    plugin.close();
  });
});

describe('kill -9 of the host under load', () => {
  const db = new TestDatabase();

  afterAll(async () => {
    await db.drop();
  });

  /** Reads a run's SSE stream until it ends or the connection breaks; keeps what arrived. */
  async function follow(host: Host, runId: string, seen: Map<string, SseEvent[]>): Promise<void> {
    const got: SseEvent[] = [];
    seen.set(runId, got);
    try {
      const res = await fetch(`${host.http}/v1/runs/${runId}/events`, {
        headers: { authorization: 'Bearer e2e-admin-key-0123456789abcdef' },
      });
      const reader = res.body!.getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) {
          break;
        }
        buffer += new TextDecoder().decode(value);
        const cut = buffer.lastIndexOf('\n\n');
        if (cut >= 0) {
          got.push(...parseSse(buffer.slice(0, cut + 2)));
          buffer = buffer.slice(cut + 2);
        }
      }
    } catch {
      // the host was killed: what arrived so far is what this reader saw
    }
  }

  it('loses no 202-answered event and no result a reader saw, and reuses no sequence', async () => {
    const first = await new Host(db).start();
    const { runner, runnerId } = await startDemoRunner(first);
    await first.api('POST', '/v1/admin/agents', {
      agent_id: 'load',
      runner_id: runnerId,
      runner_config: { mode: 'echo', chunk_delay_ms: 2 },
    });
    const accepted: string[] = [];
    const seen = new Map<string, SseEvent[]>();
    const readers: Promise<void>[] = [];
    let stop = false;
    const client = async () => {
      while (!stop) {
        try {
          const r = await first.api('POST', '/v1/events', event('load', 'one two three four five six seven eight'));
          if (r.status === 202) {
            accepted.push(r.body.run_id as string);
            readers.push(follow(first, r.body.run_id as string, seen));
          }
        } catch {
          return; // connection refused: the host is gone
        }
      }
    };
    const clients = Array.from({ length: 8 }, client);
    await waitFor('some completed runs', () => Promise.resolve(accepted.length >= 60));
    await first.stop('SIGKILL');
    stop = true;
    await Promise.all(clients);
    await Promise.all(readers);
    await runner.stop();

    const second = await new Host(db, SHORT_LEASE).start();
    await takenOver(db, accepted);
    const runs = new Map((await dbRows(db, 'runs')).map((r) => [r.run_id as string, r]));
    const transcript = await dbRows(db, 'transcript');
    for (const runId of accepted) {
      const run = runs.get(runId);
      expect(run).toBeDefined();
      const replay = await second.sse(runId);
      const bySeq = new Map(replay.map((e) => [e.id, e]));
      expect(bySeq.size).toBe(replay.length);
      const sawn = seen.get(runId) ?? [];
      for (const e of sawn) {
        expect(bySeq.get(e.id)?.data).toEqual(e.data);
      }
      const terminal = replay.at(-1)!;
      expect(['run.completed', 'run.failed']).toContain(terminal.event);
      if (sawn.length > 0 && terminal.data.source === 'host') {
        expect(Number(terminal.id)).toBeGreaterThan(Math.max(...sawn.map((e) => Number(e.id))));
      }
      if (run!.status === 'completed') {
        expect(transcript.filter((t) => t.run_id === runId && t.role === 'assistant')).toHaveLength(1);
      }
    }
    await second.stop();
  });
});
