import { Host, TestDatabase } from './harness';
import { RawPlugin, fromStruct, manifestFor } from './raw-plugin';

jest.setTimeout(60_000);

/** What the run context tells a runner about its position (docs/protocol.md#the-run-context; issue 8 item 14). */
describe('run context positions', () => {
  const db = new TestDatabase();
  let host: Host;
  let plugin: RawPlugin;

  beforeAll(async () => {
    host = await new Host(db, { OPENAI_API_KEY: 'sk-e2e' }).start();
    const model = await host.api('POST', '/v1/admin/models', {
      model_id: 'windowed',
      kind: 'chat',
      provider: 'openai',
      base_url: 'http://127.0.0.1:9/v1',
      api_key_env: 'OPENAI_API_KEY',
      model_name: 'windowed-model',
      context_window: 8192,
      max_output_tokens: 1024,
      tokenizer: 'o200k_base',
    });
    expect(model.status).toBe(201);
    const reg = await host.api('POST', '/v1/admin/plugins', { author: 'ctx', name: 'raw' });
    plugin = new RawPlugin(host.grpc, reg.body.token);
    plugin.hello('ctx', 'raw', [
      manifestFor('ctx', 'raw', { permissions: { models: ['invoke'], events: ['get', 'page'] } }),
    ]);
    expect((await plugin.next()).welcome).toBeDefined();
    expect(
      (
        await host.api('POST', '/v1/admin/agents', {
          agent_id: 'ctx',
          runner_id: 'plugin:ctx/raw/default',
          resource_policy: { allowed_model_ids: ['windowed'] },
        })
      ).status,
    ).toBe(201);
  });

  afterAll(async () => {
    plugin?.close();
    await host?.stop();
    await db.drop();
  });

  /** Sends a message in a thread and returns the `context` block and runtime metadata the runner got. */
  async function send(thread: string | null, text: string) {
    const admitted = await host.api('POST', '/v1/events', {
      agent_id: 'ctx',
      event: { event_type: 'message.received', source: 'api' },
      conversation: { conversation_id: 'conv-ctx', ...(thread ? { thread_id: thread } : {}) },
      actor: { actor_type: 'user', actor_id: 'u1' },
      input: { text },
    });
    expect(admitted.status).toBe(202);
    const msg = await plugin.next();
    const ctx = msg.run.context;
    plugin.result(ctx.run_id, 'run.completed', { finish_reason: 'stop' });
    await host.sse(ctx.run_id);
    return { access: ctx.context, metadata: fromStruct(ctx.runtime.metadata) };
  }

  it("latest_cursor is the thread's own last row, event_seq the event's log position, the window of the first chat model", async () => {
    const a = await send('t1', 'first in t1');
    expect(a.access.has_history_before).toBe(false);
    expect(a.metadata.model_context_window_tokens).toBe(8192);
    const b = await send('t2', 'first in t2');
    // The conversation has a row (t1), but not this thread.
    expect(b.access.has_history_before).toBe(false);
    expect(b.access.latest_cursor ?? null).toBeNull();
    const c = await send('t1', 'second in t1');
    expect(c.access.has_history_before).toBe(true);
    const rows = (await host.api('GET', '/v1/conversations/conv-ctx/transcript?thread_id=t1&order=oldest')).body.items;
    expect(c.access.latest_cursor).toBe(String(rows[0].seq));
    const seqs = [a, b, c].map((x) => Number(x.access.event_seq));
    expect(seqs.every((s) => Number.isInteger(s) && s > 0)).toBe(true);
    expect([...seqs].sort((x, y) => x - y)).toEqual(seqs);
    expect(new Set(seqs).size).toBe(3);
  });
});
