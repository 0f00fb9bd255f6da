import * as grpc from '@grpc/grpc-js';
import { Host, TestDatabase, dbRows, waitFor } from './harness';
import { HostApiClient, type RpcResult } from './host-api-client';
import { RawPlugin, manifestFor } from './raw-plugin';

/*
 * A conversation is agent + workspace + conversation id + thread. Two plugins, their agents in two
 * workspaces (an agent belongs to one workspace: docs/tenancy.md, so plugin A serves tenant-2
 * through a second agent), and events that share one conversation id ("shared"): over real gRPC,
 * each run's HistoryPage, HistorySearch, EventPage and EventGet see only its own conversation's
 * rows — never another agent's, nor the same runner's in another workspace.
 * Also SteeringPull's limit: above 100 it is clamped, not refused (docs: the host API).
 */

jest.setTimeout(180_000);

const S = grpc.status;
const SHARED = 'shared';

interface Tenant {
  plugin: RawPlugin;
  api: HostApiClient;
  /** The plugin's agent in each workspace. */
  agents: Record<string, string>;
}

function ok<T>(r: RpcResult<T>): T {
  if (r.err) {
    throw new Error(`expected success, got ${S[r.err.code]} (${r.err.xcode}): ${r.err.details}`);
  }
  return r.res;
}

describe('conversation scope over real gRPC: two plugins, two workspaces, one conversation id', () => {
  const db = new TestDatabase();
  const host = new Host(db);
  let a: Tenant;
  let b: Tenant;

  async function tenant(
    author: string,
    agents: Record<string, string>,
    manifest: Record<string, unknown> = {},
  ): Promise<Tenant> {
    const token = (await host.api('POST', '/v1/admin/plugins', { author, name: 'raw' })).body.token as string;
    const plugin = new RawPlugin(host.grpc, token);
    plugin.hello(author, 'raw', [manifestFor(author, 'raw', manifest)]);
    expect((await plugin.next()).welcome.runners).toHaveLength(1);
    for (const [workspace_id, agent_id] of Object.entries(agents)) {
      const r = await host.api('POST', '/v1/admin/agents', {
        agent_id,
        workspace_id,
        runner_id: `plugin:${author}/raw/default`,
      });
      expect(r.status).toBe(201);
    }
    return { plugin, api: new HostApiClient(host.grpc, token), agents };
  }

  /** Posts a message of `t`'s agent in the shared conversation of `workspace`; resolves to the run context. */
  async function start(t: Tenant, workspace: string, text: string) {
    const r = await host.api('POST', '/v1/events', {
      agent_id: t.agents[workspace],
      event: { event_type: 'message.received', source: 'api' },
      conversation: { conversation_id: SHARED, workspace_id: workspace },
      actor: { actor_type: 'user', actor_id: 'u1' },
      input: { text },
    });
    expect(r.status).toBe(202);
    const msg = await t.plugin.next();
    expect(msg.run.context.run_id).toBe(r.body.run_id);
    return { run_id: r.body.run_id as string, event_id: r.body.event_id as string, context: msg.run.context };
  }

  async function finish(t: Tenant, runId: string, answer: string): Promise<void> {
    t.plugin.result(runId, 'run.completed', { message: { role: 'assistant', content: answer } }, 1);
    await host.sse(runId);
  }

  beforeAll(async () => {
    await host.start();
    for (const workspace_id of ['tenant-1', 'tenant-2']) {
      expect((await host.api('POST', '/v1/admin/workspaces', { workspace_id })).status).toBe(201);
    }
    a = await tenant('tenant-a', { 'tenant-1': 'agent-a', 'tenant-2': 'agent-a2' });
    b = await tenant('tenant-b', { 'tenant-2': 'agent-b' });
  });

  afterAll(async () => {
    for (const t of [a, b]) {
      t?.api.close();
      t?.plugin.close();
    }
    await host.stop();
    await db.drop();
  });

  it("plugin B's history, search and events never show agent A's conversation, and A's event is refused", async () => {
    const first = await start(a, 'tenant-1', 'alpha secret question');
    await finish(a, first.run_id, 'alpha secret answer');

    const run = await start(b, 'tenant-2', 'beta question');
    // Nothing of A's conversation in B's context either.
    expect(run.context.context.has_history_before).toBe(false);

    const page = ok(await b.api.call('HistoryPage', { run_id: run.run_id, limit: 100 }));
    expect(page.items.map((i) => i.content)).toEqual(['beta question']);
    const forward = ok(
      await b.api.call('HistoryPage', { run_id: run.run_id, direction: 'forward', after_cursor: '0' }),
    );
    expect(forward.items.map((i) => i.content)).toEqual(['beta question']);
    // Naming the conversation id explicitly does not widen the scope.
    const named = ok(await b.api.call('HistoryPage', { run_id: run.run_id, conversation_id: SHARED }));
    expect(named.items.map((i) => i.content)).toEqual(['beta question']);

    expect(ok(await b.api.call('HistorySearch', { run_id: run.run_id, query: 'secret' })).items).toEqual([]);
    expect(
      ok(await b.api.call('HistorySearch', { run_id: run.run_id, query: 'question' })).items.map((i) => i.content),
    ).toEqual(['beta question']);

    const events = ok(await b.api.call('EventPage', { run_id: run.run_id, limit: 100 }));
    expect(events.items.map((e) => e.event_id)).toEqual([run.event_id]);

    const foreign = await b.api.call('EventGet', { run_id: run.run_id, event_id: first.event_id });
    expect(foreign.err && { code: S[foreign.err.code], xcode: foreign.err.xcode }).toEqual({
      code: S[S.PERMISSION_DENIED],
      xcode: 'unauthorized',
    });
    expect(ok(await b.api.call('EventGet', { run_id: run.run_id, event_id: run.event_id })).event.event_id).toBe(
      run.event_id,
    );
    await finish(b, run.run_id, 'beta answer');
  });

  it("plugin A's conversation in another workspace is another conversation", async () => {
    const other = await start(a, 'tenant-2', 'gamma question');
    expect(other.context.context.has_history_before).toBe(false);
    const page = ok(await a.api.call('HistoryPage', { run_id: other.run_id }));
    expect(page.items.map((i) => i.content)).toEqual(['gamma question']);
    expect(ok(await a.api.call('HistorySearch', { run_id: other.run_id, query: 'secret' })).items).toEqual([]);
    const events = ok(await a.api.call('EventPage', { run_id: other.run_id }));
    expect(events.items.map((e) => e.event_id)).toEqual([other.event_id]);
    await finish(a, other.run_id, 'gamma answer');

    // Back in tenant-1, agent A sees its own history (and only it).
    const again = await start(a, 'tenant-1', 'alpha follow-up');
    expect(again.context.context.has_history_before).toBe(true);
    const own = ok(await a.api.call('HistoryPage', { run_id: again.run_id, direction: 'forward', after_cursor: '0' }));
    expect(own.items.map((i) => [i.role, i.content])).toEqual([
      ['user', 'alpha secret question'],
      ['assistant', 'alpha secret answer'],
      ['user', 'alpha follow-up'],
    ]);
    await finish(a, again.run_id, 'alpha second answer');

    // The transcript rows record their workspace; the admin view narrows by agent and workspace.
    const rows = await dbRows(db, 'transcript');
    expect(new Set(rows.map((r) => `${String(r.agent_id)}/${String(r.workspace_id)}`))).toEqual(
      new Set(['agent-a/tenant-1', 'agent-b/tenant-2', 'agent-a2/tenant-2']),
    );
    const narrowed = await host.api('GET', `/v1/conversations/${SHARED}/transcript?agent_id=agent-b&order=oldest`);
    expect(narrowed.status).toBe(200);
    expect(narrowed.body.items.map((i: any) => [i.agent_id, i.workspace_id, i.content])).toEqual([
      ['agent-b', 'tenant-2', 'beta question'],
      ['agent-b', 'tenant-2', 'beta answer'],
    ]);
    const ws = await host.api('GET', `/v1/conversations/${SHARED}/transcript?workspace_id=tenant-2&order=oldest`);
    expect(ws.body.items.map((i: any) => i.content)).toEqual([
      'beta question',
      'beta answer',
      'gamma question',
      'gamma answer',
    ]);
  });
});

describe('SteeringPull limit over real gRPC', () => {
  const db = new TestDatabase();
  const host = new Host(db);
  let plugin: RawPlugin;
  let api: HostApiClient;

  beforeAll(async () => {
    await host.start();
    const token = (await host.api('POST', '/v1/admin/plugins', { author: 'steer', name: 'raw' })).body.token as string;
    plugin = new RawPlugin(host.grpc, token);
    plugin.hello('steer', 'raw', [manifestFor('steer', 'raw', { capabilities: { streaming: true, steering: true } })]);
    expect((await plugin.next()).welcome.runners).toHaveLength(1);
    expect(
      (await host.api('POST', '/v1/admin/agents', { agent_id: 'steer', runner_id: 'plugin:steer/raw/default' })).status,
    ).toBe(201);
    api = new HostApiClient(host.grpc, token);
  });

  afterAll(async () => {
    api?.close();
    plugin?.close();
    await host.stop();
    await db.drop();
  });

  const message = (text: string) => ({
    agent_id: 'steer',
    event: { event_type: 'message.received', source: 'api' },
    conversation: { conversation_id: 'steer-conv' },
    actor: { actor_type: 'user', actor_id: 'u1' },
    input: { text },
  });

  it('limit=1000 hands out 100 items when more wait; 0 and negatives are refused naming the field', async () => {
    const first = await host.api('POST', '/v1/events', message('start'));
    expect(first.status).toBe(202);
    const runId = (await plugin.next()).run.context.run_id as string;
    // The run's queue holds 100 follow-ups; the 101st waits as a run of its own.
    for (let i = 0; i < 101; i++) {
      const r = await host.api('POST', '/v1/events', message(`follow-up ${i}`));
      expect(r.status).toBe(202);
    }
    for (const limit of [0, -1, -1000]) {
      const refused = await api.call('SteeringPull', { run_id: runId, limit });
      expect(refused.err && { code: S[refused.err.code], xcode: refused.err.xcode }).toEqual({
        code: S[S.INVALID_ARGUMENT],
        xcode: 'invalid_argument',
      });
      expect(refused.err?.details).toMatch(/^limit: must be > 0/);
    }
    const pulled = ok(await api.call('SteeringPull', { run_id: runId, limit: 1000 }));
    expect(pulled.items).toHaveLength(100);
    expect(pulled.items.map((i) => (i.input as { text?: string } | undefined)?.text ?? null)).toEqual(
      Array.from({ length: 100 }, (_, i) => `follow-up ${i}`),
    );
    // Each handed out once: the queue is empty now.
    expect(ok(await api.call('SteeringPull', { run_id: runId, limit: 1000 })).items).toEqual([]);
    plugin.result(runId, 'run.completed', {}, 1);
    await host.sse(runId);
    // The 101st starts as a run of its own once the conversation is free.
    const next = await waitFor('the waiting follow-up starts', async () => (await plugin.next()).run?.context ?? null);
    plugin.result(next.run_id as string, 'run.completed', {}, 1);
    await host.sse(next.run_id as string);
  });
});

/*
 * Concurrency and steering are per conversation too, workspace included: one runner serving two
 * workspaces (an agent in each, and one in `default`) with the same conversation id runs each
 * workspace's messages in its own run — a
 * message of tenant-2 never steers into, nor waits behind, tenant-1's run, and tenant-1's
 * follow-up is never pulled by tenant-2's run (docs/conversations-and-steering.md).
 */
/** The runner's agent in each workspace. */
const WSTEER: Record<string, string> = { 'tenant-1': 'wsteer', 'tenant-2': 'wsteer-2', default: 'wsteer-0' };

describe('concurrency and steering per workspace over real gRPC: one runner, one conversation id', () => {
  const db = new TestDatabase();
  const host = new Host(db);
  let plugin: RawPlugin;
  let api: HostApiClient;

  beforeAll(async () => {
    await host.start();
    const token = (await host.api('POST', '/v1/admin/plugins', { author: 'wsteer', name: 'raw' })).body.token as string;
    plugin = new RawPlugin(host.grpc, token);
    // A runner that streams and pulls steering: its runs stay running until it answers.
    plugin.hello('wsteer', 'raw', [
      manifestFor('wsteer', 'raw', { capabilities: { streaming: true, steering: true } }),
    ]);
    expect((await plugin.next()).welcome.runners).toHaveLength(1);
    for (const [workspace_id, agent_id] of Object.entries(WSTEER)) {
      if (workspace_id !== 'default') {
        expect((await host.api('POST', '/v1/admin/workspaces', { workspace_id })).status).toBe(201);
      }
      const r = await host.api('POST', '/v1/admin/agents', {
        agent_id,
        workspace_id,
        runner_id: 'plugin:wsteer/raw/default',
      });
      expect(r.status).toBe(201);
    }
    api = new HostApiClient(host.grpc, token);
  });

  afterAll(async () => {
    api?.close();
    plugin?.close();
    await host.stop();
    await db.drop();
  });

  const post = (workspace: string | null, text: string, extra: Record<string, unknown> = {}) =>
    host.api('POST', '/v1/events', {
      // No workspace named: the agent's (`default`) is filled in.
      agent_id: WSTEER[workspace ?? 'default'],
      event: { event_type: 'message.received', source: 'api' },
      conversation: { conversation_id: SHARED, ...(workspace === null ? {} : { workspace_id: workspace }) },
      actor: { actor_type: 'user', actor_id: 'u1' },
      input: { text },
      ...extra,
    });

  const texts = (items: Array<{ input?: unknown }>) =>
    items.map((i) => (i.input as { text?: string } | undefined)?.text ?? null);

  it("tenant-2 starts its own run beside tenant-1's; tenant-1's follow-up still steers into tenant-1's run", async () => {
    const t1 = await post('tenant-1', 't1 first');
    expect(t1.status).toBe(202);
    expect(t1.body.disposition).toBe('started');
    const run1 = (await plugin.next()).run.context;
    expect(run1.run_id).toBe(t1.body.run_id);

    const t2 = await post('tenant-2', 't2 first');
    expect(t2.status).toBe(202);
    expect(t2.body.disposition).toBe('started');
    expect(t2.body.run_id).not.toBe(t1.body.run_id);
    const run2 = (await plugin.next()).run.context;
    expect(run2.run_id).toBe(t2.body.run_id);

    // No workspace named: the agent's (default) is a conversation of its own, too.
    const none = await post(null, 'no workspace first');
    expect(none.body.disposition).toBe('started');
    const run0 = (await plugin.next()).run.context;
    expect(run0.run_id).toBe(none.body.run_id);

    const follow = await post('tenant-1', 't1 follow-up');
    expect(follow.status).toBe(202);
    expect(follow.body).toMatchObject({ disposition: 'steered', run_id: t1.body.run_id, position: 1 });

    // Only tenant-1's run pulls it.
    for (const other of [run2.run_id, run0.run_id] as string[]) {
      expect(texts(ok(await api.call('SteeringPull', { run_id: other, limit: 10 })).items)).toEqual([]);
    }
    expect(texts(ok(await api.call('SteeringPull', { run_id: run1.run_id as string, limit: 10 })).items)).toEqual([
      't1 follow-up',
    ]);

    // The admin view of one conversation's queue: agent + workspace + conversation id.
    const view = await host.api(
      'GET',
      `/v1/admin/steering?agent_id=wsteer&workspace_id=tenant-1&conversation_id=${SHARED}`,
    );
    expect(view.status).toBe(200);
    expect(view.body.items.map((i: any) => [i.workspace_id, i.text, i.run_id])).toEqual([
      ['tenant-1', 't1 follow-up', t1.body.run_id],
    ]);
    expect(view.body.active_runs.map((r: any) => [r.workspace_id, r.run_id])).toEqual([['tenant-1', t1.body.run_id]]);
    const other = await host.api('GET', `/v1/admin/steering?agent_id=wsteer&workspace_id=tenant-2`);
    expect(other.body.items).toEqual([]);

    // A queued message of tenant-2 waits behind tenant-2's run, and starts when that one ends,
    // while tenant-1's run is still running.
    const queued = await post('tenant-2', 't2 queued', { concurrency: 'queue' });
    expect(queued.body.disposition).toBe('queued');
    plugin.result(run2.run_id as string, 'run.completed', {}, 1);
    await host.sse(run2.run_id as string);
    const next = (await plugin.next()).run.context;
    expect(next.run_id).toBe(queued.body.run_id);
    expect(next.conversation).toMatchObject({ conversation_id: SHARED, workspace_id: 'tenant-2' });
    const runs = await dbRows(db, 'runs');
    expect(
      runs
        .filter((r) => r.status === 'running')
        .map((r) => [r.run_id, r.workspace_id])
        .sort(),
    ).toEqual(
      [
        [t1.body.run_id, 'tenant-1'],
        [none.body.run_id, 'default'],
        [queued.body.run_id, 'tenant-2'],
      ].sort(),
    );

    for (const runId of [run1.run_id, run0.run_id, next.run_id] as string[]) {
      plugin.result(runId, 'run.completed', {}, 1);
      await host.sse(runId);
    }
  });
});
