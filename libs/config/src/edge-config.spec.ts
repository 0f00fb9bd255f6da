import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConfigError, loadConfig } from '@libs/config';

const problemsOf = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) {
      return e.problems;
    }
    throw e;
  }
  return [];
};

describe('loadConfig: SSE limits and TLS files', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rh-config-'));
  const pem = path.join(dir, 'x.pem');
  const notPem = path.join(dir, 'x.txt');
  fs.writeFileSync(pem, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
  fs.writeFileSync(notPem, 'hello');
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('defaults: plaintext, 8 MiB SSE backlog, 256 streams per key, 15 s keep-alive', () => {
    const c = loadConfig({});
    expect(c.tls).toBeNull();
    expect(c.sse).toEqual({
      maxBacklogBytes: 8 * 1024 * 1024,
      maxStreamsPerKey: 256,
      keepAliveMs: 15_000,
      flushIntervalMs: 20,
    });
  });

  it('reads the certificate, key and client CA at boot', () => {
    const c = loadConfig({ TLS_CERT_FILE: pem, TLS_KEY_FILE: pem, GRPC_TLS_CLIENT_CA_FILE: pem });
    expect(c.tls?.cert.toString()).toContain('BEGIN CERTIFICATE');
    expect(c.tls?.clientCa).not.toBeNull();
  });

  it.each([
    [{ TLS_CERT_FILE: path.join(dir, 'missing.pem'), TLS_KEY_FILE: pem }, 'TLS_CERT_FILE', 'ENOENT'],
    [{ TLS_CERT_FILE: pem, TLS_KEY_FILE: notPem }, 'TLS_KEY_FILE', 'not a PEM file'],
    [{ TLS_CERT_FILE: pem }, 'TLS_KEY_FILE', 'required'],
    [{ GRPC_TLS_CLIENT_CA_FILE: pem }, 'GRPC_TLS_CLIENT_CA_FILE', 'requires TLS_CERT_FILE'],
    [{ SSE_MAX_STREAMS_PER_KEY: '0' }, 'SSE_MAX_STREAMS_PER_KEY', ''],
    [{ SSE_MAX_BACKLOG_BYTES: '1000' }, 'SSE_MAX_BACKLOG_BYTES', ''],
  ])('refuses %j naming %s', (env, variable, reason) => {
    const problems = problemsOf(env);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`^${variable}\\b`));
    expect(problems[0]).toContain(reason);
  });
});
