import { ConfigError, loadConfig } from '@libs/config';

describe('loadConfig', () => {
  it('gives defaults with an empty environment', () => {
    const c = loadConfig({});
    expect(c.http.port).toBe(3000);
    expect(c.grpc.port).toBe(50051);
    expect(c.database).toEqual({ type: 'sqlite', file: expect.stringMatching(/data\/runner-host\.sqlite$/) });
    expect(c.runs.cancelGraceMs).toBe(5000);
    expect(c.runs.shutdownGraceMs).toBe(30_000);
    expect(c.runs.maxMessageBytes).toBe(32 * 1024 * 1024);
  });

  it('MAX_MESSAGE_BYTES: an integer from 1 KiB to 128 MiB', () => {
    expect(loadConfig({ MAX_MESSAGE_BYTES: '1048576' }).runs.maxMessageBytes).toBe(1048576);
    for (const bad of ['1023', '134217729', '2.5', 'lots']) {
      expect(() => loadConfig({ MAX_MESSAGE_BYTES: bad })).toThrow(/MAX_MESSAGE_BYTES=/);
    }
  });

  it('SHUTDOWN_GRACE_MS: an integer from 0 to 3600000', () => {
    expect(loadConfig({ SHUTDOWN_GRACE_MS: '0' }).runs.shutdownGraceMs).toBe(0);
    expect(loadConfig({ SHUTDOWN_GRACE_MS: '120000' }).runs.shutdownGraceMs).toBe(120_000);
    for (const bad of ['-1', '3600001', '2.5', 'soon']) {
      expect(() => loadConfig({ SHUTDOWN_GRACE_MS: bad })).toThrow(/SHUTDOWN_GRACE_MS=/);
    }
  });

  it('SQLITE_BUSY_WAIT_MS: an integer from 0 to 600000, on the SQLite database (unset: the persistence default)', () => {
    expect(loadConfig({ SQLITE_BUSY_WAIT_MS: '250' }).database).toMatchObject({ type: 'sqlite', busyWaitMs: 250 });
    expect(loadConfig({ DATABASE_URL: 'sqlite:/tmp/x.sqlite', SQLITE_BUSY_WAIT_MS: '0' }).database).toEqual({
      type: 'sqlite',
      file: '/tmp/x.sqlite',
      busyWaitMs: 0,
    });
    expect(loadConfig({}).database).not.toHaveProperty('busyWaitMs');
    for (const bad of ['-1', '600001', '2.5', 'long']) {
      expect(() => loadConfig({ SQLITE_BUSY_WAIT_MS: bad })).toThrow(/SQLITE_BUSY_WAIT_MS=/);
    }
  });

  it('SQLITE_SEARCH_WORKERS: an integer from 1 to 16, on the SQLite database (unset: the persistence default)', () => {
    expect(loadConfig({ SQLITE_SEARCH_WORKERS: '3' }).database).toMatchObject({ type: 'sqlite', searchWorkers: 3 });
    expect(loadConfig({ DATABASE_URL: 'sqlite:/tmp/x.sqlite', SQLITE_SEARCH_WORKERS: '1' }).database).toEqual({
      type: 'sqlite',
      file: '/tmp/x.sqlite',
      searchWorkers: 1,
    });
    expect(loadConfig({}).database).not.toHaveProperty('searchWorkers');
    for (const bad of ['0', '17', '1.5', 'many']) {
      expect(() => loadConfig({ SQLITE_SEARCH_WORKERS: bad })).toThrow(/SQLITE_SEARCH_WORKERS=/);
    }
  });

  it('reads PostgreSQL from DATABASE_URL', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres://u@h/db' }).database).toEqual({
      type: 'postgres',
      url: 'postgres://u@h/db',
      // PROCESS_LEASE_MS − PROCESS_HEARTBEAT_MS (docs/scale-out.md#sessions-of-a-paused-process)
      idleInTransactionMs: 25_000,
    });
    expect(
      loadConfig({ DATABASE_URL: 'postgres://u@h/db', PROCESS_HEARTBEAT_MS: '1000', PROCESS_LEASE_MS: '3000' })
        .database,
    ).toMatchObject({ idleInTransactionMs: 2000 });
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

  describe('scale-out (SIGNAL_BUS, NATS_URL, SIGNAL_POLL_MS, PROCESS_*)', () => {
    const PG = 'postgres://u@h/db';
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

    it('auto: memory on SQLite, postgres on PostgreSQL; registry defaults', () => {
      expect(loadConfig({}).cluster).toMatchObject({
        signalBus: 'memory',
        nats: null,
        pollMs: 1000,
        heartbeatMs: 5000,
        leaseMs: 30_000,
      });
      expect(loadConfig({ DATABASE_URL: PG }).cluster.signalBus).toBe('postgres');
      expect(loadConfig({ DATABASE_URL: PG, SIGNAL_BUS: 'memory' }).cluster.signalBus).toBe('memory');
    });

    it('nats: the servers (comma-separated) and the subject prefix', () => {
      const c = loadConfig({
        DATABASE_URL: PG,
        SIGNAL_BUS: 'nats',
        NATS_URL: 'nats://a:4222, nats://b:4222',
        SIGNAL_BUS_SUBJECT_PREFIX: 'prod.eu',
      }).cluster;
      expect(c).toMatchObject({
        signalBus: 'nats',
        nats: { servers: ['nats://a:4222', 'nats://b:4222'], subjectPrefix: 'prod.eu' },
      });
      expect(loadConfig({ DATABASE_URL: PG, SIGNAL_BUS: 'nats', NATS_URL: 'nats://a:4222' }).cluster.nats).toEqual({
        servers: ['nats://a:4222'],
        subjectPrefix: 'runnerhost',
      });
    });

    it('names the variable of each bad value', () => {
      expect(problemsOf({ SIGNAL_BUS: 'redis' })).toEqual([expect.stringMatching(/^SIGNAL_BUS="redis": /)]);
      expect(problemsOf({ DATABASE_URL: PG, SIGNAL_BUS: 'nats', NATS_URL: 'http://x' })).toEqual([
        expect.stringMatching(/^NATS_URL="http:\/\/x": /),
      ]);
      expect(
        problemsOf({ DATABASE_URL: PG, SIGNAL_BUS: 'nats', NATS_URL: 'nats://a', SIGNAL_BUS_SUBJECT_PREFIX: 'a..b' }),
      ).toEqual([expect.stringMatching(/^SIGNAL_BUS_SUBJECT_PREFIX="a\.\.b": /)]);
      expect(problemsOf({ SIGNAL_POLL_MS: '10' })).toEqual([expect.stringMatching(/^SIGNAL_POLL_MS="10": /)]);
      expect(problemsOf({ PROCESS_HEARTBEAT_MS: 'often' })).toEqual([expect.stringMatching(/^PROCESS_HEARTBEAT_MS=/)]);
      expect(problemsOf({ ADVERTISE_HOST: 'a b' })).toEqual([expect.stringMatching(/^ADVERTISE_HOST="a b": /)]);
    });

    it('checks the variables against each other, naming them', () => {
      expect(problemsOf({ SIGNAL_BUS: 'postgres' })).toEqual([
        expect.stringMatching(/^SIGNAL_BUS="postgres": a shared bus needs DATABASE_URL=postgres/),
      ]);
      expect(problemsOf({ DATABASE_URL: PG, SIGNAL_BUS: 'nats' })).toEqual(['NATS_URL: required when SIGNAL_BUS=nats']);
      expect(problemsOf({ DATABASE_URL: PG, NATS_URL: 'nats://a:4222' })).toEqual([
        expect.stringMatching(/^NATS_URL="nats:\/\/a:4222": only read with SIGNAL_BUS=nats \(now postgres\)/),
      ]);
      expect(problemsOf({ PROCESS_HEARTBEAT_MS: '5000', PROCESS_LEASE_MS: '10000' })).toEqual([
        expect.stringMatching(/^PROCESS_LEASE_MS="10000": must be at least 3 × PROCESS_HEARTBEAT_MS \(15000\)/),
      ]);
      // The default lease follows a long heartbeat.
      expect(loadConfig({ PROCESS_HEARTBEAT_MS: '20000' }).cluster.leaseMs).toBe(60_000);
    });
  });
});
