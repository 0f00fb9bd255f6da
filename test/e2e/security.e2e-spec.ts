import * as grpc from '@grpc/grpc-js';
import { Client } from 'pg';
import { ADMIN_KEY, Host, TestDatabase, event, waitFor } from './harness';
import { HostApiClient, type RpcResult } from './host-api-client';
import { manifestFor, rawPkg, toStruct } from './raw-plugin';

/*
 * Security hardening over the real wires (issue 8): token rotation and plugin removal close live
 * sessions, malformed protobuf is a protocol error, a request a little above the host-API limit is
 * refused by the guard (audited), and the api-keys listing shows no part of ADMIN_API_KEY.
 */

jest.setTimeout(120_000);

const S = grpc.status;
const LIMIT = 2 * 1024 * 1024;

interface Stream {
  call: grpc.ClientDuplexStream<any, any>;
  messages: any[];
  ended: Promise<{ code: grpc.status; xcode: string | undefined; details: string }>;
}

/** One Connect stream: every host message is kept; `ended` resolves with the final status. */
function connect(grpcAddr: string, token: string): Stream {
  const client = new rawPkg.runnerhost.v1.RunnerGatewayService(grpcAddr, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${token}`);
  const call = client.Connect(md) as grpc.ClientDuplexStream<any, any>;
  const messages: any[] = [];
  call.on('data', (m: any) => messages.push(m));
  const ended = new Promise<{ code: grpc.status; xcode: string | undefined; details: string }>((resolve) => {
    call.on('error', (e: grpc.ServiceError) => {
      const x = e.metadata?.get('x-error-code')[0];
      resolve({ code: e.code, xcode: x === undefined ? undefined : String(x), details: e.details });
    });
    call.on('end', () => resolve({ code: S.OK, xcode: undefined, details: '' }));
  });
  return { call, messages, ended };
}

function hello(stream: Stream, author: string, name: string): void {
  stream.call.write({
    hello: {
      plugin_author: author,
      plugin_name: name,
      plugin_version: '1',
      protocol_version: '1',
      manifests: [toStruct(manifestFor(author, name))],
    },
  });
}

/** A unary call with raw request bytes (no serializer), as a broken or hostile client would send. */
function rawUnary(grpcAddr: string, path: string, bytes: Buffer, token: string): Promise<RpcResult<Buffer>> {
  const client = new grpc.Client(grpcAddr, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${token}`);
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      path,
      (b: Buffer) => b,
      (b: Buffer) => b,
      bytes,
      md,
      { deadline: new Date(Date.now() + 20_000) },
      (e, res) => {
        client.close();
        if (e) {
          const x = e.metadata?.get('x-error-code')[0];
          resolve({ err: { code: e.code, xcode: x === undefined ? undefined : String(x), details: e.details } });
        } else {
          resolve({ res: res! });
        }
      },
    );
  });
}

/** Field 1 with wire type 7: no protobuf decoder accepts it. */
const GARBAGE = Buffer.from([0x0f, 0xff, 0xff, 0xff]);

describe('security over real HTTP and gRPC', () => {
  const db = new TestDatabase();
  // The request limit above STORAGE_MAX_VALUE_BYTES + 1 MiB: grpc-js used to refuse a request a
  // little above it itself (no x-error-code, no audit row).
  const host = new Host(db, { HOSTAPI_MAX_PAYLOAD_BYTES: String(LIMIT), STORAGE_MAX_VALUE_BYTES: '65536' });

  const plugin = async (author: string, name: string) => {
    const reg = await host.api('POST', '/v1/admin/plugins', { author, name });
    expect(reg.status).toBe(201);
    const runnerId = `plugin:${author}/${name}/default`;
    const agent = await host.api('POST', '/v1/admin/agents', { agent_id: `${author}-${name}`, runner_id: runnerId });
    expect(agent.status).toBe(201);
    return { token: reg.body.token as string, runnerId, agentId: `${author}-${name}` };
  };

  /** Connects a raw plugin, then starts a run on it and waits until the plugin holds it. */
  const connectedWithRun = async (author: string, name: string, token: string, agentId: string) => {
    const stream = connect(host.grpc, token);
    hello(stream, author, name);
    await waitFor('welcome', () => Promise.resolve(stream.messages.some((m) => m.welcome)));
    const r = await host.api('POST', '/v1/events', event(agentId, 'hello'));
    expect(r.status).toBe(202);
    const runId = r.body.run_id as string;
    await waitFor('run delivered', () => Promise.resolve(stream.messages.some((m) => m.run)));
    return { stream, runId };
  };

  const audit = async (runId: string) =>
    (await host.api<{ items: any[] }>('GET', `/v1/admin/runs/${runId}/audit?limit=100`)).body.items;

  beforeAll(async () => {
    await host.start();
  });

  afterAll(async () => {
    await host.stop();
    await db.drop();
  });

  describe('plugin tokens (rotation and removal)', () => {
    it('rotating the token closes the live session, fails its run runner.disconnected, and the old token stops working at once', async () => {
      const p = await plugin('sec', 'rot');
      const { stream, runId } = await connectedWithRun('sec', 'rot', p.token, p.agentId);
      // A stream opened with the same token whose hello comes only after the rotation.
      const late = connect(host.grpc, p.token);
      await new Promise((r) => setTimeout(r, 300));
      const api = new HostApiClient(host.grpc, p.token);
      // The old token is in the host's 10 s authentication cache now.
      expect((await api.call('RunGet', { run_id: runId })).err).toBeUndefined();

      const rotated = await host.api('POST', '/v1/admin/plugins/sec/rot/token');
      expect(rotated.status).toBe(201);
      expect(await stream.ended).toMatchObject({ code: S.UNAVAILABLE, xcode: 'unavailable' });
      const last = (await host.sse(runId)).at(-1)!;
      expect(last.data).toMatchObject({ type: 'run.failed', source: 'host', data: { code: 'runner.disconnected' } });
      hello(late, 'sec', 'rot');
      expect(await late.ended).toMatchObject({ code: S.UNAUTHENTICATED, xcode: 'unauthenticated' });

      const old = await api.call('RunGet', { run_id: runId });
      expect(old.err).toMatchObject({ code: S.UNAUTHENTICATED, xcode: 'unauthenticated' });
      const again = connect(host.grpc, p.token);
      hello(again, 'sec', 'rot');
      expect(await again.ended).toMatchObject({ code: S.UNAUTHENTICATED, xcode: 'unauthenticated' });
      // The new token connects.
      const fresh = connect(host.grpc, rotated.body.token as string);
      hello(fresh, 'sec', 'rot');
      await waitFor('welcome with the new token', () => Promise.resolve(fresh.messages.some((m) => m.welcome)));
      fresh.call.end();
      api.close();
    });

    it('deleting the plugin closes its live session and fails its run runner.disconnected', async () => {
      const p = await plugin('sec', 'del');
      const { stream, runId } = await connectedWithRun('sec', 'del', p.token, p.agentId);
      const api = new HostApiClient(host.grpc, p.token);
      expect((await api.call('RunGet', { run_id: runId })).err).toBeUndefined();

      expect((await host.api('DELETE', '/v1/admin/plugins/sec/del')).status).toBe(204);
      expect(await stream.ended).toMatchObject({ code: S.UNAVAILABLE, xcode: 'unavailable' });
      const last = (await host.sse(runId)).at(-1)!;
      expect(last.data).toMatchObject({ type: 'run.failed', data: { code: 'runner.disconnected' } });
      expect((await api.call('RunGet', { run_id: runId })).err).toMatchObject({
        code: S.UNAUTHENTICATED,
        xcode: 'unauthenticated',
      });
      const runners = await host.api<any[]>('GET', '/v1/admin/runners');
      expect(runners.body.find((r) => r.runner_id === p.runnerId)?.state).not.toBe('connected');
      api.close();
    });
  });

  describe('malformed protobuf and transport limits', () => {
    let p: { token: string; agentId: string };
    let stream: Stream;
    let runId: string;
    let api: HostApiClient;

    beforeAll(async () => {
      p = await plugin('sec', 'wire');
      ({ stream, runId } = await connectedWithRun('sec', 'wire', p.token, p.agentId));
      api = new HostApiClient(host.grpc, p.token);
    });

    afterAll(() => {
      stream.call.end();
      api.close();
    });

    it.each(['RunGet', 'StateGet', 'HistorySearch', 'CallTool'])(
      'answers garbage bytes on %s with INVALID_ARGUMENT invalid_argument, naming the request',
      async (method) => {
        const r = await rawUnary(host.grpc, `/runnerhost.v1.HostApiService/${method}`, GARBAGE, p.token);
        expect(r.err).toMatchObject({ code: S.INVALID_ARGUMENT, xcode: 'invalid_argument' });
        expect(r.err!.details).toContain(`${method} request`);
      },
    );

    it('answers garbage bytes on the health check with INVALID_ARGUMENT', async () => {
      const r = await rawUnary(host.grpc, '/grpc.health.v1.Health/Check', GARBAGE, p.token);
      expect(r.err).toMatchObject({ code: S.INVALID_ARGUMENT, xcode: 'invalid_argument' });
    });

    it('answers a run_id of invalid UTF-8 with a protocol error carrying x-error-code', async () => {
      // RunGetRequest { run_id (field 1, length-delimited) = 0xff 0xfe 0x41 }
      const r = await rawUnary(
        host.grpc,
        '/runnerhost.v1.HostApiService/RunGet',
        Buffer.from([0x0a, 0x03, 0xff, 0xfe, 0x41]),
        p.token,
      );
      expect(r.err).toMatchObject({ code: S.NOT_FOUND, xcode: 'not_found' });
    });

    it('refuses a request a little above HOSTAPI_MAX_PAYLOAD_BYTES as payload_too_large, audited', async () => {
      const r = await api.call('HistorySearch', { run_id: runId, query: 'q'.repeat(LIMIT + 10_000) });
      expect(r.err).toMatchObject({ code: S.RESOURCE_EXHAUSTED, xcode: 'payload_too_large' });
      expect((await audit(runId)).at(-1)).toMatchObject({
        action: 'history.search',
        outcome: 'denied',
        error_code: 'payload_too_large',
      });
    });

    it('leaves a request over the transport limit (1 MiB above every host limit) to grpc-js, as documented', async () => {
      const before = (await audit(runId)).length;
      const r = await api.call('HistorySearch', { run_id: runId, query: 'q'.repeat(LIMIT + 1024 * 1024 + 10_000) });
      expect(r.err).toMatchObject({ code: S.RESOURCE_EXHAUSTED, xcode: undefined });
      expect((await audit(runId)).length).toBe(before);
    });

    it('closes a Connect stream that sends garbage with INVALID_ARGUMENT invalid_argument', async () => {
      const client = new grpc.Client(host.grpc, grpc.credentials.createInsecure());
      const own = await plugin('sec', 'garbage');
      const s = connect(host.grpc, own.token);
      hello(s, 'sec', 'garbage');
      await waitFor('welcome', () => Promise.resolve(s.messages.some((m) => m.welcome)));
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${own.token}`);
      // A second, raw stream (replacing the first) that sends a hello's worth of garbage.
      const raw = client.makeBidiStreamRequest(
        '/runnerhost.v1.RunnerGatewayService/Connect',
        (b: Buffer) => b,
        (b: Buffer) => b,
        md,
      );
      const status = new Promise<{ code: grpc.status; xcode: unknown }>((resolve) =>
        raw.on('error', (e: grpc.ServiceError) => resolve({ code: e.code, xcode: e.metadata?.get('x-error-code')[0] })),
      );
      raw.on('data', () => undefined);
      raw.write(GARBAGE);
      expect(await status).toEqual({ code: S.INVALID_ARGUMENT, xcode: 'invalid_argument' });
      // The first stream is still the plugin's session: garbage on another stream touched nothing.
      expect(s.messages.some((m) => m.welcome)).toBe(true);
      s.call.end();
      client.close();
    });
  });

  describe('env references (SECRET_ENV_ALLOWLIST, default RUNNERHOST_SECRET_*,OPENAI_API_KEY)', () => {
    it.each([
      [
        'mcp_http',
        { url: 'http://127.0.0.1:9/mcp', headers: { Authorization: { env: 'ADMIN_API_KEY' } } },
        'config.headers.Authorization.env',
      ],
      [
        'http',
        { tools: [{ name: 't', url: 'http://127.0.0.1:9/t' }], headers: { 'X-Key': { env: 'HOME' } } },
        'config.headers.X-Key.env',
      ],
      ['mcp_stdio', { command: 'node', env: { DB: { env: 'DATABASE_URL' } } }, 'config.env.DB.env'],
    ])(
      'refuses a %s source referencing a variable outside the allowlist (400 naming the field), storing nothing',
      async (kind, config, field) => {
        const r = await host.api('POST', '/v1/admin/tools/sources', {
          source_id: `bad-${kind.replace('_', '-')}`,
          kind,
          config,
          enabled: false,
        });
        expect(r.status).toBe(400);
        expect(r.body.error).toMatchObject({ code: 'invalid_argument', details: { field } });
        expect(r.body.error.message).toContain('SECRET_ENV_ALLOWLIST');
        expect((await host.api('GET', `/v1/admin/tools/sources/bad-${kind.replace('_', '-')}`)).status).toBe(404);
      },
    );

    it('refuses a model api_key_env outside the allowlist and takes one inside it', async () => {
      const model = (model_id: string, api_key_env: string) => ({
        model_id,
        kind: 'chat',
        base_url: 'http://127.0.0.1:9/v1',
        api_key_env,
        model_name: 'm',
      });
      for (const name of ['ADMIN_API_KEY', 'DATABASE_URL', 'HOME', 'RUNNERHOST_PLUGIN_TOKEN']) {
        const r = await host.api('POST', '/v1/admin/models', model(`m-${name.toLowerCase()}`, name));
        expect([name, r.status, r.body.error?.details?.field]).toEqual([name, 400, 'api_key_env']);
      }
      expect((await host.api('POST', '/v1/admin/models', model('m-ok', 'RUNNERHOST_SECRET_OPENAI'))).status).toBe(201);
      expect((await host.api('POST', '/v1/admin/models', model('m-openai', 'OPENAI_API_KEY'))).status).toBe(201);
    });
  });

  describe('listings and public endpoints', () => {
    it('shows no part of the operator-chosen ADMIN_API_KEY in the api-keys listing', async () => {
      const created = await host.api('POST', '/v1/admin/api-keys', { name: 'platform', role: 'platform' });
      expect(created.status).toBe(201);
      const list = await host.api<any[]>('GET', '/v1/admin/api-keys');
      expect(list.status).toBe(200);
      const envKey = list.body.find((k) => k.name === 'ADMIN_API_KEY');
      expect(envKey).toMatchObject({ role: 'admin', key_prefix: null });
      const text = JSON.stringify(list.body);
      expect(text).not.toContain(ADMIN_KEY.slice(0, 6));
      // A generated key keeps its prefix (a part of 256 random bits), to tell keys apart.
      const generated = list.body.find((k) => k.id === created.body.id);
      expect((created.body.key as string).startsWith(generated.key_prefix as string)).toBe(true);
    });

    it('answers /health/ready without the database error text (PostgreSQL: with the database refusing connections)', async () => {
      const ready = async () => {
        const res = await fetch(`${host.http}/health/ready`);
        return { status: res.status, body: await res.json() };
      };
      expect(await ready()).toMatchObject({
        status: 200,
        body: { status: 'ok', checks: { database: 'ok', grpc: 'ok', process: 'ok' } },
      });
      const url = await db.url();
      if (!url) {
        return; // SQLite in-process: its check cannot fail from outside (the unit test covers the shape).
      }
      const name = new URL(url).pathname.slice(1);
      const admin = new Client({ connectionString: url.replace(/\/[^/]*$/, '/test') });
      await admin.connect();
      try {
        await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
        await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, [name]);
        const down = await waitFor('readiness failing', async () => {
          const r = await ready();
          return r.status === 503 ? r : null;
        });
        expect(down.body).toEqual({
          status: 'unavailable',
          checks: { database: 'unreachable', grpc: 'ok', process: 'ok' },
        });
        // The details are in the host's log (written asynchronously).
        await waitFor('the logged reason', () =>
          Promise.resolve(host.proc.logs().includes('readiness: database check failed')),
        );
      } finally {
        await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
        await admin.end();
      }
      await waitFor('readiness back', async () => (await ready()).status === 200);
    });
  });
});
