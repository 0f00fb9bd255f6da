import { randomBytes, randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { Client } from 'pg';
import {
  Host,
  TestDatabase,
  dbRows,
  event,
  launchDemoRunner,
  runnerConnected,
  startDemoRunner,
  waitFor,
  type Proc,
} from './harness';
import { HostApiClient, type RpcResult } from './host-api-client';
import { RawPlugin, manifestFor } from './raw-plugin';

/*
 * Issue 17 item 4 (second half), docs/scale-out.md#everything-from-anywhere-host-api-admin-writes-duplicates:
 * two host processes (A, B) on one PostgreSQL database. The runner's Connect stream is held by B;
 * its unary host-API calls are made here by a grpc-js client with the plugin's token (as the
 * runner would: docs/protocol.md#host-api) against A, which does not own the run. Admin writes
 * at A are seen by admissions at B as soon as A answered; one event posted to both at once makes
 * one run. Always PostgreSQL: a second process on one SQLite file refuses to start.
 */

jest.setTimeout(180_000);

/** This file's database is PostgreSQL whatever E2E_DATABASE says. */
class PostgresDatabase extends TestDatabase {
  override async url(): Promise<string | undefined> {
    const before = process.env.E2E_DATABASE;
    process.env.E2E_DATABASE = 'postgres';
    try {
      return await super.url();
    } finally {
      if (before === undefined) {
        delete process.env.E2E_DATABASE;
      } else {
        process.env.E2E_DATABASE = before;
      }
    }
  }
}

const S = grpc.status;
const STALL = { mode: 'stall', timeout: 0 };
const KEY = `sk-scripted-${randomBytes(20).toString('hex')}`;
const ENV = { SCRIPTED_KEY: KEY, SECRET_ENV_ALLOWLIST: 'SCRIPTED_KEY' };

interface AuditRow {
  action: string;
  outcome: 'allowed' | 'denied' | 'failed';
  error_code: string | null;
  plugin_id: string | null;
  runner_id: string | null;
}

function expectError(r: RpcResult<unknown>, code: grpc.status, xcode: string): void {
  const got = r.err ? { code: S[r.err.code], xcode: r.err.xcode } : { res: r.res };
  expect(got).toEqual({ code: S[code], xcode });
}

function ok<T>(r: RpcResult<T>): T {
  if (r.err) {
    throw new Error(`expected success, got ${S[r.err.code]} (${r.err.xcode}): ${r.err.details}`);
  }
  return r.res;
}

describe('everything from anywhere: host API, admin writes, duplicates (two processes, one PostgreSQL)', () => {
  const db = new PostgresDatabase();
  const a = new Host(db, ENV);
  const b = new Host(db, ENV);
  let demo: { runner: Proc; runnerId: string; token: string };
  let apiA: HostApiClient;
  let apiB: HostApiClient;

  const agent = async (host: Host, agentId: string, body: Record<string, unknown>, method = 'POST') => {
    const r = await host.api(method, method === 'POST' ? '/v1/admin/agents' : `/v1/admin/agents/${agentId}`, {
      ...(method === 'POST' ? { agent_id: agentId } : {}),
      ...body,
    });
    expect(r.status).toBe(method === 'POST' ? 201 : 200);
  };
  const post = async (host: Host, agentId: string) => {
    const r = await host.api('POST', '/v1/events', event(agentId, 'hello there'));
    expect(r.status).toBe(202);
    return r.body.run_id as string;
  };
  const statusAt = async (host: Host, runId: string) => (await host.api('GET', `/v1/runs/${runId}`)).body.status;
  const audit = async (host: Host, runId: string): Promise<AuditRow[]> => {
    const r = await host.api<{ items: AuditRow[] }>('GET', `/v1/admin/runs/${runId}/audit?limit=100`);
    expect(r.status).toBe(200);
    return r.body.items;
  };
  const authorization = async (host: Host, runId: string) => {
    const r = await host.api('GET', `/v1/admin/runs/${runId}/authorization`);
    expect(r.status).toBe(200);
    return r.body.authorization;
  };

  beforeAll(async () => {
    await a.start();
    await b.start();
    demo = await startDemoRunner(b);
    apiA = new HostApiClient(a.grpc, demo.token);
    apiB = new HostApiClient(b.grpc, demo.token);
    // Agents are written at A; B admits for them (the runner is held by B).
    await agent(a, 'stall', {
      runner_id: demo.runnerId,
      runner_config: STALL,
      resource_policy: { allow_plugin_storage: true, prompt: [{ role: 'system', content: 'be brief' }] },
      state_policy: { state_scopes: ['conversation'] },
    });
    await agent(a, 'narrow', {
      runner_id: demo.runnerId,
      runner_config: STALL,
      resource_policy: { history: ['page'], events: [], allow_plugin_storage: false },
      state_policy: { enable_state: false },
    });
    await agent(a, 'echo', { runner_id: demo.runnerId, runner_config: { mode: 'echo' } });
  });

  afterAll(async () => {
    apiA?.close();
    apiB?.close();
    await demo?.runner.stop();
    await a.stop();
    await b.stop();
    await db.drop();
  });

  describe('host API at a process that does not own the run', () => {
    it('an allowed call is served and audited `allowed` at A, with the same data as at the owner', async () => {
      const runId = await post(b, 'stall');
      await waitFor('run running', async () => (await statusAt(a, runId)) === 'running');

      const got = ok(await apiA.call('RunGet', { run_id: runId }));
      expect(got).toMatchObject({ run_id: runId, status: 'running', cancel_requested: false });
      expect((await audit(a, runId)).at(-1)).toMatchObject({
        action: 'run.get',
        outcome: 'allowed',
        error_code: null,
        plugin_id: 'demo/echo',
        runner_id: demo.runnerId,
      });
      // Written at A, read at B (the owner) and back: one truth.
      expect(
        ok(await apiA.call('StateSet', { run_id: runId, scope: 'conversation', key: 'k', value: { n: 1 } })),
      ).toEqual({ success: true });
      expect(ok(await apiB.call('StateGet', { run_id: runId, scope: 'conversation', key: 'k' })).value).toEqual({
        n: 1,
      });
      expect(ok(await apiA.call('PromptGet', { run_id: runId })).prompt).toEqual([
        { role: 'system', content: 'be brief' },
      ]);
      expect((await audit(a, runId)).map((r) => [r.action, r.outcome])).toEqual([
        ['run.get', 'allowed'],
        ['state.set', 'allowed'],
        ['state.get', 'allowed'],
        ['prompt.get', 'allowed'],
      ]);
    });

    it('an ungranted call is refused `unauthorized` and audited `denied` at A, as at the owner', async () => {
      const runId = await post(b, 'narrow');
      await waitFor('run running', async () => (await statusAt(a, runId)) === 'running');
      const atA = await apiA.call('StateGet', { run_id: runId, scope: 'conversation', key: 'k' });
      const atB = await apiB.call('StateGet', { run_id: runId, scope: 'conversation', key: 'k' });
      expectError(atA, S.PERMISSION_DENIED, 'unauthorized');
      expectError(atB, S.PERMISSION_DENIED, 'unauthorized');
      const rows = await audit(a, runId);
      expect(rows.map((r) => [r.action, r.outcome, r.error_code, r.runner_id])).toEqual([
        ['state.get', 'denied', 'unauthorized', demo.runnerId],
        ['state.get', 'denied', 'unauthorized', demo.runnerId],
      ]);
      // Another credential than the run's plugin: refused before anything else, at A as at B.
      expectError(
        await apiA.call('RunGet', { run_id: runId }, { token: 'not-a-token' }),
        S.UNAUTHENTICATED,
        'unauthenticated',
      );
      await b.api('POST', `/v1/runs/${runId}/cancel`, { reason: 'test done' });
    });

    it('an unknown run, and a run that ended (its grant cached at A), are refused `not_found` at A', async () => {
      const unknown = randomUUID();
      expectError(await apiA.call('RunGet', { run_id: unknown }), S.NOT_FOUND, 'not_found');
      // The admin audit route answers for known runs only: the row itself.
      expect(
        (await dbRows(db, 'audit_log')).filter((r) => r.run_id === unknown).map((r) => [r.outcome, r.error_code]),
      ).toEqual([['denied', 'not_found']]);

      const runId = await post(b, 'stall');
      await waitFor('run running', async () => (await statusAt(a, runId)) === 'running');
      ok(await apiA.call('RunGet', { run_id: runId })); // A now holds the run's grant
      const cancelled = await b.api('POST', `/v1/runs/${runId}/cancel`, { reason: 'test done' });
      expect(cancelled.status).toBe(200);
      await waitFor('run ended', async () => (await statusAt(a, runId)) === 'cancelled');
      expectError(await apiA.call('RunGet', { run_id: runId }), S.NOT_FOUND, 'not_found');
      expectError(
        await apiA.call('StateSet', { run_id: runId, scope: 'conversation', key: 'late', value: 1 }),
        S.NOT_FOUND,
        'not_found',
      );
      expect((await audit(a, runId)).map((r) => [r.action, r.outcome, r.error_code])).toEqual([
        ['run.get', 'allowed', null],
        ['run.get', 'denied', 'not_found'],
        ['state.set', 'denied', 'not_found'],
      ]);
      expect((await dbRows(db, 'state_entries')).filter((r) => r.state_key === 'late')).toEqual([]);
    });
  });

  describe('admin writes at A, admission at B', () => {
    it('an agent policy changed at A is in force for a run admitted at B right after A answered', async () => {
      await agent(a, 'policy', {
        runner_id: demo.runnerId,
        runner_config: STALL,
        resource_policy: { allow_plugin_storage: true },
      });
      for (let round = 0; round < 5; round++) {
        const allowed = round % 2 === 0;
        if (round > 0) {
          await agent(
            a,
            'policy',
            { runner_id: demo.runnerId, runner_config: STALL, resource_policy: { allow_plugin_storage: allowed } },
            'PUT',
          );
        }
        // Twice at B: the first warms B's cache, the second must still see the write.
        for (let i = 0; i < 2; i++) {
          const runId = await post(b, 'policy');
          const snapshot = await authorization(b, runId);
          expect({ round, i, storage: snapshot.available_apis.storage }).toEqual({ round, i, storage: allowed });
          await b.api('POST', `/v1/runs/${runId}/cancel`, {});
        }
      }
    });

    it('a model deleted at A is never granted by a run admitted at B after A answered', async () => {
      const token = (await a.api('POST', '/v1/admin/plugins', { author: 'mdl', name: 'raw' })).body.token as string;
      const plugin = new RawPlugin(b.grpc, token);
      try {
        plugin.hello('mdl', 'raw', [manifestFor('mdl', 'raw', { permissions: { models: ['invoke'] } })]);
        expect((await plugin.next()).welcome.runners).toHaveLength(1);
        const model = {
          kind: 'chat',
          provider: 'openai',
          base_url: 'http://127.0.0.1:9',
          api_key_env: 'SCRIPTED_KEY',
          model_name: 'scripted-gpt',
          context_window: 1000,
        };
        for (let round = 0; round < 3; round++) {
          const modelId = `m-${round}`;
          expect((await a.api('POST', '/v1/admin/models', { model_id: modelId, ...model })).status).toBe(201);
          await agent(a, `modeled-${round}`, {
            runner_id: 'plugin:mdl/raw/default',
            resource_policy: { allowed_model_ids: [modelId] },
          });
          const granted = async () => {
            const r = await b.api('POST', '/v1/events', event(`modeled-${round}`, 'use the model'));
            expect(r.status).toBe(202);
            expect((await plugin.next()).run.context.run_id).toBe(r.body.run_id);
            const snapshot = await authorization(b, r.body.run_id as string);
            plugin.result(r.body.run_id as string, 'run.completed', { finish_reason: 'stop' }, 1);
            return (snapshot.resources.models as { model_id: string }[]).map((m) => m.model_id);
          };
          expect(await granted()).toEqual([modelId]); // B's catalogue now holds the model
          expect((await a.api('DELETE', `/v1/admin/models/${modelId}`)).status).toBe(204);
          expect(await granted()).toEqual([]);
        }
      } finally {
        plugin.close();
      }
    });
  });

  describe('duplicates posted to two processes at once', () => {
    let second: Proc;

    beforeAll(async () => {
      // A second session of the same plugin at A: both processes can admit for its runner.
      second = launchDemoRunner(a, demo.token);
      await runnerConnected(a, demo.runnerId);
    });

    afterAll(async () => {
      await second?.stop();
    });

    it('the same event id, and the same idempotency key, posted to A and B concurrently make one run each time', async () => {
      const rounds = 20;
      for (let i = 0; i < rounds; i++) {
        const byId = {
          ...event('echo', `dup ${i}`),
          event: { event_type: 'message.received', source: 'api', event_id: `dup-${i}-${randomUUID()}` },
        };
        const key = `key-${i}-${randomUUID()}`;
        const body = event('echo', `keyed ${i}`);
        const [idA, idB, keyA, keyB] = await Promise.all([
          a.api('POST', '/v1/events', byId),
          b.api('POST', '/v1/events', byId),
          a.api('POST', '/v1/events', body, undefined, { 'idempotency-key': key }),
          b.api('POST', '/v1/events', body, undefined, { 'idempotency-key': key }),
        ]);
        for (const [x, y] of [
          [idA, idB],
          [keyA, keyB],
        ]) {
          // One answer admitted it (202), the other is its replay (200); both name the same run.
          expect([x.status, y.status].sort()).toEqual([200, 202]);
          expect(x.body.run_id).toBeTruthy();
          expect(x.body.run_id).toBe(y.body.run_id);
          expect(x.body.event_id).toBe(y.body.event_id);
        }
      }
      const c = new Client({ connectionString: await db.url() });
      await c.connect();
      try {
        const { rows } = await c.query(
          `SELECT e."event_id", COUNT(r."run_id")::int AS "runs" FROM "events" e LEFT JOIN "runs" r ON r."event_id" = e."event_id"
            WHERE e."agent_id" = 'echo' GROUP BY e."event_id"`,
        );
        expect(rows).toHaveLength(2 * rounds);
        expect(rows.filter((r: { runs: number }) => r.runs !== 1)).toEqual([]);
      } finally {
        await c.end();
      }
    });
  });
});
