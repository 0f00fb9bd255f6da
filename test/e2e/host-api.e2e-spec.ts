import { randomBytes, randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { ADMIN_KEY, Host, TestDatabase, dbRows, event, startDemoRunner, waitFor, type Proc } from './harness';
import { HostApiClient, type HostApiMethod, type RpcResult } from './host-api-client';

/*
 * Conformance of runnerhost.v1.HostApiService over real gRPC against the running host: every RPC
 * with a real implementation, allowed and refused, and the guard's order (plugin token → run
 * active → caller is the run's plugin → grant → conversation scope → payload → rate → deadline).
 * The test process calls as the demo plugin with the token startDemoRunner returns; a second
 * plugin ("other/bot") provides a foreign token and a foreign run. Every refusal is checked for
 * its status, its `x-error-code`, its audit row, and that nothing changed.
 */

jest.setTimeout(120_000);

const S = grpc.status;
const STALL = { mode: 'stall', timeout: 0 };
const PROMPT = [{ role: 'system', content: 'be brief' }];
const FULL_POLICY = {
  // workspace and binding storage are allowed here but not declared by the demo manifest
  resource_policy: {
    allow_plugin_storage: true,
    allow_workspace_storage: true,
    allow_binding_storage: true,
    prompt: PROMPT,
  },
  state_policy: { state_scopes: ['conversation', 'actor', 'subject', 'runner'] },
};
const RESTRICTED_POLICY = {
  resource_policy: { history: ['page'], events: [], allow_plugin_storage: false },
  state_policy: { enable_state: false },
};
const ALL_APIS = {
  prompt_get: true,
  history_page: true,
  history_search: true,
  event_get: true,
  event_page: true,
  state: true,
  storage: true,
  steering_pull: false,
  run_get: true,
};
const RESTRICTED_APIS = {
  prompt_get: false,
  history_page: true,
  history_search: false,
  event_get: false,
  event_page: false,
  state: false,
  storage: false,
  steering_pull: false,
  run_get: true,
};
const ECHO_TEXTS = ['alpha bravo charlie', 'delta echo foxtrot', 'golf hotel india'];
/** A distinctive base64 image sent once; it must never be stored. */
const BLOB = Buffer.from(`e2e-host-api-image-${randomUUID()}-${'\u00ff\u00fe'.repeat(16)}`, 'latin1').toString(
  'base64',
);

interface AuditRow {
  action: string;
  resource: string | null;
  scope: string | null;
  outcome: 'allowed' | 'denied' | 'failed';
  error_code: string | null;
  plugin_id: string | null;
  runner_id: string | null;
  duration_us: number;
}

function ok<T>(r: RpcResult<T>): T {
  if (r.err) {
    throw new Error(`expected success, got ${S[r.err.code]} (${r.err.xcode}): ${r.err.details}`);
  }
  return r.res;
}

function expectError(r: RpcResult<unknown>, code: grpc.status, xcode: string): void {
  const got = r.err ? { code: S[r.err.code], xcode: r.err.xcode } : { res: r.res };
  expect(got).toEqual({ code: S[code], xcode });
}

/** Helpers bound to one host. */
function hostTools(host: Host) {
  const auditLog = async (runId: string): Promise<AuditRow[]> => {
    const rows: AuditRow[] = [];
    let cursor: string | null = null;
    do {
      const q: string = cursor ? `&cursor=${cursor}` : '';
      const r = await host.api<{ items: AuditRow[]; next_cursor: string | null }>(
        'GET',
        `/v1/admin/runs/${runId}/audit?limit=100${q}`,
      );
      expect(r.status).toBe(200);
      rows.push(...r.body.items);
      cursor = r.body.next_cursor;
    } while (cursor);
    return rows;
  };
  return {
    auditLog,
    lastAudit: async (runId: string) => (await auditLog(runId)).at(-1),
    /** The status, the x-error-code, and the run's newest audit row. */
    expectRefused: async (
      runId: string,
      r: RpcResult<unknown>,
      code: grpc.status,
      xcode: string,
      audit: Partial<AuditRow> & { action: string },
    ) => {
      expectError(r, code, xcode);
      expect((await auditLog(runId)).at(-1)).toMatchObject({ outcome: 'denied', error_code: xcode, ...audit });
    },
    authz: async (runId: string) => {
      const r = await host.api('GET', `/v1/admin/runs/${runId}/authorization`);
      expect(r.status).toBe(200);
      return r.body;
    },
    cancel: async (runId: string) => {
      const r = await host.api('POST', `/v1/runs/${runId}/cancel`, { reason: 'test done' });
      expect(r.status).toBe(200);
      expect(r.body.status).toBe('cancelled');
    },
    agent: async (agentId: string, runnerId: string, runnerConfig: object, policies: object = {}) => {
      const r = await host.api('POST', '/v1/admin/agents', {
        agent_id: agentId,
        runner_id: runnerId,
        runner_config: runnerConfig,
        ...policies,
      });
      expect(r.status).toBe(201);
    },
  };
}

describe('host API conformance over real gRPC', () => {
  const db = new TestDatabase();
  // High limits: this host is not about rate limiting (see the low-limit host below).
  const host = new Host(db, { HOSTAPI_CALLS_PER_SECOND: '1000', HOSTAPI_BURST: '1000' });
  const { auditLog, lastAudit, expectRefused, authz, cancel, agent } = hostTools(host);
  let demo: { runner: Proc; runnerId: string; token: string };
  let other: { runner: Proc; runnerId: string; token: string };
  let api: HostApiClient;

  const C1 = 'conv-main';
  const C2 = 'conv-other';
  const C3 = 'conv-long';
  /** Every event of agent full posted, by conversation id (its event log must hold exactly these). */
  const eventsOf: Record<string, string[]> = { [C1]: [], [C2]: [], [C3]: [] };
  const echoes: { run_id: string; event_id: string; text: string }[] = [];
  let imageEvent: string;
  let otherConvEvent: string;
  /** Active (stalled) runs. */
  const run = {} as Record<'full' | 'full2' | 'restricted' | 'foreign' | 'noconv' | 'inC2' | 'long', string>;
  let fullEvent: string;

  const post = async (agentId: string, text: string, extra: Record<string, unknown> = {}) => {
    const r = await host.api('POST', '/v1/events', { ...event(agentId, text), ...extra });
    expect(r.status).toBe(202);
    const conv = (extra.conversation as { conversation_id?: string } | undefined)?.conversation_id;
    if (conv && eventsOf[conv] && agentId === 'full') {
      eventsOf[conv].push(r.body.event_id);
    }
    return { run_id: r.body.run_id as string, event_id: r.body.event_id as string };
  };
  const inConv = (conversation_id: string) => ({ conversation: { conversation_id } });
  /** A completed echo run; `agentId`'s conversation (a conversation is agent + workspace + id + thread). */
  const echo = async (conversation_id: string, text: string, extra: Record<string, unknown> = {}, agentId = 'full') => {
    const posted = await post(agentId, text, { ...inConv(conversation_id), ...extra });
    expect((await host.sse(posted.run_id)).at(-1)!.event).toBe('run.completed');
    return { ...posted, text };
  };
  const stateEntries = async () => (await dbRows(db, 'state_entries')).length;
  const storageEntries = async () => (await dbRows(db, 'storage_entries')).length;

  beforeAll(async () => {
    await host.start();
    demo = await startDemoRunner(host);
    other = await startDemoRunner(host, { author: 'other', name: 'bot' });
    api = new HostApiClient(host.grpc, demo.token);
    await agent('echo', demo.runnerId, { mode: 'echo' });
    // 'full' echoes first (its earlier messages), then stalls (the runs under test).
    await agent('full', demo.runnerId, { mode: 'echo' }, FULL_POLICY);
    await agent('full2', demo.runnerId, STALL, FULL_POLICY);
    await agent('restricted', demo.runnerId, STALL, RESTRICTED_POLICY);
    await agent('foreign', other.runnerId, STALL);

    // Earlier messages of agent full: history and events exist before the runs under test start.
    for (const text of ECHO_TEXTS) {
      echoes.push(await echo(C1, text));
    }
    const image = await echo(C1, 'look at this picture', {
      input: {
        text: 'look at this picture',
        contents: [
          { type: 'text', text: 'look at this picture' },
          { type: 'image_base64', image_base64: BLOB },
        ],
      },
    });
    echoes.push(image);
    imageEvent = image.event_id;
    otherConvEvent = (await echo(C2, 'zulu secretword')).event_id;
    // A conversation with more than 100 events (and 200 rows): 100 echoed messages, then a stalled run.
    for (let i = 0; i < 100; i++) {
      await echo(C3, `long message number ${i}`);
    }
    const stall = await host.api('PUT', '/v1/admin/agents/full', {
      runner_id: demo.runnerId,
      runner_config: STALL,
      ...FULL_POLICY,
    });
    expect(stall.status).toBe(200);

    const full = await post('full', 'juliet kilo', {
      ...inConv(C1),
      subject: { subject_type: 'ticket', subject_id: 'T-1' },
    });
    run.full = full.run_id;
    fullEvent = full.event_id;
    run.full2 = (await post('full2', 'lima mike', inConv(C1))).run_id;
    run.restricted = (await post('restricted', 'november oscar', inConv(C1))).run_id;
    run.foreign = (await post('foreign', 'papa quebec', inConv(C1))).run_id;
    run.noconv = (await post('full', 'romeo', { conversation: undefined, actor: undefined })).run_id;
    run.inC2 = (await post('full', 'uniform', inConv(C2))).run_id;
    run.long = (await post('full', 'the long one', inConv(C3))).run_id;
  });

  afterAll(async () => {
    api?.close();
    await demo?.runner.stop();
    await other?.runner.stop();
    await host.stop();
    await db.drop();
  });

  describe('authorization snapshot (manifest ∩ agent policy ∩ run scope)', () => {
    it('grants the full agent what the manifest declares, with a verified hash', async () => {
      const a = await authz(run.full);
      expect(a.hash_verified).toBe(true);
      expect(a.authorization_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(a.authorization.available_apis).toEqual(ALL_APIS);
      // The agent allows workspace and binding storage too; the manifest only declares plugin.
      expect(a.authorization.storage).toEqual({ plugin: 'demo/echo' });
      expect(a.authorization.state.scopes).toEqual(['conversation', 'actor', 'subject', 'runner']);
      expect(a.authorization.prompt).toEqual(PROMPT);
      expect(a.authorization.resources).toEqual({ models: [], tools: [], knowledge_bases: [] });
      expect(a.authorization.deadline_at_ms).toBeNull();
      expect(a.authorization.scope).toMatchObject({
        agent_id: 'full',
        plugin_id: 'demo/echo',
        runner_id: demo.runnerId,
        conversation_id: C1,
        actor_id: 'u1',
        subject_id: 'T-1',
      });
    });

    it('narrows the restricted agent to its policy', async () => {
      const a = await authz(run.restricted);
      expect(a.hash_verified).toBe(true);
      expect(a.authorization.available_apis).toEqual(RESTRICTED_APIS);
      expect(a.authorization.storage).toEqual({});
      expect(a.authorization.state.scopes).toEqual([]);
      expect(a.authorization.prompt).toEqual([]);
    });

    it('drops what the run scope lacks (no conversation, no actor, no subject)', async () => {
      const a = await authz(run.noconv);
      expect(a.hash_verified).toBe(true);
      expect(a.authorization.available_apis).toEqual({
        ...ALL_APIS,
        history_page: false,
        history_search: false,
        event_page: false,
      });
      expect(a.authorization.state.scopes).toEqual(['runner']);
      const page = await api.call('HistoryPage', { run_id: run.noconv });
      await expectRefused(run.noconv, page, S.PERMISSION_DENIED, 'unauthorized', { action: 'history.page' });
      // state is on (runner scope), but a scope without an identity in this run is refused
      expect(ok(await api.call('StateSet', { run_id: run.noconv, scope: 'runner', key: 'k', value: 1 }))).toEqual({
        success: true,
      });
      for (const scope of ['conversation', 'actor', 'subject']) {
        await expectRefused(
          run.noconv,
          await api.call('StateGet', { run_id: run.noconv, scope, key: 'k' }),
          S.PERMISSION_DENIED,
          'unauthorized',
          { action: 'state.get', scope },
        );
      }
    });

    it("keeps no copy of the grants in the run row: the runner's context takes them from the snapshot", async () => {
      // docs/durability.md#what-a-run-row-holds: the run row keeps the resolved delivery context, the
      // conversation, the actor and the event's position; the available APIs and storage flags the runner got are the snapshot's
      // (run-context.builder.spec.ts), checked above through the authorization view.
      const rows = await dbRows(db, 'runs');
      const contextOf = (runId: string) => {
        const c = rows.find((r) => r.run_id === runId)!.context;
        return (typeof c === 'string' ? JSON.parse(c) : c) as Record<string, any>;
      };
      for (const id of [run.full, run.restricted]) {
        expect(Object.keys(contextOf(id)).sort()).toEqual(['actor', 'context', 'conversation', 'delivery']);
        expect(contextOf(id).context).toEqual({ event_seq: expect.any(Number) });
        expect(contextOf(id).delivery).toMatchObject({ surface: 'api' });
      }
      expect((await authz(run.restricted)).authorization.available_apis).toEqual(RESTRICTED_APIS);
    });
  });

  describe('HistoryPage', () => {
    const page = (req: Record<string, unknown> = {}) => api.call('HistoryPage', { run_id: run.full, ...req });
    /** The admin view of one agent's rows of a conversation id. */
    const transcript = async (conv: string, agentId = 'full') => {
      const r = await host.api('GET', `/v1/conversations/${conv}/transcript?agent_id=${agentId}&limit=100`);
      expect(r.status).toBe(200);
      return r.body.items as any[];
    };
    const view = (items: any[]) =>
      items.map((i) => ({ role: i.role, content: i.content, seq: i.seq, cursor: i.cursor, run_id: i.run_id }));

    it("returns the conversation's user and assistant rows, newest first, with string cursors", async () => {
      const res = ok(await page({ limit: 100 }));
      expect(res.has_more).toBe(false);
      expect(res.next_cursor).toBeUndefined();
      const items = res.items;
      expect(view(items)).toEqual(view(await transcript(C1)));
      expect(items.every((i) => i.conversation_id === C1 && ['user', 'assistant'].includes(i.role))).toBe(true);
      expect(items.every((i) => typeof i.cursor === 'string' && i.cursor === String(i.seq))).toBe(true);
      const seqs = items.map((i) => i.seq);
      expect(seqs).toEqual([...seqs].sort((a, b) => b - a));
      expect(res.prev_cursor).toBe(items[0].cursor);
      // each earlier message: the user row, then its run's one assistant row with the same text
      for (const e of echoes) {
        const user = items.filter((i) => i.role === 'user' && i.event_id === e.event_id);
        const assistant = items.filter((i) => i.role === 'assistant' && i.run_id === e.run_id);
        expect(user.map((i) => i.content)).toEqual([e.text]);
        expect(assistant.map((i) => i.content)).toEqual([e.text]);
        expect(assistant[0].seq).toBeGreaterThan(user[0].seq);
      }
      // this run's own user row is the newest row written before it started
      expect(items.find((i) => i.event_id === fullEvent)).toMatchObject({ role: 'user', content: 'juliet kilo' });
    });

    it('stores the image message without its base64 payload', async () => {
      const { items } = ok(await page({ limit: 100 }));
      const row = items.find((i) => i.event_id === imageEvent)!;
      expect(row.content_json).toMatchObject({
        role: 'user',
        content: [
          { type: 'text', text: 'look at this picture' },
          { type: 'image_base64', image_base64: null, content_redacted: true },
        ],
      });
      expect(JSON.stringify(items)).not.toContain(BLOB);
    });

    it('pages backward with before_cursor and forward with after_cursor', async () => {
      const all = ok(await page({ limit: 100 })).items;
      const walk = async (direction: string, cursorField: string) => {
        const seen: any[] = [];
        let cursor: string | undefined;
        for (let n = 0; n < 50; n++) {
          const res = ok(await page({ limit: 3, direction, ...(cursor ? { [cursorField]: cursor } : {}) }));
          expect(res.items.length).toBeLessThanOrEqual(3);
          seen.push(...res.items);
          if (!res.has_more) {
            expect(res.next_cursor).toBeUndefined();
            return seen;
          }
          expect(res.items).toHaveLength(3);
          expect(res.next_cursor).toBe(res.items[2].cursor);
          cursor = res.next_cursor;
        }
        throw new Error('did not reach the end');
      };
      expect(view(await walk('backward', 'before_cursor'))).toEqual(view(all));
      expect(view(await walk('forward', 'after_cursor'))).toEqual(view([...all].reverse()));
      // both bounds at once: the rows strictly between them
      const [newest, , , fourth] = all;
      const between = ok(await page({ before_cursor: newest.cursor, after_cursor: fourth.cursor }));
      expect(view(between.items)).toEqual(view(all.slice(1, 3)));
      // a cursor past the start gives an empty page
      expect(ok(await page({ before_cursor: '1' })).items).toEqual([]);
    });

    it('accepts its own conversation_id and refuses another conversation (PERMISSION_DENIED, audited)', async () => {
      expect(ok(await page({ conversation_id: C1, limit: 1 })).items).toHaveLength(1);
      await expectRefused(run.full, await page({ conversation_id: C2 }), S.PERMISSION_DENIED, 'unauthorized', {
        action: 'history.page',
        plugin_id: 'demo/echo',
        // Denied rows name the runner of the run they concern (issue 8 item 14).
        runner_id: 'plugin:demo/echo/default',
      });
    });

    it('caps limit at 100 and refuses a negative limit', async () => {
      const capped = ok(await api.call('HistoryPage', { run_id: run.long, limit: 500 }));
      expect(capped.items).toHaveLength(100);
      expect(capped.has_more).toBe(true);
      const more = (before_cursor?: string) => api.call('HistoryPage', { run_id: run.long, limit: 500, before_cursor });
      const second = ok(await more(capped.next_cursor));
      expect(second.items).toHaveLength(100);
      const rest = ok(await more(second.next_cursor));
      expect(rest.has_more).toBe(false);
      expect(rest.items.map((i) => [i.role, i.content, i.seq])).toEqual([['user', 'long message number 0', 1]]);
      // default page size: 50
      expect(ok(await api.call('HistoryPage', { run_id: run.long })).items).toHaveLength(50);
      const neg = await api.call('HistoryPage', { run_id: run.long, limit: -1 });
      expectError(neg, S.INVALID_ARGUMENT, 'invalid_argument');
      expect(await lastAudit(run.long)).toMatchObject({
        action: 'history.page',
        outcome: 'failed',
        error_code: 'invalid_argument',
      });
    });

    it('refuses malformed cursors and directions (INVALID_ARGUMENT, audited as failed)', async () => {
      for (const req of [{ before_cursor: 'abc' }, { after_cursor: '-1' }, { direction: 'sideways' }]) {
        expectError(await page(req), S.INVALID_ARGUMENT, 'invalid_argument');
        expect(await lastAudit(run.full)).toMatchObject({
          action: 'history.page',
          outcome: 'failed',
          error_code: 'invalid_argument',
        });
      }
    });

    it('is available to the restricted agent (history: [page]), which sees only its own conversation', async () => {
      const res = ok(await api.call('HistoryPage', { run_id: run.restricted, limit: 100 }));
      // Same conversation id as agent full's, another agent: another conversation.
      expect(res.items.map((i) => [i.role, i.content])).toEqual([['user', 'november oscar']]);
      expect(view(res.items)).toEqual(view(await transcript(C1, 'restricted')));
      expect(await lastAudit(run.restricted)).toMatchObject({
        action: 'history.page',
        outcome: 'allowed',
        error_code: null,
      });
    });
  });

  describe('HistorySearch', () => {
    const search = (query: string, extra: Record<string, unknown> = {}) =>
      api.call('HistorySearch', { run_id: run.full, query, ...extra });

    it('finds a word of an earlier message in this conversation, newest first', async () => {
      const res = ok(await search('bravo'));
      expect(res.query).toBe('bravo');
      expect(res.total_count).toBe(2);
      expect(res.items.map((i) => [i.role, i.content, i.conversation_id])).toEqual([
        ['assistant', 'alpha bravo charlie', C1],
        ['user', 'alpha bravo charlie', C1],
      ]);
      expect(typeof res.items[0].cursor).toBe('string');
      expect(ok(await search('bravo', { top_k: 1 })).items).toHaveLength(1);
      expect(await lastAudit(run.full)).toMatchObject({ action: 'history.search', outcome: 'allowed' });
    });

    it('does not find words of another conversation (which that conversation finds)', async () => {
      expect(ok(await search('secretword')).items).toEqual([]);
      const there = ok(await api.call('HistorySearch', { run_id: run.inC2, query: 'secretword' }));
      expect(there.items.map((i) => i.conversation_id)).toEqual([C2, C2]);
    });

    it('treats query syntax as words', async () => {
      expect(ok(await search('charlie) OR "* NEAR(')).items).toEqual([]);
      expect(ok(await search('"Charlie"')).items).toHaveLength(2);
    });

    it('refuses a filter naming another conversation, and an empty query', async () => {
      await expectRefused(
        run.full,
        await search('zulu', { filters: { conversation_id: C2 } }),
        S.PERMISSION_DENIED,
        'unauthorized',
        { action: 'history.search' },
      );
      expect(ok(await search('bravo', { filters: { conversation_id: C1 } })).items).toHaveLength(2);
      expectError(await search('  '), S.INVALID_ARGUMENT, 'invalid_argument');
      expect(await lastAudit(run.full)).toMatchObject({ outcome: 'failed', error_code: 'invalid_argument' });
    });

    it('refuses a 2 MiB query over the 1 MiB request limit (RESOURCE_EXHAUSTED payload_too_large)', async () => {
      await expectRefused(
        run.full,
        await search('q'.repeat(2 * 1024 * 1024)),
        S.RESOURCE_EXHAUSTED,
        'payload_too_large',
        {
          action: 'history.search',
        },
      );
    });

    it('is not granted to the restricted agent', async () => {
      await expectRefused(
        run.restricted,
        await api.call('HistorySearch', { run_id: run.restricted, query: 'bravo' }),
        S.PERMISSION_DENIED,
        'unauthorized',
        { action: 'history.search' },
      );
    });
  });

  describe('EventGet', () => {
    const get = (event_id: string, runId = run.full) => api.call('EventGet', { run_id: runId, event_id });

    it("returns this run's event", async () => {
      const { event: e } = ok(await get(fullEvent));
      expect(e).toMatchObject({
        event_id: fullEvent,
        event_type: 'message.received',
        source: 'api',
        conversation_id: C1,
        actor_id: 'u1',
        subject_type: 'ticket',
        subject_id: 'T-1',
        input_summary: 'juliet kilo',
        run_id: run.full,
      });
      expect(e.cursor).toBe(String(e.seq));
    });

    it('returns an earlier event of the same conversation, redacted', async () => {
      const { event: e } = ok(await get(imageEvent));
      expect(e).toMatchObject({ event_id: imageEvent, conversation_id: C1, input_summary: 'look at this picture' });
      expect(e.metadata).toMatchObject({
        input: { contents: [{ type: 'text' }, { type: 'image_base64', image_base64: null, content_redacted: true }] },
      });
      expect(JSON.stringify(e)).not.toContain(BLOB);
    });

    it("refuses another conversation's event (PERMISSION_DENIED, audited as denied)", async () => {
      await expectRefused(run.full, await get(otherConvEvent), S.PERMISSION_DENIED, 'unauthorized', {
        action: 'event.get',
      });
      // ...which a run of that conversation may read
      expect(ok(await get(otherConvEvent, run.inC2)).event.event_id).toBe(otherConvEvent);
    });

    it('answers NOT_FOUND for an unknown event and INVALID_ARGUMENT for an empty id', async () => {
      expectError(await get(randomUUID()), S.NOT_FOUND, 'not_found');
      expect(await lastAudit(run.full)).toMatchObject({
        action: 'event.get',
        outcome: 'failed',
        error_code: 'not_found',
      });
      expectError(await get(''), S.INVALID_ARGUMENT, 'invalid_argument');
    });

    it('is not granted to the restricted agent (events: [])', async () => {
      await expectRefused(run.restricted, await get(fullEvent, run.restricted), S.PERMISSION_DENIED, 'unauthorized', {
        action: 'event.get',
      });
    });
  });

  describe('EventPage', () => {
    const page = (req: Record<string, unknown> = {}, runId = run.full) =>
      api.call('EventPage', { run_id: runId, ...req });

    it("lists exactly this conversation's events, newest first, with string cursors", async () => {
      const res = ok(await page({ limit: 100 }));
      expect(res.has_more).toBe(false);
      const ids = res.items.map((e) => e.event_id);
      expect([...ids].sort()).toEqual([...eventsOf[C1]].sort());
      expect(ids).toContain(fullEvent);
      expect(ids).not.toContain(otherConvEvent);
      const cursors = res.items.map((e) => Number(e.cursor));
      expect(cursors).toEqual([...cursors].sort((a, b) => b - a));
      expect(res.items.every((e) => typeof e.cursor === 'string' && e.conversation_id === C1)).toBe(true);
    });

    it('pages with before_cursor, filters by type, and caps the limit at 100', async () => {
      const all = ok(await page({ limit: 100 })).items.map((e) => e.event_id);
      const first = ok(await page({ limit: 2 }));
      expect(first.has_more).toBe(true);
      expect(first.next_cursor).toBe(first.items[1].cursor);
      const second = ok(await page({ limit: 2, before_cursor: first.next_cursor }));
      expect([...first.items, ...second.items].map((e) => e.event_id)).toEqual(all.slice(0, 4));
      expect(ok(await page({ limit: 100, event_types: ['message.received'] })).items.map((e) => e.event_id)).toEqual(
        all,
      );
      expect(ok(await page({ event_types: ['reaction.added'] }))).toMatchObject({ items: [], has_more: false });
      const capped = ok(await page({ limit: 500 }, run.long));
      expect(capped.items).toHaveLength(100);
      expect(capped.has_more).toBe(true);
      const rest = ok(await page({ limit: 500, before_cursor: capped.next_cursor }, run.long));
      expect(rest.items.map((e) => e.input_summary)).toEqual(['long message number 0']);
      expect(rest.has_more).toBe(false);
    });

    it('refuses a malformed cursor or limit, and another conversation', async () => {
      expectError(await page({ before_cursor: 'abc' }), S.INVALID_ARGUMENT, 'invalid_argument');
      expect(await lastAudit(run.full)).toMatchObject({ action: 'event.page', outcome: 'failed' });
      expectError(await page({ limit: -1 }), S.INVALID_ARGUMENT, 'invalid_argument');
      await expectRefused(run.full, await page({ conversation_id: C2 }), S.PERMISSION_DENIED, 'unauthorized', {
        action: 'event.page',
      });
    });

    it('refuses more than 100 event types as INVALID_ARGUMENT naming event_types (40,000 answered INTERNAL)', async () => {
      // 40,000 types: past SQLite's 32,766 bound parameters of a statement, under the 1 MiB request limit.
      const types = (n: number) => Array.from({ length: n }, (_, i) => `t${i}`);
      const r = await page({ event_types: types(40_000) });
      expectError(r, S.INVALID_ARGUMENT, 'invalid_argument');
      expect(r.err?.details).toBe('event_types: at most 100 event types');
      expect(await lastAudit(run.full)).toMatchObject({ action: 'event.page', outcome: 'failed' });
      expect(ok(await page({ event_types: [...types(99), 'message.received'] })).items.length).toBeGreaterThan(0);
    });

    it('is not granted to the restricted agent', async () => {
      await expectRefused(run.restricted, await page({}, run.restricted), S.PERMISSION_DENIED, 'unauthorized', {
        action: 'event.page',
      });
    });
  });

  describe('StateGet / StateSet / StateDelete / StateList', () => {
    const at = (scope: string, key: string, runId = run.full) => ({ run_id: runId, scope, key });
    const get = async (scope: string, key: string, runId = run.full) =>
      ok(await api.call('StateGet', at(scope, key, runId))).value;
    const set = async (scope: string, key: string, value: any, runId = run.full) =>
      ok(await api.call('StateSet', { ...at(scope, key, runId), value }));

    it('round-trips JSON: set → get → list(prefix) → delete', async () => {
      const value = { n: 1.5, s: 'x', b: true, nil: null, arr: [1, 'a', { z: false }], obj: { deep: { x: -2 } } };
      expect(await set('conversation', 'prefs.theme', value)).toEqual({ success: true });
      expect(await get('conversation', 'prefs.theme')).toEqual(value);
      await set('conversation', 'prefs.lang', 'en');
      await set('conversation', 'misc', 42);
      const list = (req: Record<string, unknown>) => api.call('StateList', { ...at('conversation', ''), ...req });
      expect(ok(await list({ prefix: 'prefs.' }))).toEqual({ keys: ['prefs.lang', 'prefs.theme'], has_more: false });
      expect(ok(await list({ prefix: 'prefs.', limit: 1 }))).toEqual({ keys: ['prefs.lang'], has_more: true });
      expect(ok(await list({})).keys).toEqual(expect.arrayContaining(['misc', 'prefs.lang', 'prefs.theme']));
      expect(ok(await api.call('StateDelete', at('conversation', 'prefs.theme')))).toEqual({ success: true });
      expect(await get('conversation', 'prefs.theme')).toBeNull();
      expect(ok(await api.call('StateDelete', at('conversation', 'prefs.theme')))).toEqual({ success: false });
      expect(ok(await list({ prefix: 'prefs.' })).keys).toEqual(['prefs.lang']);
      expect((await auditLog(run.full)).slice(-3).map((r) => [r.action, r.scope, r.outcome])).toEqual([
        ['state.get', 'conversation', 'allowed'],
        ['state.delete', 'conversation', 'allowed'],
        ['state.list', 'conversation', 'allowed'],
      ]);
    });

    it('round-trips every JSON type, including falsy and empty values', async () => {
      for (const value of ['', 'text', 0, -1.25, 1e21, false, true, [], {}, [null, [[]], { a: {} }]]) {
        await set('conversation', 'typed', value);
        expect({ value, got: await get('conversation', 'typed') }).toEqual({ value, got: value });
      }
    });

    it('keeps the four scopes apart', async () => {
      const scopes = ['conversation', 'actor', 'subject', 'runner'];
      for (const scope of scopes) {
        await set(scope, 'where', `in ${scope}`);
      }
      for (const scope of scopes) {
        expect(await get(scope, 'where')).toBe(`in ${scope}`);
      }
    });

    it('aliases the key conversation_id to external.conversation_id', async () => {
      await set('conversation', 'conversation_id', 'ext-42');
      expect(await get('conversation', 'external.conversation_id')).toBe('ext-42');
      expect(await get('conversation', 'conversation_id')).toBe('ext-42');
      const keys = ok(await api.call('StateList', { ...at('conversation', ''), prefix: '' })).keys;
      expect(keys).toContain('external.conversation_id');
      expect(keys).not.toContain('conversation_id');
      expect(ok(await api.call('StateDelete', at('conversation', 'conversation_id')))).toEqual({ success: true });
      expect(await get('conversation', 'external.conversation_id')).toBeNull();
    });

    it('accepts a value of exactly 256 KiB and refuses one byte more, storing nothing', async () => {
      const atLimit = 'x'.repeat(256 * 1024 - 2); // JSON "xxx…" = 262144 bytes
      await set('conversation', 'big', atLimit);
      const over = await api.call('StateSet', { ...at('conversation', 'big'), value: atLimit + 'y' });
      expectError(over, S.RESOURCE_EXHAUSTED, 'payload_too_large');
      // the guard let the call through; the state store refused the value
      expect(await lastAudit(run.full)).toMatchObject({
        action: 'state.set',
        outcome: 'failed',
        error_code: 'payload_too_large',
      });
      expect(await get('conversation', 'big')).toBe(atLimit);
      const fresh = await api.call('StateSet', { ...at('conversation', 'big.new'), value: { v: atLimit } });
      expectError(fresh, S.RESOURCE_EXHAUSTED, 'payload_too_large');
      expect(await get('conversation', 'big.new')).toBeNull();
      // over the 1 MiB request limit: refused by the guard before the store
      const huge = await api.call('StateSet', { ...at('conversation', 'big'), value: 'z'.repeat(2 * 1024 * 1024) });
      expectError(huge, S.RESOURCE_EXHAUSTED, 'payload_too_large');
      expect(await lastAudit(run.full)).toMatchObject({ action: 'state.set', outcome: 'denied' });
      expect(await get('conversation', 'big')).toBe(atLimit);
      ok(await api.call('StateDelete', at('conversation', 'big')));
    });

    it('refuses an unknown scope and bad keys (INVALID_ARGUMENT), changing nothing', async () => {
      const before = await stateEntries();
      for (const [scope, key] of [
        ['galaxy', 'k'],
        ['conversation', ''],
        ['conversation', 'k'.repeat(256)],
      ]) {
        expectError(
          await api.call('StateSet', { ...at(scope, key), value: 1 }),
          S.INVALID_ARGUMENT,
          'invalid_argument',
        );
        expect(await lastAudit(run.full)).toMatchObject({
          action: 'state.set',
          scope,
          outcome: 'failed',
          error_code: 'invalid_argument',
        });
      }
      expectError(await api.call('StateGet', at('galaxy', 'k')), S.INVALID_ARGUMENT, 'invalid_argument');
      expectError(await api.call('StateList', at('galaxy', '')), S.INVALID_ARGUMENT, 'invalid_argument');
      expect(await stateEntries()).toBe(before);
      await set('conversation', 'k'.repeat(255), 'longest key');
      expect(await get('conversation', 'k'.repeat(255))).toBe('longest key');
    });

    it('isolates two agents in the same conversation', async () => {
      await set('conversation', 'shared', 'from full');
      await set('actor', 'shared', 'from full');
      expect(await get('conversation', 'shared', run.full2)).toBeNull();
      expect(await get('actor', 'shared', run.full2)).toBeNull();
      await set('conversation', 'shared', 'from full2', run.full2);
      expect(await get('conversation', 'shared')).toBe('from full');
      expect(await get('conversation', 'shared', run.full2)).toBe('from full2');
      expect(ok(await api.call('StateList', { run_id: run.full2, scope: 'conversation' })).keys).toEqual(['shared']);
    });

    it('is not granted to the restricted agent (enable_state: false), changing nothing', async () => {
      const before = await stateEntries();
      const calls: [HostApiMethod, any, string][] = [
        ['StateGet', at('conversation', 'shared', run.restricted), 'state.get'],
        ['StateSet', { ...at('conversation', 'shared', run.restricted), value: 'restricted' }, 'state.set'],
        ['StateDelete', at('conversation', 'shared', run.restricted), 'state.delete'],
        ['StateList', { run_id: run.restricted, scope: 'conversation' }, 'state.list'],
      ];
      for (const [method, req, action] of calls) {
        await expectRefused(run.restricted, await api.call(method, req), S.PERMISSION_DENIED, 'unauthorized', {
          action,
          scope: 'conversation',
        });
      }
      expect(await stateEntries()).toBe(before);
      expect(await get('conversation', 'shared')).toBe('from full');
    });
  });

  describe('StorageGet / StorageSet / StorageDelete / StorageList', () => {
    const at = (key: string, runId = run.full, area = 'plugin') => ({ run_id: runId, area, key });
    const put = async (key: string, value: Buffer, runId = run.full) =>
      ok(await api.call('StorageSet', { ...at(key, runId), value }));
    const get = async (key: string, runId = run.full) => ok(await api.call('StorageGet', at(key, runId))).value;
    const list = async (req: Record<string, unknown>, runId = run.full, token = demo.token) =>
      ok(await api.call('StorageList', { run_id: runId, area: 'plugin', ...req }, { token }));

    it('round-trips bytes', async () => {
      const bytes = Buffer.concat([Buffer.from([0, 1, 2, 0xff, 0xfe, 0, 10, 13]), randomBytes(4096)]);
      expect(await put('blob/1', bytes)).toEqual({});
      expect(Buffer.compare(await get('blob/1'), bytes)).toBe(0);
      await put('blob/1', Buffer.from('second'));
      expect((await get('blob/1')).toString()).toBe('second');
      expect(await lastAudit(run.full)).toMatchObject({
        action: 'storage.get',
        resource: 'storage:plugin',
        scope: 'blob/1',
        outcome: 'allowed',
      });
    });

    it('lists keys by prefix, with a limit and has_more', async () => {
      for (const key of ['img/1', 'img/2', 'doc/1', 'IMG/3', 'img_x', 'img%y']) {
        await put(key, Buffer.from(key));
      }
      expect(await list({ prefix: 'img/' })).toEqual({ keys: ['img/1', 'img/2'], has_more: false });
      expect(await list({ prefix: 'img/', limit: 1 })).toEqual({ keys: ['img/1'], has_more: true });
      expect((await list({ prefix: 'img_' })).keys).toEqual(['img_x']);
      expect((await list({ prefix: 'img%' })).keys).toEqual(['img%y']);
      expect((await list({})).keys).toEqual(expect.arrayContaining(['blob/1', 'doc/1', 'img/1', 'img/2']));
    });

    it('deletes; a missing key is NOT_FOUND (audited as failed)', async () => {
      await put('doc/1', Buffer.from('doc'));
      expect(ok(await api.call('StorageDelete', at('doc/1')))).toEqual({ success: true });
      expect(ok(await api.call('StorageDelete', at('doc/1')))).toEqual({ success: false });
      expectError(await api.call('StorageGet', at('doc/1')), S.NOT_FOUND, 'not_found');
      expect(await lastAudit(run.full)).toMatchObject({
        action: 'storage.get',
        scope: 'doc/1',
        outcome: 'failed',
        error_code: 'not_found',
      });
      expectError(await api.call('StorageGet', at('never-set')), S.NOT_FOUND, 'not_found');
    });

    it("shares the plugin area between the plugin's runs and hides it from another plugin", async () => {
      expect((await get('img/1', run.full2)).toString()).toBe('img/1');
      const foreign = await api.call('StorageGet', at('img/1', run.foreign), { token: other.token });
      expectError(foreign, S.NOT_FOUND, 'not_found');
      expect((await list({}, run.foreign, other.token)).keys).not.toContain('img/1');
    });

    it('refuses area "x" (INVALID_ARGUMENT) and workspace/binding (not in the manifest), changing nothing', async () => {
      const before = await storageEntries();
      await expectRefused(
        run.full,
        await api.call('StorageSet', { ...at('k', run.full, 'x'), value: Buffer.from('v') }),
        S.INVALID_ARGUMENT,
        'invalid_argument',
        { action: 'storage.set', resource: 'storage:x' },
      );
      for (const area of ['workspace', 'binding']) {
        await expectRefused(
          run.full,
          await api.call('StorageSet', { ...at('k', run.full, area), value: Buffer.from('v') }),
          S.PERMISSION_DENIED,
          'unauthorized',
          { action: 'storage.set', resource: `storage:${area}` },
        );
        await expectRefused(
          run.full,
          await api.call('StorageList', at('', run.full, area)),
          S.PERMISSION_DENIED,
          'unauthorized',
          {
            action: 'storage.list',
          },
        );
      }
      expect(await storageEntries()).toBe(before);
    });

    it('refuses bad keys (INVALID_ARGUMENT)', async () => {
      for (const key of ['', 'k'.repeat(256), 'line\nbreak']) {
        expectError(
          await api.call('StorageSet', { ...at(key), value: Buffer.from('v') }),
          S.INVALID_ARGUMENT,
          'invalid_argument',
        );
        expect(await lastAudit(run.full)).toMatchObject({ action: 'storage.set', outcome: 'failed' });
      }
    });

    it('takes values beyond the general request limit, up to STORAGE_MAX_VALUE_BYTES', async () => {
      const big = randomBytes(2 * 1024 * 1024);
      await put('big', big);
      expect(Buffer.compare(await get('big'), big)).toBe(0);
      ok(await api.call('StorageDelete', at('big')));
    });

    it('is not granted to the restricted agent (allow_plugin_storage: false), changing nothing', async () => {
      const before = await storageEntries();
      const calls: [HostApiMethod, any, string][] = [
        ['StorageGet', at('img/1', run.restricted), 'storage.get'],
        ['StorageSet', { ...at('img/1', run.restricted), value: Buffer.from('restricted') }, 'storage.set'],
        ['StorageDelete', at('img/1', run.restricted), 'storage.delete'],
        ['StorageList', at('', run.restricted), 'storage.list'],
      ];
      for (const [method, req, action] of calls) {
        await expectRefused(run.restricted, await api.call(method, req), S.PERMISSION_DENIED, 'unauthorized', {
          action,
          resource: 'storage:plugin',
        });
      }
      expect(await storageEntries()).toBe(before);
      expect((await get('img/1')).toString()).toBe('img/1');
    });
  });

  describe('PromptGet / RunGet', () => {
    it("returns the agent's prompt", async () => {
      expect(ok(await api.call('PromptGet', { run_id: run.full }))).toEqual({ prompt: PROMPT });
      expect(await lastAudit(run.full)).toMatchObject({ action: 'prompt.get', outcome: 'allowed' });
    });

    it('refuses prompt_get when the agent has no prompt', async () => {
      await expectRefused(
        run.restricted,
        await api.call('PromptGet', { run_id: run.restricted }),
        S.PERMISSION_DENIED,
        'unauthorized',
        { action: 'prompt.get' },
      );
    });

    it('returns the run: running, no cancel requested, no deadline', async () => {
      for (const runId of [run.full, run.restricted]) {
        const res = ok(await api.call('RunGet', { run_id: runId }));
        expect(res).toMatchObject({ run_id: runId, status: 'running', cancel_requested: false });
        expect(res.deadline_at).toBeUndefined();
        expect(await lastAudit(runId)).toMatchObject({ action: 'run.get', outcome: 'allowed', plugin_id: 'demo/echo' });
      }
    });
  });

  describe('model, tool, knowledge and steering calls', () => {
    it('are refused (nothing is registered; steering_pull is off) and audited', async () => {
      const calls: [HostApiMethod, any, string, string | null][] = [
        [
          'InvokeModel',
          { model_id: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] },
          'model.invoke',
          'model:gpt-x',
        ],
        ['CountTokens', { model_id: 'gpt-x', messages: [] }, 'model.count_tokens', 'model:gpt-x'],
        ['Rerank', { model_id: 'rr', query: 'q', documents: ['a'] }, 'model.rerank', 'model:rr'],
        ['GetToolDetail', { tool_name: 'search' }, 'tool.detail', 'tool:search'],
        ['CallTool', { tool_name: 'search', parameters: { q: 'x' } }, 'tool.call', 'tool:search'],
        ['RetrieveKnowledge', { kb_id: 'kb-1', query_text: 'x' }, 'knowledge.retrieve', 'knowledge_base:kb-1'],
        ['SteeringPull', { mode: 'all' }, 'steering.pull', null],
      ];
      for (const [method, req, action, resource] of calls) {
        await expectRefused(
          run.full,
          await api.call(method, { run_id: run.full, ...req }),
          S.PERMISSION_DENIED,
          'unauthorized',
          {
            action,
            resource,
          },
        );
      }
      const stream = await api.streamModel({ run_id: run.full, model_id: 'gpt-x', messages: [] });
      expectError(stream, S.PERMISSION_DENIED, 'unauthorized');
      expect(await lastAudit(run.full)).toMatchObject({ action: 'model.stream', outcome: 'denied' });
    });
  });

  describe('identity and run checks, on every RPC', () => {
    const every = (runId: string): [HostApiMethod, any, string][] => [
      ['HistoryPage', { run_id: runId }, 'history.page'],
      ['HistorySearch', { run_id: runId, query: 'bravo' }, 'history.search'],
      ['EventGet', { run_id: runId, event_id: fullEvent }, 'event.get'],
      ['EventPage', { run_id: runId }, 'event.page'],
      ['StateGet', { run_id: runId, scope: 'conversation', key: 'probe' }, 'state.get'],
      ['StateSet', { run_id: runId, scope: 'conversation', key: 'probe', value: 'intruder' }, 'state.set'],
      ['StateDelete', { run_id: runId, scope: 'conversation', key: 'probe' }, 'state.delete'],
      ['StateList', { run_id: runId, scope: 'conversation' }, 'state.list'],
      ['StorageGet', { run_id: runId, area: 'plugin', key: 'probe' }, 'storage.get'],
      ['StorageSet', { run_id: runId, area: 'plugin', key: 'probe', value: Buffer.from('intruder') }, 'storage.set'],
      ['StorageDelete', { run_id: runId, area: 'plugin', key: 'probe' }, 'storage.delete'],
      ['StorageList', { run_id: runId, area: 'plugin' }, 'storage.list'],
      ['PromptGet', { run_id: runId }, 'prompt.get'],
      ['RunGet', { run_id: runId }, 'run.get'],
      ['InvokeModel', { run_id: runId, model_id: 'gpt-x' }, 'model.invoke'],
      ['CallTool', { run_id: runId, tool_name: 'search' }, 'tool.call'],
      ['RetrieveKnowledge', { run_id: runId, kb_id: 'kb-1', query_text: 'x' }, 'knowledge.retrieve'],
      ['SteeringPull', { run_id: runId }, 'steering.pull'],
    ];

    /** Seeds a probe value in the run's state and storage (as `token`), to check nothing changes. */
    const seedProbe = async (runId: string, token: string) => {
      ok(
        await api.call(
          'StateSet',
          { run_id: runId, scope: 'conversation', key: 'probe', value: 'original' },
          { token },
        ),
      );
      ok(
        await api.call(
          'StorageSet',
          { run_id: runId, area: 'plugin', key: 'probe', value: Buffer.from('original') },
          { token },
        ),
      );
    };
    const expectProbe = async (runId: string, token: string) => {
      const state = ok(await api.call('StateGet', { run_id: runId, scope: 'conversation', key: 'probe' }, { token }));
      expect(state.value).toBe('original');
      const bytes = ok(await api.call('StorageGet', { run_id: runId, area: 'plugin', key: 'probe' }, { token }));
      expect(bytes.value.toString()).toBe('original');
    };

    it('UNAUTHENTICATED without a token, with an invalid one, or with another scheme', async () => {
      await seedProbe(run.full, demo.token);
      const before = [await stateEntries(), await storageEntries()];
      for (const [method, req, action] of every(run.full)) {
        await expectRefused(
          run.full,
          await api.call(method, req, { token: null }),
          S.UNAUTHENTICATED,
          'unauthenticated',
          {
            action,
            plugin_id: null,
            runner_id: 'plugin:demo/echo/default',
          },
        );
      }
      for (const authorization of ['Bearer rhp_not-a-token', `Basic ${demo.token}`, 'Bearer ', demo.token]) {
        const r = await api.call('StateSet', every(run.full)[5][1], { authorization });
        await expectRefused(run.full, r, S.UNAUTHENTICATED, 'unauthenticated', {
          action: 'state.set',
          plugin_id: null,
        });
      }
      expect([await stateEntries(), await storageEntries()]).toEqual(before);
      await expectProbe(run.full, demo.token);
    });

    it("PERMISSION_DENIED with another plugin's token on this run", async () => {
      const before = [await stateEntries(), await storageEntries()];
      for (const [method, req, action] of every(run.full)) {
        await expectRefused(
          run.full,
          await api.call(method, req, { token: other.token }),
          S.PERMISSION_DENIED,
          'unauthorized',
          { action, plugin_id: 'other/bot', runner_id: 'plugin:demo/echo/default' },
        );
      }
      expect([await stateEntries(), await storageEntries()]).toEqual(before);
      await expectProbe(run.full, demo.token);
    });

    it("PERMISSION_DENIED with this plugin's token on another plugin's run", async () => {
      await seedProbe(run.foreign, other.token);
      const before = [await stateEntries(), await storageEntries()];
      for (const [method, req, action] of every(run.foreign)) {
        await expectRefused(run.foreign, await api.call(method, req), S.PERMISSION_DENIED, 'unauthorized', {
          action,
          plugin_id: 'demo/echo',
        });
      }
      expect([await stateEntries(), await storageEntries()]).toEqual(before);
      await expectProbe(run.foreign, other.token);
    });

    it("applies the checks in the guard's order", async () => {
      const huge = 'q'.repeat(2 * 1024 * 1024);
      const cases: [string, Promise<RpcResult<unknown>>, grpc.status, string, string][] = [
        // token before run: no token on an unknown run
        [
          'token',
          api.call('RunGet', { run_id: randomUUID() }, { token: null }),
          S.UNAUTHENTICATED,
          'unauthenticated',
          '',
        ],
        // run before identity: another plugin's token on an unknown run
        ['run', api.call('RunGet', { run_id: randomUUID() }, { token: other.token }), S.NOT_FOUND, 'not_found', ''],
        // identity before grant: another plugin calls an API this run is not granted
        [
          'identity',
          api.call('HistorySearch', { run_id: run.restricted, query: 'x' }, { token: other.token }),
          S.PERMISSION_DENIED,
          'unauthorized',
          'another plugin',
        ],
        // grant before payload size
        [
          'grant',
          api.call('HistorySearch', { run_id: run.restricted, query: huge }),
          S.PERMISSION_DENIED,
          'unauthorized',
          'history_search',
        ],
        // conversation scope before payload size
        [
          'scope',
          api.call('HistorySearch', { run_id: run.full, query: huge, filters: { conversation_id: C2 } }),
          S.PERMISSION_DENIED,
          'unauthorized',
          C2,
        ],
      ];
      for (const [what, call, code, xcode, details] of cases) {
        const r = await call;
        expect({ what, code: S[r.err?.code ?? 0], xcode: r.err?.xcode }).toEqual({ what, code: S[code], xcode });
        expect(r.err!.details).toContain(details);
      }
    });

    it('NOT_FOUND for an unknown run id (audited under that id), INVALID_ARGUMENT for none', async () => {
      const unknown = randomUUID();
      for (const [method, req] of every(unknown)) {
        expectError(await api.call(method, req), S.NOT_FOUND, 'not_found');
      }
      const rows = (await dbRows(db, 'audit_log')).filter((r) => r.run_id === unknown);
      expect(rows.map((r) => [r.action, r.outcome, r.error_code, r.plugin_id])).toEqual(
        every(unknown).map(([, , action]) => [action, 'denied', 'not_found', 'demo/echo']),
      );
      expectError(await api.call('RunGet', { run_id: '' }), S.INVALID_ARGUMENT, 'invalid_argument');
    });

    it('NOT_FOUND after the run ended (cancelled over HTTP)', async () => {
      // A conversation of its own: the agent's run in C1 is still active (one run per conversation).
      const ended = (await post('full', 'victor', inConv('C-victor'))).run_id;
      ok(await api.call('StateSet', { run_id: ended, scope: 'conversation', key: 'probe', value: 'before end' }));
      expect(ok(await api.call('RunGet', { run_id: ended })).status).toBe('running');
      await cancel(ended);
      const before = [await stateEntries(), await storageEntries()];
      for (const [method, req, action] of every(ended)) {
        await expectRefused(ended, await api.call(method, req), S.NOT_FOUND, 'not_found', { action });
      }
      expect([await stateEntries(), await storageEntries()]).toEqual(before);
      // the state it wrote is still there for the next run of the agent in this conversation
      const next = (await post('full', 'whiskey', inConv('C-victor'))).run_id;
      expect(ok(await api.call('StateGet', { run_id: next, scope: 'conversation', key: 'probe' })).value).toBe(
        'before end',
      );
      await cancel(next);
    });

    it('reports cancel_requested while a cancel is pending', async () => {
      await agent('deaf', demo.runnerId, { mode: 'ignore_cancel', timeout: 0 }, FULL_POLICY);
      const deaf = (await post('deaf', 'xray', inConv(C1))).run_id;
      const cancelled = host.api('POST', `/v1/runs/${deaf}/cancel`, {});
      await waitFor('cancel requested', async () => {
        const r = await api.call('RunGet', { run_id: deaf });
        return r.res?.cancel_requested;
      });
      expect((await cancelled).body.status).toBe('cancelled');
      expectError(await api.call('RunGet', { run_id: deaf }), S.NOT_FOUND, 'not_found');
    });
  });

  describe('run deadline', () => {
    it('a run with timeout: 2 answers until its deadline, then ends: calls are NOT_FOUND', async () => {
      await agent('deadline', demo.runnerId, { mode: 'stall', timeout: 2 }, FULL_POLICY);
      const runId = (await post('deadline', 'yankee', inConv(C1))).run_id;
      const deadline = (await authz(runId)).authorization.deadline_at_ms;
      expect(deadline).toEqual(expect.any(Number));
      const res = ok(await api.call('RunGet', { run_id: runId }));
      expect(res).toMatchObject({ status: 'running', deadline_at: deadline / 1000 });
      // the run ends at its deadline (the host times it out), so no call can come after it
      expect((await host.sse(runId)).at(-1)!.data.data).toMatchObject({ code: 'runner.timeout' });
      expect((await host.api('GET', `/v1/runs/${runId}`)).body.status).toBe('timeout');
      await expectRefused(runId, await api.call('RunGet', { run_id: runId }), S.NOT_FOUND, 'not_found', {
        action: 'run.get',
      });
      await expectRefused(
        runId,
        await api.call('StateGet', { run_id: runId, scope: 'conversation', key: 'k' }),
        S.NOT_FOUND,
        'not_found',
        { action: 'state.get' },
      );
    });
  });

  describe('agent edits during an active run', () => {
    it("change nothing for the run's authorization, hash or allowed calls; new runs get the edit", async () => {
      await agent('editable', demo.runnerId, STALL, FULL_POLICY);
      const runId = (await post('editable', 'zebra crossing', inConv(C1))).run_id;
      const before = await authz(runId);
      const put = await host.api('PUT', '/v1/admin/agents/editable', {
        runner_id: demo.runnerId,
        runner_config: STALL,
        ...RESTRICTED_POLICY,
        resource_policy: { ...RESTRICTED_POLICY.resource_policy, prompt: [] },
      });
      expect(put.status).toBe(200);
      expect(put.body.version).toBe(2);
      const after = await authz(runId);
      expect(after).toEqual(before);
      expect(after.hash_verified).toBe(true);
      // still allowed, with the grants frozen at admission
      expect(ok(await api.call('PromptGet', { run_id: runId })).prompt).toEqual(PROMPT);
      expect(ok(await api.call('HistorySearch', { run_id: runId, query: 'zebra' })).items).toHaveLength(1);
      const own = ok(await api.call('EventPage', { run_id: runId })).items.map((e) => e.event_id);
      expect(own).toHaveLength(1);
      expect(ok(await api.call('EventGet', { run_id: runId, event_id: own[0] })).event.event_id).toBe(own[0]);
      // agent full's event in the same conversation id is another conversation's
      expectError(
        await api.call('EventGet', { run_id: runId, event_id: fullEvent }),
        S.PERMISSION_DENIED,
        'unauthorized',
      );
      ok(await api.call('StateSet', { run_id: runId, scope: 'actor', key: 'edited', value: 1 }));
      expect(ok(await api.call('StateGet', { run_id: runId, scope: 'actor', key: 'edited' })).value).toBe(1);
      ok(await api.call('StorageSet', { run_id: runId, area: 'plugin', key: 'edited/1', value: Buffer.from('x') }));
      const listed = ok(await api.call('StorageList', { run_id: runId, area: 'plugin', prefix: 'edited/' }));
      expect(listed.keys).toEqual(['edited/1']);
      // a run started after the edit gets the restricted grants
      // Another thread: the first run of this conversation is still active (one run per conversation).
      const next = (await post('editable', 'zebra two', { conversation: { conversation_id: C1, thread_id: 'edit-2' } }))
        .run_id;
      expect((await authz(next)).authorization.available_apis).toEqual(RESTRICTED_APIS);
      await expectRefused(next, await api.call('PromptGet', { run_id: next }), S.PERMISSION_DENIED, 'unauthorized', {
        action: 'prompt.get',
      });
      await cancel(runId);
      await cancel(next);
    });
  });

  describe('transcript', () => {
    it('an echo run (deltas + message.completed) leaves exactly one assistant row with the full text', async () => {
      const r = await echo(C1, 'one two three four five', {}, 'echo');
      const rows = (await host.api('GET', `/v1/conversations/${C1}/transcript?limit=100`)).body.items.filter(
        (i: any) => i.run_id === r.run_id,
      );
      expect(rows.map((i: any) => [i.role, i.content])).toEqual([['assistant', 'one two three four five']]);
    });

    // A streaming-only run (deltas, then run.completed without message.completed) cannot be made
    // with the demo runner: no mode does that. transcript.e2e-spec.ts covers it with a
    // hand-driven plugin.
  });

  describe('secrets and blobs at rest (runs last)', () => {
    const secrets = () => ({
      'demo plugin token': demo.token,
      'other plugin token': other.token,
      'admin API key': ADMIN_KEY,
      'base64 image': BLOB,
    });
    const leaks = async (tables: string[]) => {
      const found: string[] = [];
      for (const table of tables) {
        const text = JSON.stringify(await dbRows(db, table));
        for (const [what, secret] of Object.entries(secrets())) {
          if (text.includes(secret)) {
            found.push(`${what} in ${table}`);
          }
        }
      }
      return found;
    };

    it('the audit log has a row for every call of the suite, with names and ids only', async () => {
      const rows = await dbRows(db, 'audit_log');
      expect(rows.length).toBeGreaterThan(200);
      expect(new Set(rows.map((r) => r.outcome))).toEqual(new Set(['allowed', 'denied', 'failed']));
      expect(JSON.stringify(rows)).not.toContain('intruder');
    });

    it('no plugin token, admin key or base64 blob in events, event_log, audit_log, run_results, transcript', async () => {
      expect(await leaks(['events', 'event_log', 'audit_log', 'run_results', 'transcript'])).toEqual([]);
    });

    it('no plugin token, admin key or base64 blob in runs', async () => {
      expect(await leaks(['runs'])).toEqual([]);
    });

    it('no plugin token, admin key or base64 blob in the host log', async () => {
      // The whole log read (the last test of the host: it is stopped and its pipes closed), so that
      // the absence means something — a line still in the pipe would pass unseen.
      await host.stop();
      await host.proc.closed;
      const logs = host.proc.logs();
      expect(Object.entries(secrets()).filter(([, s]) => logs.includes(s))).toEqual([]);
    });
  });
});

describe('host API limits on a host with low limits', () => {
  const db = new TestDatabase();
  const host = new Host(db, {
    HOSTAPI_CALLS_PER_SECOND: '1',
    HOSTAPI_BURST: '3',
    HOSTAPI_MAX_PAYLOAD_BYTES: '65536',
    STORAGE_MAX_VALUE_BYTES: '65536',
  });
  const { auditLog, expectRefused, agent } = hostTools(host);
  let demo: { runner: Proc; runnerId: string; token: string };
  let api: HostApiClient;

  /** A fresh stalled run: each run has its own rate-limit bucket (burst 3). */
  const start = async () => {
    const r = await host.api('POST', '/v1/events', event('limited', 'hello'));
    expect(r.status).toBe(202);
    return r.body.run_id as string;
  };

  beforeAll(async () => {
    await host.start();
    demo = await startDemoRunner(host);
    api = new HostApiClient(host.grpc, demo.token);
    await agent('limited', demo.runnerId, STALL);
  });

  afterAll(async () => {
    api?.close();
    await demo?.runner.stop();
    await host.stop();
    await db.drop();
  });

  it('refuses the 4th rapid call with RESOURCE_EXHAUSTED rate_limited, audited, and refills', async () => {
    const runId = await start();
    const results = await Promise.all([1, 2, 3, 4].map(() => api.call('RunGet', { run_id: runId })));
    expect(results.filter((r) => r.res).length).toBe(3);
    const limited = results.filter((r) => r.err);
    expect(limited).toHaveLength(1);
    expectError(limited[0], S.RESOURCE_EXHAUSTED, 'rate_limited');
    const rows = await auditLog(runId);
    expect(rows.map((r) => [r.action, r.outcome, r.error_code]).sort()).toEqual([
      ['run.get', 'allowed', null],
      ['run.get', 'allowed', null],
      ['run.get', 'allowed', null],
      ['run.get', 'denied', 'rate_limited'],
    ]);
    // the guard's order: token, identity and payload size are checked before the rate limit
    await expectRefused(
      runId,
      await api.call('RunGet', { run_id: runId }, { token: null }),
      S.UNAUTHENTICATED,
      'unauthenticated',
      {
        action: 'run.get',
      },
    );
    await expectRefused(
      runId,
      await api.call('HistorySearch', { run_id: runId, query: 'q'.repeat(70_000) }),
      S.RESOURCE_EXHAUSTED,
      'payload_too_large',
      { action: 'history.search' },
    );
    // one token per second comes back
    await waitFor('a token back', async () => (await api.call('RunGet', { run_id: runId })).res);
  });

  it('checks the request size against HOSTAPI_MAX_PAYLOAD_BYTES, before the state value limit', async () => {
    const runId = await start();
    await expectRefused(
      runId,
      await api.call('HistorySearch', { run_id: runId, query: 'q'.repeat(70_000) }),
      S.RESOURCE_EXHAUSTED,
      'payload_too_large',
      { action: 'history.search' },
    );
    await expectRefused(
      runId,
      await api.call('StateSet', { run_id: runId, scope: 'conversation', key: 'k', value: 'v'.repeat(100_000) }),
      S.RESOURCE_EXHAUSTED,
      'payload_too_large',
      { action: 'state.set' },
    );
    expect(ok(await api.call('StateGet', { run_id: runId, scope: 'conversation', key: 'k' })).value).toBeNull();
  });

  it('limits storage values to STORAGE_MAX_VALUE_BYTES (not the request limit), storing nothing over it', async () => {
    const runId = await start();
    const at = { run_id: runId, area: 'plugin', key: 'v' };
    const full = randomBytes(65536);
    ok(await api.call('StorageSet', { ...at, value: full }));
    const over = await api.call('StorageSet', { ...at, value: randomBytes(65537) });
    expectError(over, S.RESOURCE_EXHAUSTED, 'payload_too_large');
    expect((await auditLog(runId)).at(-1)).toMatchObject({
      action: 'storage.set',
      outcome: 'failed',
      error_code: 'payload_too_large',
    });
    expect(Buffer.compare(ok(await api.call('StorageGet', at)).value, full)).toBe(0);
  });
});
