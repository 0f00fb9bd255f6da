import { ConfigError, loadConfig } from '@libs/config';

describe('loadConfig', () => {
  it('gives defaults with an empty environment', () => {
    const c = loadConfig({});
    expect(c.http.port).toBe(3000);
    expect(c.grpc.port).toBe(50051);
    expect(c.database).toEqual({ type: 'sqlite', file: expect.stringMatching(/data\/runner-host\.sqlite$/) });
    expect(c.runs.cancelGraceMs).toBe(5000);
    expect(c.runs.maxMessageBytes).toBe(32 * 1024 * 1024);
  });

  it('MAX_MESSAGE_BYTES: an integer from 1 KiB to 128 MiB', () => {
    expect(loadConfig({ MAX_MESSAGE_BYTES: '1048576' }).runs.maxMessageBytes).toBe(1048576);
    for (const bad of ['1023', '134217729', '2.5', 'lots']) {
      expect(() => loadConfig({ MAX_MESSAGE_BYTES: bad })).toThrow(/MAX_MESSAGE_BYTES=/);
    }
  });

  it('reads PostgreSQL from DATABASE_URL', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres://u@h/db' }).database).toEqual({
      type: 'postgres',
      url: 'postgres://u@h/db',
    });
  });

  it('names every bad variable at once', () => {
    let error: unknown;
    try {
      loadConfig({
        PORT: 'eighty',
        GRPC_PORT: '70000',
        LOG_LEVEL: 'loud',
        DATABASE_URL: 'mysql://x',
        ADMIN_API_KEY: 'short',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const names = (error as ConfigError).problems.map((p) => p.split('=')[0]).sort();
    expect(names).toEqual(['ADMIN_API_KEY', 'DATABASE_URL', 'GRPC_PORT', 'LOG_LEVEL', 'PORT']);
  });
});
