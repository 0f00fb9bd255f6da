import * as grpc from '@grpc/grpc-js';
import { Host, TestDatabase, event, logged } from './harness';
import { RawPlugin, fromStruct, fromValue, manifestFor, rawPkg } from './raw-plugin';

jest.setTimeout(60_000);

describe('transcript and state written from the result stream', () => {
  const db = new TestDatabase();
  const host = new Host(db);
  let plugin: RawPlugin;
  let token: string;

  beforeAll(async () => {
    await host.start();
    token = (await host.api('POST', '/v1/admin/plugins', { author: 'tx', name: 'raw' })).body.token;
    plugin = new RawPlugin(host.grpc, token);
    plugin.hello('tx', 'raw', [manifestFor('tx', 'raw')]);
    expect((await plugin.next()).welcome.runners).toHaveLength(1);
    const agent = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'tx',
      runner_id: 'plugin:tx/raw/default',
      state_policy: { state_scopes: ['conversation'] },
    });
    expect(agent.status).toBe(201);
  });

  afterAll(async () => {
    plugin?.close();
    await host.stop();
    await db.drop();
  });

  async function run(conversation: string, text: string) {
    const r = await host.api(
      'POST',
      '/v1/events',
      event('tx', text, { conversation: { conversation_id: conversation } }),
    );
    expect(r.status).toBe(202);
    const msg = await plugin.next();
    expect(msg.run.context.run_id).toBe(r.body.run_id);
    return msg.run.context;
  }

  it('writes the user row at admission and one assistant row assembled from deltas for a streaming-only run', async () => {
    const ctx = await run('conv-stream', 'tell me a story');
    expect(ctx.context.has_history_before).toBe(false);
    ['Once ', 'upon ', 'a time.'].forEach((chunk, i) =>
      plugin.result(ctx.run_id, 'message.delta', { chunk: { content: chunk } }, i + 1),
    );
    plugin.result(ctx.run_id, 'run.completed', { finish_reason: 'stop' }, 4);
    await host.sse(ctx.run_id);
    const page = await host.api('GET', '/v1/conversations/conv-stream/transcript?order=oldest');
    expect(page.body.items.map((i: any) => [i.role, i.content])).toEqual([
      ['user', 'tell me a story'],
      ['assistant', 'Once upon a time.'],
    ]);
    expect(page.body.items[1].run_id).toBe(ctx.run_id);

    const next = await run('conv-stream', 'and then?');
    expect(next.context).toMatchObject({ has_history_before: true, latest_cursor: '2' });
    plugin.result(next.run_id, 'message.delta', { chunk: { content: 'partial' } }, 1);
    plugin.result(next.run_id, 'message.completed', { message: { role: 'assistant', content: 'The end.' } }, 2);
    plugin.result(
      next.run_id,
      'run.completed',
      { message: { role: 'assistant', content: 'ignored: only one row per run' } },
      3,
    );
    await host.sse(next.run_id);
    const all = await host.api('GET', '/v1/conversations/conv-stream/transcript');
    expect(all.body.items.map((i: any) => i.content)).toEqual([
      'The end.',
      'and then?',
      'Once upon a time.',
      'tell me a story',
    ]);
  });

  it('applies state.updated results with the state rules, and rejects bad ones without failing the run', async () => {
    const ctx = await run('conv-state', 'remember this');
    plugin.result(
      ctx.run_id,
      'state.updated',
      { scope: 'conversation', key: 'memory.topic', value: { name: 'ducks' } },
      1,
    );
    plugin.result(ctx.run_id, 'state.updated', { scope: 'actor', key: 'not.enabled', value: 1 }, 2);
    plugin.result(
      ctx.run_id,
      'state.updated',
      { scope: 'conversation', key: 'too.big', value: 'x'.repeat(300_000) },
      3,
    );
    // Read back through the host API as the plugin, while the run is active.
    const api = new rawPkg.runnerhost.v1.HostApiService(host.grpc, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${token}`);
    const get = (key: string) =>
      new Promise<any>((resolve, reject) =>
        api.StateGet({ run_id: ctx.run_id, scope: 'conversation', key }, md, (e: Error | null, r: any) =>
          e ? reject(e) : resolve(r),
        ),
      );
    const { waitFor } = await import('./harness');
    expect(await waitFor('state applied', async () => fromValue((await get('memory.topic')).value))).toEqual({
      name: 'ducks',
    });
    expect(fromValue((await get('too.big')).value)).toBeNull();
    plugin.result(ctx.run_id, 'run.completed', {}, 4);
    await host.sse(ctx.run_id);
    expect((await host.api('GET', `/v1/runs/${ctx.run_id}`)).body.status).toBe('completed');
    // Logged as the result is applied, but on the host's stdout pipe, read apart from the SSE stream.
    await logged(() => host.proc.logs(), 'state.updated rejected');
    api.close();

    const later = await run('conv-state', 'what did I say?');
    expect(fromStruct(later.state.conversation)).toMatchObject({
      'memory.topic': { name: 'ducks' },
      'external.conversation_id': 'conv-state',
    });
    plugin.result(later.run_id, 'run.completed', {}, 1);
    await host.sse(later.run_id);
  });
});
