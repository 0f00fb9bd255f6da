import { DomainError } from '@libs/protocol';
import { parseSource, resolveEnvRefs, validateSourceId } from './tool-config';

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

  it('validates source ids', () => {
    expect(fails(() => validateSourceId('github-1'))).toBe('no error');
    for (const bad of ['builtin', 'Upper', '', '-x', 'a'.repeat(65), 'a b']) {
      expect(fails(() => validateSourceId(bad))).toMatch(/^invalid_argument: source_id/);
    }
  });

  it('resolves references, naming a missing variable and never a value', () => {
    expect(resolveEnvRefs({ Authorization: { env: 'T', prefix: 'Bearer ' } }, 'h', { T: 's3cret' })).toEqual({
      Authorization: 'Bearer s3cret',
    });
    expect(fails(() => resolveEnvRefs({ A: { env: 'MISSING' } }, 'source s config.env', {}))).toBe(
      'unavailable: source s config.env.A: host environment variable MISSING is not set',
    );
  });
});
