import * as fc from 'fast-check';
import { concurrencyPolicySchema, deliveryPolicySchema, resourcePolicySchema, statePolicySchema } from '@libs/agents';
import { ADMIN_KEY, Host, TestDatabase, dbRows, event, startDemoRunner, waitFor, type Proc } from './harness';
import { deepJsonText } from './fuzz/arbitraries';
import { countChanges, httpViolation, RowCounter, rssMiB, RSS_GROWTH_LIMIT_MIB } from './fuzz/checks';
import { params } from './fuzz/config';
import { Findings, shape } from './fuzz/findings';
import { knownRunIds, routeGroups, type FuzzRequest } from './fuzz/http-routes';

jest.setTimeout(240_000);

// Property-based fuzzing of every HTTP route (issue 8): no 5xx, every 4xx is the error model and
// a 400 names the field, a refused request writes nothing, the host's memory stays bounded and
// a long run of the same plugin completes while all this goes on.

/** Tables a request could write (run_results and transcript are written by the long run meanwhile). */
const TABLES = [
  'api_keys',
  'plugins',
  'agents',
  'events',
  'runs',
  'event_log',
  'models',
  'tool_sources',
  'knowledge_bases',
  'kb_documents',
  'kb_chunks',
  'state_entries',
  'storage_entries',
];

describe('fuzz: HTTP', () => {
  const db = new TestDatabase();
  const host = new Host(db);
  const counter = new RowCounter(db, TABLES);
  let runner: Proc;
  let runnerId: string;
  let platformKey: string;
  let longRunId: string;
  let rssStart: number;
  /** The second workspace (docs/tenancy.md): its run, its secret text; the fuzzed platform key is default's. */
  const ws2 = { runId: '', conversationId: '', secret: `ws2-secret-${Math.random().toString(36).slice(2)}` };

  /** Everything of the second workspace a request could change: its run, agent, events, transcript. */
  async function ws2State(): Promise<string> {
    const [runs, agents, log, transcript, events] = await Promise.all(
      ['runs', 'agents', 'event_log', 'transcript', 'events'].map((t) => dbRows(db, t)),
    );
    return JSON.stringify([
      runs.filter((r) => r.run_id === ws2.runId).map((r) => [r.status, r.updated_at, r.workspace_id]),
      agents.filter((a) => a.agent_id === 'ws2-agent'),
      log.filter((r) => r.workspace_id === 'fuzz-ws2').length,
      transcript.filter((r) => r.workspace_id === 'fuzz-ws2').length,
      events.filter((r) => r.agent_id === 'ws2-agent').length,
    ]);
  }

  async function send(r: FuzzRequest): Promise<{ status: number; text: string }> {
    const authorization =
      r.auth === 'admin'
        ? `Bearer ${ADMIN_KEY}`
        : r.auth === 'platform'
          ? `Bearer ${platformKey}`
          : r.auth === 'garbage'
            ? 'Bearer \u00ff\u00fe'
            : undefined;
    const res = await fetch(`${host.http}${r.path}`, {
      method: r.method,
      headers: { ...r.headers, ...(authorization ? { authorization } : {}) },
      body: r.body,
      signal: AbortSignal.timeout(15_000),
    });
    return { status: res.status, text: await res.text() };
  }

  /** The fuzz properties for one request: records each broken one in `findings`. */
  async function check(findings: Findings, r: FuzzRequest): Promise<void> {
    const route = `${r.method} ${r.path.replace(/\?.*/, '').replace(/\/(?!v1|admin|health)[^/]+/g, '/:x')}`;
    const example = `${r.method} ${r.path.slice(0, 200)} auth=${r.auth} ${JSON.stringify(r.headers).slice(0, 120)} body=${(r.body ?? '').slice(0, 300)}`;
    const before = await counter.counts();
    let res: { status: number; text: string };
    try {
      res = await send(r);
    } catch (e) {
      findings.add(`${route}: no answer (${shape(String(e))})`, example);
      return;
    }
    const violation = httpViolation(res.status, res.text);
    if (violation) {
      findings.add(`${route}: ${shape(violation)}`, `${example} → ${res.text.slice(0, 300)}`);
    }
    if (r.auth === 'platform') {
      // The default workspace's key never sees anything of the second workspace: its run id only
      // echoed back in the 404 of a request that named it.
      const asked = `${r.path} ${r.body ?? ''}`.includes(ws2.runId);
      const leaked = [ws2.secret, 'ws2-agent', ws2.conversationId, ...(asked ? [] : [ws2.runId])].find((x) =>
        res.text.includes(x),
      );
      if (leaked !== undefined || (asked && res.status < 400)) {
        findings.add(`${route}: the platform key of default reached the second workspace (${res.status})`, example);
      }
    }
    if (res.status >= 400) {
      const changes = countChanges(before, await counter.counts());
      if (changes.length > 0) {
        findings.add(
          `${route}: ${res.status} but wrote rows (${changes.map((c) => c.split(' ')[0]).join(', ')})`,
          example,
        );
      }
    }
  }

  beforeAll(async () => {
    await host.start();
    await counter.open();
    ({ runner, runnerId } = await startDemoRunner(host));
    for (const [agentId, config] of [
      ['fuzz-agent', {}],
      ['fuzz-other', {}],
      ['fuzz-long', { chunk_delay_ms: 40 }],
    ] as const) {
      const r = await host.api('POST', '/v1/admin/agents', {
        agent_id: agentId,
        runner_id: runnerId,
        runner_config: config,
      });
      expect(r.status).toBe(201);
    }
    expect((await host.api('POST', '/v1/admin/knowledge-bases', { kb_id: 'fuzz-kb', name: 'kb' })).status).toBe(201);
    platformKey = (await host.api('POST', '/v1/admin/api-keys', { name: 'fuzz', role: 'platform' })).body.key;
    // The long run: 350 words, one delta every 40 ms (~14 s) — it must live through the fuzzing.
    const words = Array.from({ length: 350 }, (_, i) => `w${i}`).join(' ');
    const started = await host.api('POST', '/v1/events', event('fuzz-long', words));
    expect(started.status).toBe(202);
    longRunId = started.body.run_id;
    const finished = await host.api('POST', '/v1/events', event('fuzz-agent', 'a finished run'));
    knownRunIds.push(finished.body.run_id as string);
    // A second workspace with its own agent, key and finished run; its run id is fuzzed too.
    expect((await host.api('POST', '/v1/admin/workspaces', { workspace_id: 'fuzz-ws2' })).status).toBe(201);
    expect(
      (
        await host.api('POST', '/v1/admin/agents', {
          agent_id: 'ws2-agent',
          runner_id: runnerId,
          workspace_id: 'fuzz-ws2',
        })
      ).status,
    ).toBe(201);
    const ws2Key = (
      await host.api('POST', '/v1/admin/api-keys', { name: 'ws2', role: 'platform', workspace_ids: ['fuzz-ws2'] })
    ).body.key as string;
    const ws2Event = event('ws2-agent', ws2.secret);
    ws2.conversationId = ws2Event.conversation.conversation_id;
    const ws2Run = await host.api('POST', '/v1/events', ws2Event, ws2Key);
    expect(ws2Run.status).toBe(202);
    ws2.runId = ws2Run.body.run_id as string;
    await host.sse(ws2.runId);
    knownRunIds.push(ws2.runId);
    rssStart = rssMiB(host.proc.child.pid!);
  });

  afterAll(async () => {
    await counter.close();
    await runner?.stop();
    await host.stop();
    await db.drop();
  });

  // Regressions of issue 8 items 1, 5, 6, 7: the exact inputs of the report, through the real edge.
  it.each<[string, string, string | (() => string), string, RegExp]>([
    [
      'event without input (item 7)',
      '/v1/events',
      () => JSON.stringify({ ...event('fuzz-agent', 'x'), input: undefined }),
      'input',
      /input/,
    ],
    [
      'event.data 49 levels deep (item 1)',
      '/v1/events',
      () => JSON.stringify(event('fuzz-agent', 'x')).replace('"event":{', `"event":{"data":${deepJsonText(49)},`),
      'event.data.a',
      /32 levels/,
    ],
    [
      '20,000-level JSON (item 6)',
      '/v1/events',
      () =>
        JSON.stringify(event('fuzz-agent', 'x')).replace(
          '"input":{',
          `"metadata":${deepJsonText(20_000, true)},"input":{`,
        ),
      'metadata[0]',
      /32 levels/,
    ],
    [
      'NUL in event.data (item 5)',
      '/v1/events',
      () =>
        JSON.stringify(
          event('fuzz-agent', 'x', {
            event: { event_type: 'message.received', source: 'api', data: { foo: 'a\u0000' } },
          }),
        ),
      'event.data.foo',
      /NUL/,
    ],
    [
      'event_time 1e308 (item 5)',
      '/v1/events',
      () =>
        JSON.stringify(
          event('fuzz-agent', 'x', { event: { event_type: 'message.received', source: 'api', event_time: 1e308 } }),
        ),
      'event.event_time',
      /253402300799/,
    ],
    [
      'runner_config.timeout 1e300 (item 5)',
      '/v1/admin/agents',
      () =>
        JSON.stringify({
          agent_id: 'fuzz-timeout',
          runner_id: 'plugin:demo/echo/default',
          runner_config: { timeout: 1e300 },
        }),
      'runner_config.timeout',
      /0 to 31536000/,
    ],
  ])('refuses %s with 400 naming the field, and writes nothing', async (_name, path, bodyOf, field, message) => {
    const before = await counter.counts();
    const res = await host.api('POST', path, typeof bodyOf === 'string' ? bodyOf : bodyOf());
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_argument');
    expect(String(res.body.error.details.field).startsWith(field)).toBe(true);
    expect(res.body.error.message).toMatch(message);
    expect(countChanges(before, await counter.counts())).toEqual([]);
  });

  it.each([
    ['/v1/runs?cursor=1e23', 'cursor'],
    ['/v1/runs?cursor=%00', 'cursor'],
    ['/v1/runs?agent_id=a%00b', 'agent_id'],
    ['/v1/runs/abc%00/events', 'run_id'],
    ['/v1/conversations/c%00/transcript', 'conversation_id'],
    ['/v1/conversations/c/transcript?before=999999999999999', 'before'],
  ])('refuses GET %s with 400 naming %s', async (path, field) => {
    const res = await host.api('GET', path);
    expect(res.status).toBe(400);
    expect(res.body.error.details.field).toBe(field);
  });

  it('admits event.data 30 levels deep and carries it to the runner', async () => {
    const body = JSON.stringify(event('fuzz-agent', 'deep ok')).replace(
      '"event":{',
      `"event":{"data":${deepJsonText(29)},`,
    );
    const res = await host.api('POST', '/v1/events', body);
    expect(res.status).toBe(202);
    const run = await waitFor('deep run ends', async () => {
      const r = await host.api('GET', `/v1/runs/${res.body.run_id}`);
      return r.body.status !== 'running' && r.body.status !== 'pending' ? r.body : null;
    });
    expect(run.status).toBe('completed');
  });

  for (const [group, arb] of Object.entries(routeGroups('plugin:demo/echo/default'))) {
    it(`routes: ${group}`, async () => {
      const findings = new Findings();
      const ws2Before = await ws2State();
      await fc.assert(
        fc.asyncProperty(arb, (r) => check(findings, r)),
        params(group === 'events' ? 60 : group === 'inspection' ? 60 : 25),
      );
      expect(findings.list()).toEqual([]);
      // Nothing of the second workspace changed.
      expect(await ws2State()).toBe(ws2Before);
    });
  }

  it('the OpenAPI document types every grant field of the agent policies (issue 8 item 14)', async () => {
    const doc = (await (await fetch(`${host.http}/openapi.json`)).json()) as any;
    const agent = doc.components.schemas.CreateAgentDto.properties;
    for (const [field, schema] of [
      ['resource_policy', resourcePolicySchema],
      ['state_policy', statePolicySchema],
      ['delivery_policy', deliveryPolicySchema],
      ['concurrency_policy', concurrencyPolicySchema],
    ] as const) {
      const documented = agent[field].properties as Record<string, { type?: string; description?: string }>;
      expect(Object.keys(documented).sort()).toEqual(Object.keys(schema.shape).sort());
      for (const [name, prop] of Object.entries(documented)) {
        expect([name, typeof prop.type, typeof prop.description]).toEqual([name, 'string', 'string']);
      }
      expect(agent[field].additionalProperties).toBe(false);
    }
  });

  it('a body above the 5 MB limit is 413 naming the body', async () => {
    const res = await host.api('POST', '/v1/events', `{"agent_id":"${'x'.repeat(6 * 1024 * 1024)}"}`);
    expect(httpViolation(res.status, JSON.stringify(res.body))).toBeNull();
    expect(res.status).toBe(413);
  });

  it('the long run of the same plugin completed untouched, and the host memory stayed bounded', async () => {
    const run = await waitFor(
      'long run ends',
      async () => {
        const r = await host.api('GET', `/v1/runs/${longRunId}`);
        return r.body.status === 'running' || r.body.status === 'pending' ? null : r.body;
      },
      60_000,
    );
    expect(run.status).toBe('completed');
    expect((await host.api('GET', '/health/live')).status).toBe(200);
    const rss = rssMiB(host.proc.child.pid!);
    expect(rss - rssStart).toBeLessThan(RSS_GROWTH_LIMIT_MIB);
  });
});
