import {
  ERROR_CODES,
  grpcStatusOf,
  httpStatusOf,
  parseManifest,
  parseRunnerId,
  runTimeoutSeconds,
  validateResultPayload,
  validateRunnerConfig,
} from '@libs/protocol';

const idFor = (name: string) => `plugin:acme/bot/${name}`;
const manifest = (extra: Record<string, unknown> = {}) => ({
  id: 'plugin:acme/bot/default',
  name: 'default',
  label: { en_US: 'Bot' },
  protocol_version: '1',
  capabilities: { streaming: true },
  permissions: { models: ['invoke'] },
  ...extra,
});

describe('error tables', () => {
  it('map every code to one HTTP status and one gRPC status', () => {
    for (const code of ERROR_CODES) {
      expect(httpStatusOf(code)).toBeGreaterThanOrEqual(400);
      expect(typeof grpcStatusOf(code)).toBe('number');
    }
    expect(httpStatusOf('not_found')).toBe(404);
    expect(grpcStatusOf('unauthenticated')).toBe(16);
  });
});

describe('parseManifest', () => {
  it('accepts a valid manifest and fills defaults', () => {
    const r = parseManifest(manifest(), idFor);
    expect(r.ok && r.manifest.config_schema).toEqual([]);
  });
  it('rejects unknown top-level, capability and permission keys, naming them', () => {
    expect(parseManifest(manifest({ colour: 'red' }), idFor)).toEqual({
      ok: false,
      reason: expect.stringContaining('colour'),
    });
    const cap = parseManifest(manifest({ capabilities: { flying: true } }), idFor);
    expect(cap.ok).toBe(false);
    expect(!cap.ok && cap.reason).toContain('manifest.capabilities');
    const perm = parseManifest(manifest({ permissions: { models: ['fly'] } }), idFor);
    expect(!perm.ok && perm.reason).toContain('manifest.permissions.models.0');
  });
  it('rejects an id that does not match the plugin identity', () => {
    const r = parseManifest(manifest({ id: 'plugin:other/bot/default' }), idFor);
    expect(!r.ok && r.reason).toContain('manifest.id');
  });
  it('requires protocol_version "1"', () => {
    expect(parseManifest(manifest({ protocol_version: '2' }), idFor).ok).toBe(false);
  });
});

describe('validateResultPayload', () => {
  it('accepts valid known payloads and fills defaults', () => {
    expect(validateResultPayload('run.failed', { error: 'x' })).toEqual({
      ok: true,
      data: { error: 'x', code: 'runner.error', retryable: false },
    });
    expect(validateResultPayload('message.delta', { chunk: { content: 'a' } }).ok).toBe(true);
  });
  it('rejects invalid payloads of known types with the field named', () => {
    const r = validateResultPayload('message.delta', { wrong: 1 });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.reason).toMatch(/data(\.chunk|: Unrecognized key)/);
    expect(validateResultPayload('state.updated', { scope: 'galaxy', key: 'k', value: 1 }).ok).toBe(false);
  });
  it('lets unknown types through untouched', () => {
    expect(validateResultPayload('demo.custom', { anything: [1] })).toEqual({ ok: true, data: { anything: [1] } });
  });
});

describe('runner config', () => {
  const schema = [
    { type: 'select', name: 'mode', required: true, options: [{ name: 'a' }, { name: 'b' }] },
    { type: 'integer', name: 'n' },
  ];
  it('names each bad field and rule', () => {
    expect(validateRunnerConfig({ mode: 'c', n: 1.5, timeout: -1 }, schema)).toEqual([
      'runner_config.mode: must be one of "a", "b"',
      'runner_config.n: must be an integer',
      'runner_config.timeout: must be a number of seconds from 0 to 31536000 (0 or null: no deadline)',
    ]);
    expect(validateRunnerConfig({}, schema)).toEqual(['runner_config.mode: is required']);
    expect(validateRunnerConfig({ mode: 'a' }, schema)).toEqual([]);
  });
  it('derives the timeout: default 300, 0 or null for none', () => {
    expect(runTimeoutSeconds({})).toBe(300);
    expect(runTimeoutSeconds({ timeout: 0 })).toBeNull();
    expect(runTimeoutSeconds({ timeout: null })).toBeNull();
    expect(runTimeoutSeconds({ timeout: 2.5 })).toBe(2.5);
    // Stored before the range check: never a deadline past the largest allowed timeout.
    expect(runTimeoutSeconds({ timeout: 1e300 })).toBe(31_536_000);
  });
  it('parses runner ids strictly', () => {
    expect(parseRunnerId('plugin:a/b/c')).toEqual({ author: 'a', plugin: 'b', runner: 'c' });
    expect(parseRunnerId('builtin:local-agent/default')).toBe('builtin');
    expect(() => parseRunnerId('plugin:a/b')).toThrow('runner_id must be');
  });
});
