import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as https from 'node:https';
import * as os from 'node:os';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ADMIN_KEY, TestDatabase, event, freePort, parseSse, waitFor } from './harness';

jest.setTimeout(90_000);

const ROOT = path.resolve(__dirname, '..', '..');
const HOST_MAIN = path.join(ROOT, 'dist/apps/host/src/main.js');
const RUNNER_MAIN = path.join(ROOT, 'dist/apps/demo-runner/src/main.js');
const health = grpc.loadPackageDefinition(
  protoLoader.loadSync('grpc/health/v1/health.proto', { includeDirs: [path.join(ROOT, 'proto')], keepCase: true }),
) as any;

/** A CA, a server certificate for 127.0.0.1/localhost, a client certificate it signed, and one from a stranger CA. */
function makeCertificates(dir: string) {
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const selfSigned = (name: string) =>
    openssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
    );
  const signed = (name: string, ca: string, ext: string) => {
    openssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      `/CN=${name}`,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
    );
    fs.writeFileSync(path.join(dir, `${name}.ext`), ext);
    openssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      `${ca}.crt`,
      '-CAkey',
      `${ca}.key`,
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.crt`,
    );
  };
  selfSigned('ca');
  selfSigned('stranger-ca');
  signed('server', 'ca', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  signed('plugin', 'ca', 'extendedKeyUsage=clientAuth\n');
  signed('stranger', 'stranger-ca', 'extendedKeyUsage=clientAuth\n');
  const file = (name: string) => path.join(dir, name);
  return { file, read: (name: string) => fs.readFileSync(file(name)) };
}

function launch(main: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [main], {
    env: { ...process.env, METRICS: 'off', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let logs = '';
  child.stdout.on('data', (d: Buffer) => (logs += d.toString()));
  child.stderr.on('data', (d: Buffer) => (logs += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  // Exited, and stdout and stderr closed: the whole log read (at 'exit' the pipes may still hold some).
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  return {
    logs: () => logs,
    exited,
    closed,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
      }
      return exited;
    },
  };
}

describe('TLS: HTTPS and gRPC over TLS, client certificates for plugins', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rh-tls-'));
  const certs = makeCertificates(dir);
  const ca = certs.read('ca.crt');
  const db = new TestDatabase();
  let base = '';
  let grpcUrl = '';
  const procs: ReturnType<typeof launch>[] = [];

  const api = (method: string, p: string, body?: unknown, headers: Record<string, string> = {}) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = https.request(
        new URL(p, base),
        {
          method,
          ca,
          servername: 'localhost', // SNI takes a name, not an IP address
          headers: {
            authorization: `Bearer ${ADMIN_KEY}`,
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
            ...headers,
          },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
  const json = async (method: string, p: string, body?: unknown) => {
    const r = await api(method, p, body);
    return { status: r.status, body: r.text ? JSON.parse(r.text) : undefined };
  };
  const healthCheck = (credentials: grpc.ChannelCredentials) =>
    new Promise<grpc.ServiceError | null>((resolve) => {
      const client = new health.grpc.health.v1.Health(grpcUrl, credentials);
      client.Check({ service: '' }, { deadline: Date.now() + 5_000 }, (e: grpc.ServiceError | null) => {
        client.close();
        resolve(e);
      });
    });

  beforeAll(async () => {
    const [port, grpcPort] = [await freePort(), await freePort()];
    base = `https://127.0.0.1:${port}`;
    grpcUrl = `127.0.0.1:${grpcPort}`;
    const url = await db.url();
    procs.push(
      launch(HOST_MAIN, {
        PORT: String(port),
        HOST: '127.0.0.1',
        GRPC_PORT: String(grpcPort),
        GRPC_HOST: '127.0.0.1',
        DATA_DIR: db.dataDir,
        ADMIN_API_KEY: ADMIN_KEY,
        TLS_CERT_FILE: certs.file('server.crt'),
        TLS_KEY_FILE: certs.file('server.key'),
        GRPC_TLS_CLIENT_CA_FILE: certs.file('ca.crt'),
        ...(url ? { DATABASE_URL: url } : {}),
      }),
    );
    await waitFor('host readiness over HTTPS', async () => (await api('GET', '/health/ready')).status === 200, 30_000);
  });

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    await db.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runs an event end to end over HTTPS and gRPC TLS with a client certificate', async () => {
    const reg = await json('POST', '/v1/admin/plugins', { author: 'tls', name: 'echo' });
    expect(reg.status).toBe(201);
    procs.push(
      launch(RUNNER_MAIN, {
        RUNNERHOST_GRPC_URL: grpcUrl,
        RUNNERHOST_PLUGIN_TOKEN: reg.body.token,
        RUNNERHOST_PLUGIN_AUTHOR: 'tls',
        RUNNERHOST_PLUGIN_NAME: 'echo',
        RUNNERHOST_TLS_CA_FILE: certs.file('ca.crt'),
        RUNNERHOST_TLS_CERT_FILE: certs.file('plugin.crt'),
        RUNNERHOST_TLS_KEY_FILE: certs.file('plugin.key'),
      }),
    );
    const runnerId = 'plugin:tls/echo/default';
    await waitFor('runner connected over TLS', async () => {
      const r = await json('GET', '/v1/admin/runners');
      return (r.body as any[]).find((x) => x.runner_id === runnerId && x.state === 'connected');
    });
    expect((await json('POST', '/v1/admin/agents', { agent_id: 'echo', runner_id: runnerId })).status).toBe(201);
    const admitted = await json('POST', '/v1/events', event('echo', 'hello over tls'));
    expect(admitted.status).toBe(202);
    const sse = await api('GET', `/v1/runs/${admitted.body.run_id}/events`);
    const events = parseSse(sse.text);
    expect(events.at(-1)!.event).toBe('run.completed');
    expect(
      events
        .filter((e) => e.event === 'message.delta')
        .map((e) => e.data.data.chunk.content)
        .join(''),
    ).toBe('hello over tls');
  });

  it('refuses gRPC clients without a certificate signed by GRPC_TLS_CLIENT_CA_FILE, and plaintext', async () => {
    expect(
      await healthCheck(grpc.credentials.createSsl(ca, certs.read('plugin.key'), certs.read('plugin.crt'))),
    ).toBeNull();
    const noCert = await healthCheck(grpc.credentials.createSsl(ca));
    expect(noCert?.code).toBe(grpc.status.UNAVAILABLE);
    const stranger = await healthCheck(
      grpc.credentials.createSsl(ca, certs.read('stranger.key'), certs.read('stranger.crt')),
    );
    expect(stranger?.code).toBe(grpc.status.UNAVAILABLE);
    expect((await healthCheck(grpc.credentials.createInsecure()))?.code).toBe(grpc.status.UNAVAILABLE);
  });

  it('does not serve plaintext HTTP on the TLS port', async () => {
    await expect(fetch(base.replace('https:', 'http:') + '/health/live')).rejects.toThrow();
  });

  it('fails the boot naming the variable when a TLS file cannot be read', async () => {
    const host = launch(HOST_MAIN, {
      PORT: String(await freePort()),
      DATA_DIR: db.dataDir,
      TLS_CERT_FILE: path.join(dir, 'missing.crt'),
      TLS_KEY_FILE: certs.file('server.key'),
    });
    expect(await host.exited).toBe(1);
    await host.closed;
    expect(host.logs()).toContain('TLS_CERT_FILE');
    expect(host.logs()).toContain('missing.crt');
  });
});
