import { DomainError } from '@libs/protocol';
import { parseSecretEnvAllowlist, secretEnvPolicy } from '@libs/config';
import { checkSourceEnvRefs, parseSource, resolveEnvRefs, validateSourceId } from './tool-config';

const fails = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return e instanceof DomainError ? `${e.code}: ${e.message}` : String(e);
  }
  return 'no error';
};

describe('tool source config', () => {
  it('fills defaults and keeps environment references', () => {
    expect(parseSource('mcp_stdio', { command: 'node', env: { TOKEN: { env: 'HOST_TOKEN' } } })).toEqual({
      kind: 'mcp_stdio',
      config: { command: 'node', args: [], env: { TOKEN: { env: 'HOST_TOKEN' } } },
    });
    const http = parseSource('http', { tools: [{ name: 'get_x', method: 'GET', url: 'http://x.test/a' }] });
    expect(http.config).toMatchObject({
      tools: [{ name: 'get_x', description: '', parameters: { type: 'object', properties: {} } }],
      headers: {},
    });
  });

  it('refuses literal secrets, bad URLs, unknown kinds and fields', () => {
    expect(fails(() => parseSource('mcp_stdio', { command: 'node', env: { TOKEN: 'literal' } }))).toMatch(
      /^invalid_argument: config\.env\.TOKEN/,
    );
    expect(fails(() => parseSource('mcp_http', { url: 'file:///etc/passwd' }))).toMatch(/config\.url/);
    expect(fails(() => parseSource('mcp_http', { url: 'http://x', headers: { A: { value: 'v' } } }))).toMatch(
      /config\.headers\.A/,
    );
    expect(fails(() => parseSource('builtin', {}))).toMatch(/^invalid_argument: kind/);
    expect(fails(() => parseSource('mcp_http', { url: 'http://x', extra: 1 }))).toMatch(/^invalid_argument: config/);
    expect(
      fails(() =>
        parseSource('http', {
          tools: [
            { name: 'a', url: 'http://x' },
            { name: 'a', url: 'http://y' },
          ],
        }),
      ),
    ).toMatch(/unique/);
    expect(
      fails(() => parseSource('http', { tools: [{ name: 'a', url: 'http://x', parameters: { type: 'string' } }] })),
    ).toMatch(/parameters/);
  });

  it('allows only SECRET_ENV_ALLOWLIST references, naming the field', () => {
    const policy = secretEnvPolicy(parseSecretEnvAllowlist(undefined));
    const stdio = parseSource('mcp_stdio', { command: 'node', env: { TOKEN: { env: 'ADMIN_API_KEY' } } });
    expect(fails(() => checkSourceEnvRefs(stdio, policy))).toMatch(
      /^invalid_argument: config\.env\.TOKEN\.env: ADMIN_API_KEY/,
    );
    const http = parseSource('mcp_http', { url: 'http://x.test', headers: { Authorization: { env: 'HOME' } } });
    expect(fails(() => checkSourceEnvRefs(http, policy))).toMatch(
      /^invalid_argument: config\.headers\.Authorization\.env/,
    );
    const fine = parseSource('mcp_http', { url: 'http://x.test', headers: { A: { env: 'RUNNERHOST_SECRET_GH' } } });
    expect(fails(() => checkSourceEnvRefs(fine, policy))).toBe('no error');
  });

  it("never allows the host's own secrets, whatever the allowlist says", () => {
    const everything = secretEnvPolicy(['A*', 'D*', 'T*', 'G*', 'P*', 'S*', 'R*', 'OPENAI_API_KEY']);
    for (const name of [
      'ADMIN_API_KEY',
      'DATABASE_URL',
      'TLS_KEY_FILE',
      'GRPC_TLS_CLIENT_CA_FILE',
      'PGPASSWORD',
      'SECRET_ENV_ALLOWLIST',
      'RUNNERHOST_PLUGIN_TOKEN',
    ]) {
      expect([name, everything.allows(name)]).toEqual([name, false]);
    }
    expect(everything.allows('OPENAI_API_KEY')).toBe(true);
    expect(everything.allows('ANTHROPIC_KEY')).toBe(true);
    expect(secretEnvPolicy(parseSecretEnvAllowlist(' X_KEY , Y_* ')).entries).toEqual(['X_KEY', 'Y_*']);
  });

  it('validates source ids', () => {
    expect(fails(() => validateSourceId('github-1'))).toBe('no error');
    for (const bad of ['builtin', 'Upper', '', '-x', 'a'.repeat(65), 'a b']) {
      expect(fails(() => validateSourceId(bad))).toMatch(/^invalid_argument: source_id/);
    }
  });

  it('resolves references, naming a missing variable and never a value', () => {
    const secret = (name: string) => ({ T: 's3cret' })[name] ?? null;
    expect(resolveEnvRefs({ Authorization: { env: 'T', prefix: 'Bearer ' } }, 'h', secret)).toEqual({
      Authorization: 'Bearer s3cret',
    });
    expect(fails(() => resolveEnvRefs({ A: { env: 'MISSING' } }, 'source s config.env', secret))).toBe(
      'unavailable: source s config.env.A: host environment variable MISSING is not set or not allowed',
    );
  });
});
