import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { toStruct } from './host-api-client';
import { Host, TestDatabase, logged, startDemoRunner, waitFor, type Proc } from './harness';

jest.setTimeout(60_000);

// An independent client: plain proto-loader on the .proto files, no code shared with the host.
const PROTO = path.resolve(__dirname, '..', '..', 'proto');
const def = protoLoader.loadSync(
  ['runnerhost/v1/gateway.proto', 'runnerhost/v1/host_api.proto', 'grpc/health/v1/health.proto'],
  { includeDirs: [PROTO], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true },
);
const pkg = grpc.loadPackageDefinition(def) as any;

function manifest(name: string, extra: Record<string, unknown> = {}) {
  return {
    id: `plugin:gw/raw/${name}`,
    name,
    label: { en_US: name },
    protocol_version: '1',
    capabilities: { streaming: true },
    permissions: {},
    config_schema: [],
    metadata: {},
    ...extra,
  };
}

/** Opens Connect with a token, sends hello, resolves with the first host message or the error status. */
function connect(grpcAddr: string, token: string | null, hello: Record<string, unknown>) {
  const client = new pkg.runnerhost.v1.RunnerGatewayService(grpcAddr, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  if (token) {
    md.set('authorization', `Bearer ${token}`);
  }
  const call = client.Connect(md);
  const first = new Promise<{ msg?: any; error?: grpc.ServiceError }>((resolve) => {
    call.on('data', (msg: any) => resolve({ msg }));
    call.on('error', (error: grpc.ServiceError) => resolve({ error }));
  });
  call.write({ hello });
  return { call, client, first };
}

describe('runner gateway over real gRPC', () => {
  const db = new TestDatabase();
  const host = new Host(db);
  let token: string;
  let runner: Proc | undefined;

  beforeAll(async () => {
    await host.start();
    token = (await host.api('POST', '/v1/admin/plugins', { author: 'gw', name: 'raw' })).body.token;
  });

  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await db.drop();
  });

  const hello = (manifests: unknown[]) => ({
    plugin_author: 'gw',
    plugin_name: 'raw',
    plugin_version: '1',
    protocol_version: '1',
    manifests: manifests.map((m) => toStruct(m as Record<string, unknown>)),
  });

  it('refuses a missing or wrong token with UNAUTHENTICATED', async () => {
    for (const t of [null, 'rhp_wrong']) {
      const { first, client } = connect(host.grpc, t, hello([manifest('default')]));
      const r = await first;
      expect(r.error?.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(r.error?.metadata.get('x-error-code')).toEqual(['unauthenticated']);
      client.close();
    }
  });

  it('refuses a hello that names another plugin', async () => {
    const { first, client } = connect(host.grpc, token, { ...hello([]), plugin_name: 'other' });
    expect((await first).error?.code).toBe(grpc.status.PERMISSION_DENIED);
    client.close();
  });

  it('skips bad manifests with a reason and keeps the good ones', async () => {
    const { first, call, client } = connect(
      host.grpc,
      token,
      hello([
        manifest('default'),
        manifest('extra-key', { colour: 'red' }),
        manifest('bad-perm', { permissions: { models: ['fly'] } }),
        manifest('wrong-id', { id: 'plugin:someone/else/wrong-id' }),
        manifest('second'),
      ]),
    );
    const { msg } = await first;
    expect(msg.welcome.runners.map((r: any) => r.runner_id)).toEqual(['plugin:gw/raw/default', 'plugin:gw/raw/second']);
    const rejected = Object.fromEntries(msg.welcome.rejected.map((r: any) => [r.name, r.reason]));
    expect(rejected['extra-key']).toContain('colour');
    expect(rejected['bad-perm']).toContain('manifest.permissions.models');
    expect(rejected['wrong-id']).toContain('manifest.id');
    const runners = await host.api<any[]>('GET', '/v1/admin/runners');
    expect(runners.body.filter((r) => r.plugin_id === 'gw/raw').map((r) => [r.name, r.state])).toEqual([
      ['default', 'connected'],
      ['second', 'connected'],
    ]);
    // Logged before the Welcome is sent, but on the host's stdout pipe, read apart from the gRPC stream.
    await logged(() => host.proc.logs(), 'manifest #1 (extra-key) skipped');
    call.end();
    await waitFor('disconnected', async () =>
      (await host.api<any[]>('GET', '/v1/admin/runners')).body
        .filter((r) => r.kind === 'plugin') // the built-in runner is always connected
        .every((r) => r.state === 'disconnected'),
    );
    client.close();
  });

  it('replaces the first connection when the same plugin connects again', async () => {
    const a = connect(host.grpc, token, hello([manifest('default')]));
    const welcomeA = (await a.first).msg.welcome;
    const closed = new Promise<grpc.ServiceError>((resolve) => a.call.on('error', resolve));
    const b = connect(host.grpc, token, hello([manifest('default')]));
    const welcomeB = (await b.first).msg.welcome;
    expect(welcomeB.session_id).not.toBe(welcomeA.session_id);
    expect((await closed).code).toBe(grpc.status.UNAVAILABLE);
    const runners = await host.api<any[]>('GET', '/v1/admin/runners');
    expect(runners.body.find((r) => r.runner_id === 'plugin:gw/raw/default').session_id).toBe(welcomeB.session_id);
    b.call.end();
    a.client.close();
    b.client.close();
  });

  it('serves grpc.health.v1, and refuses host API calls without a plugin token', async () => {
    const health = new pkg.grpc.health.v1.Health(host.grpc, grpc.credentials.createInsecure());
    const status = await new Promise<any>((resolve, reject) =>
      health.Check({ service: 'runnerhost.v1.RunnerGatewayService' }, (e: Error | null, r: any) =>
        e ? reject(e) : resolve(r),
      ),
    );
    expect(status.status).toBe('SERVING');
    health.close();
    const api = new pkg.runnerhost.v1.HostApiService(host.grpc, grpc.credentials.createInsecure());
    const err = await new Promise<grpc.ServiceError>((resolve) =>
      api.StateGet({ run_id: 'x', scope: 'conversation', key: 'k' }, resolve),
    );
    expect(err.code).toBe(grpc.status.UNAUTHENTICATED);
    api.close();
  });

  it('lets the demo runner connect with its issued token, and rotates tokens', async () => {
    const started = await startDemoRunner(host, { author: 'demo', name: 'echo' });
    runner = started.runner;
    const rotated = await host.api('POST', '/v1/admin/plugins/demo/echo/token');
    expect(rotated.status).toBe(201);
    expect(rotated.body.token).not.toBe(started.token);
    const { first, client } = connect(host.grpc, started.token, {
      ...hello([]),
      plugin_author: 'demo',
      plugin_name: 'echo',
    });
    expect((await first).error?.code).toBe(grpc.status.UNAUTHENTICATED);
    client.close();
  });
});
