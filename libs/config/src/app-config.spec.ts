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

  it('webhook fairness and retention: documented defaults, values read, bad values named with their rule', () => {
    const d = loadConfig({});
    expect(d.webhooks).toMatchObject({
      concurrency: 16,
      endpointConcurrency: 4,
      breakerFailures: 5,
      breakerOpenMs: 30_000,
    });
    expect(d.retention).toEqual({ deliveredOpsMs: 168 * 3_600_000, runDataMs: 0, intervalMs: 600_000, batchSize: 500 });
    const c = loadConfig({
      WEBHOOK_ENDPOINT_CONCURRENCY: '2',
      WEBHOOK_BREAKER_FAILURES: '3',
      WEBHOOK_BREAKER_OPEN_MS: '1000',
      RETENTION_DELIVERED_OPS_HOURS: '0',
      RETENTION_RUN_DATA_DAYS: '30',
      RETENTION_INTERVAL_MS: '60000',
      RETENTION_BATCH_SIZE: '100',
    });
    expect(c.webhooks).toMatchObject({ endpointConcurrency: 2, breakerFailures: 3, breakerOpenMs: 1000 });
    expect(c.retention).toEqual({ deliveredOpsMs: 0, runDataMs: 30 * 86_400_000, intervalMs: 60_000, batchSize: 100 });
    let error: unknown;
    try {
      loadConfig({
        WEBHOOK_ENDPOINT_CONCURRENCY: '0',
        WEBHOOK_BREAKER_FAILURES: 'many',
        WEBHOOK_BREAKER_OPEN_MS: '5',
        RETENTION_DELIVERED_OPS_HOURS: '-1',
        RETENTION_BATCH_SIZE: '1000000',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems.map((p) => p.split('=')[0]).sort()).toEqual([
      'RETENTION_BATCH_SIZE',
      'RETENTION_DELIVERED_OPS_HOURS',
      'WEBHOOK_BREAKER_FAILURES',
      'WEBHOOK_BREAKER_OPEN_MS',
      'WEBHOOK_ENDPOINT_CONCURRENCY',
    ]);
    expect(problems.find((p) => p.startsWith('WEBHOOK_ENDPOINT_CONCURRENCY'))).toMatch(/not be less than 1/);
  });
});
