import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { plainToInstance } from 'class-transformer';
import { validateSync } from 'class-validator';
import { browserConfigOf, type BrowserConfig } from './browser-config';
import { EnvDto } from './env.dto';
import { parseSecretEnvAllowlist, secretEnvPolicy, type SecretEnvPolicy } from './secret-env';

export type DatabaseConfig =
  /**
   * busyWaitMs: SQLITE_BUSY_WAIT_MS when set (else the persistence default, 10 s: docs/durability.md).
   * searchWorkers: SQLITE_SEARCH_WORKERS when set (else the persistence default, min(2, cores):
   * docs/models-tools-knowledge.md#searches-off-the-event-loop).
   */
  | { type: 'sqlite'; file: string; busyWaitMs?: number; searchWorkers?: number }
  /**
   * idleInTransactionMs: every host connection's `idle_in_transaction_session_timeout`,
   * PROCESS_LEASE_MS − PROCESS_HEARTBEAT_MS (docs/scale-out.md#sessions-of-a-paused-process).
   */
  | { type: 'postgres'; url: string; idleInTransactionMs?: number };

/** The typed configuration; the only thing in the host that reads the environment. */
export interface AppConfig {
  http: { host: string; port: number };
  grpc: { host: string; port: number; maxConcurrentStreams: number };
  dataDir: string;
  database: DatabaseConfig;
  adminApiKey: string | null;
  logLevel: string;
  /** Quick start (OPENAI_*): a `default` chat model is registered at boot when the key is set. */
  openai: { keySet: boolean; baseUrl: string | null; model: string | null };
  /**
   * A secret named by reference (a model's `api_key_env`, a tool source's env reference), read
   * from the environment at call time; null when unset or not allowed by `secretEnv`.
   */
  secret: (name: string) => string | null;
  /** Which host variables may be referenced at all (SECRET_ENV_ALLOWLIST). */
  secretEnv: SecretEnvPolicy;
  runs: {
    cancelGraceMs: number;
    /** SHUTDOWN_GRACE_MS: after SIGTERM, how long runs in flight may finish before they end `interrupted`. */
    shutdownGraceMs: number;
    heartbeatIntervalMs: number;
    maxResultBytes: number;
    /** Largest streamed answer (UTF-8 bytes of one message's deltas); past it the run fails `runner.message_too_large`. */
    maxMessageBytes: number;
    /** A run waiting in its conversation waits this long for its runner to connect (then fails runner.unavailable). */
    runnerWaitMs: number;
  };
  hostApi: { maxPayloadBytes: number; maxStorageValueBytes: number; callsPerSecond: number; burst: number };
  /** Tool calls: default timeout (a source may set its own; the run deadline bounds both) and result cap. */
  tools: { callTimeoutMs: number; maxResultBytes: number; mcpConnectTimeoutMs: number };
  /** SSE readers: unsent live backlog before a reader is cut, streams per API key, keep-alive period. */
  sse: { maxBacklogBytes: number; maxStreamsPerKey: number; keepAliveMs: number; flushIntervalMs: number };
  /** TLS for HTTP and gRPC (PEM contents, read at boot); null = plaintext. */
  tls: TlsConfig | null;
  /** CORS origins and stream-token lifetime (see browser-config.ts). */
  browser: BrowserConfig;
  /** Delivery webhooks: per-attempt timeout, backoff base and cap, attempts, runs pushed at once, SSRF guard. */
  webhooks: WebhookConfig;
  /** Deleting old delivered ops (and, when set, old results and event-log rows). */
  retention: RetentionConfig;
  /** The built-in local agent: the folder of skill packages it may read (SKILLS_DIR), or none. */
  localAgent: { skillsDir: string | null };
  /** Prometheus metrics on their own listener (docs/observability.md); null when METRICS=off. */
  metrics: MetricsConfig | null;
  /** This process's name in metrics and traces (HOST_INSTANCE_ID, default hostname:pid). */
  instanceId: string;
  /** Several processes on one database: the signal bus and the process registry (docs/scale-out.md). */
  cluster: ClusterConfig;
}

export type SignalBusKind = 'memory' | 'postgres' | 'nats';

export interface ClusterConfig {
  /** What wakes other processes (SIGNAL_BUS; auto = postgres on PostgreSQL, memory on SQLite). */
  signalBus: SignalBusKind;
  /** NATS servers and subject prefix when signalBus is nats, else null. */
  nats: { servers: string[]; subjectPrefix: string } | null;
  /** The bounded poll behind a wait on a shared bus (SIGNAL_POLL_MS); a memory bus loses nothing. */
  pollMs: number;
  /** This process's heartbeat period in host_processes, and the lease after which it is dead to the others. */
  heartbeatMs: number;
  leaseMs: number;
  /** The host name in this process's advertised addresses (ADVERTISE_HOST, default the hostname). */
  advertiseHost: string;
}

export interface MetricsConfig {
  host: string;
  port: number;
}

export interface WebhookConfig {
  timeoutMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  maxAttempts: number;
  concurrency: number;
  /** Runs of one endpoint (webhook URL) pushed at once. */
  endpointConcurrency: number;
  /** Consecutive failed attempts that open an endpoint's circuit breaker. */
  breakerFailures: number;
  /** First open period of a breaker (doubles per failed probe, capped at retryMaxMs). */
  breakerOpenMs: number;
  allowPrivate: boolean;
}

/** Retention of stored rows (0 = kept forever); see the retention job in libs/persistence. */
export interface RetentionConfig {
  /** Outbox ops settled (delivered, or never meant for a webhook) older than this are deleted. */
  deliveredOpsMs: number;
  /** Results and event-log rows older than this are deleted (0 = kept). */
  runDataMs: number;
  /** How often the job runs, and rows deleted per batch (one short write each). */
  intervalMs: number;
  batchSize: number;
}

export interface TlsConfig {
  cert: Buffer;
  key: Buffer;
  /** When set, gRPC requires a client certificate signed by this CA. */
  clientCa: Buffer | null;
}

export const APP_CONFIG = Symbol('APP_CONFIG');

const HOUR_MS = 3_600_000;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid environment:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

/** Validates the environment and returns the typed config; throws ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  const raw: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (v !== undefined && v !== '') {
      raw[k] = v;
    }
  }
  const dto = plainToInstance(EnvDto, raw);
  const errors = validateSync(dto, { whitelist: false });
  if (errors.length > 0) {
    throw new ConfigError(
      errors.map(
        (e) => `${e.property}=${JSON.stringify(raw[e.property])}: ${Object.values(e.constraints ?? {}).join('; ')}`,
      ),
    );
  }
  const tls = tlsOf(dto);
  const dataDir = path.resolve(dto.DATA_DIR ?? './data');
  const cluster = clusterOf(dto, databaseOf(dto.DATABASE_URL, dataDir));
  const secretEnv = secretEnvPolicy(parseSecretEnvAllowlist(dto.SECRET_ENV_ALLOWLIST));
  return {
    http: { host: dto.HOST ?? '0.0.0.0', port: dto.PORT ?? 3000 },
    grpc: {
      host: dto.GRPC_HOST ?? '0.0.0.0',
      port: dto.GRPC_PORT ?? 50051,
      maxConcurrentStreams: dto.GRPC_MAX_CONCURRENT_STREAMS ?? 256,
    },
    dataDir,
    database: withSessionTimeout(
      databaseOf(dto.DATABASE_URL, dataDir, dto.SQLITE_BUSY_WAIT_MS, dto.SQLITE_SEARCH_WORKERS),
      cluster,
    ),
    adminApiKey: dto.ADMIN_API_KEY ?? null,
    logLevel: dto.LOG_LEVEL ?? 'info',
    openai: { keySet: !!dto.OPENAI_API_KEY, baseUrl: dto.OPENAI_BASE_URL ?? null, model: dto.OPENAI_MODEL ?? null },
    secret: (name) => (secretEnv.allows(name) ? env[name] || null : null),
    secretEnv,
    runs: {
      cancelGraceMs: dto.CANCEL_GRACE_MS ?? 5000,
      shutdownGraceMs: dto.SHUTDOWN_GRACE_MS ?? 30_000,
      heartbeatIntervalMs: dto.HEARTBEAT_INTERVAL_MS ?? 15000,
      maxResultBytes: dto.MAX_RESULT_BYTES ?? 1024 * 1024,
      // 32 MiB: 4,000 deltas of 8 KiB fit, far above any model's answer, small enough that one
      // run cannot make the host hold or store an unbounded text.
      maxMessageBytes: dto.MAX_MESSAGE_BYTES ?? 32 * 1024 * 1024,
      runnerWaitMs: dto.QUEUED_RUN_RUNNER_WAIT_MS ?? 120_000,
    },
    hostApi: {
      maxPayloadBytes: dto.HOSTAPI_MAX_PAYLOAD_BYTES ?? 1024 * 1024,
      maxStorageValueBytes: dto.STORAGE_MAX_VALUE_BYTES ?? 10 * 1024 * 1024,
      callsPerSecond: dto.HOSTAPI_CALLS_PER_SECOND ?? 100,
      burst: dto.HOSTAPI_BURST ?? 200,
    },
    tools: {
      callTimeoutMs: dto.TOOL_CALL_TIMEOUT_MS ?? 60_000,
      maxResultBytes: dto.TOOL_RESULT_MAX_BYTES ?? 1024 * 1024,
      mcpConnectTimeoutMs: dto.MCP_CONNECT_TIMEOUT_MS ?? 10_000,
    },
    sse: {
      maxBacklogBytes: dto.SSE_MAX_BACKLOG_BYTES ?? 8 * 1024 * 1024,
      maxStreamsPerKey: dto.SSE_MAX_STREAMS_PER_KEY ?? 256,
      keepAliveMs: dto.SSE_KEEPALIVE_MS ?? 15_000,
      flushIntervalMs: dto.SSE_FLUSH_INTERVAL_MS ?? 20,
    },
    tls,
    browser: browserConfigOf(dto.CORS_ALLOWED_ORIGINS, dto.STREAM_TOKEN_TTL_SECONDS),
    webhooks: {
      timeoutMs: dto.WEBHOOK_TIMEOUT_MS ?? 10_000,
      retryBaseMs: dto.WEBHOOK_RETRY_BASE_MS ?? 1000,
      retryMaxMs: dto.WEBHOOK_RETRY_MAX_MS ?? 300_000,
      maxAttempts: dto.WEBHOOK_MAX_ATTEMPTS ?? 15,
      concurrency: dto.WEBHOOK_CONCURRENCY ?? 16,
      endpointConcurrency: dto.WEBHOOK_ENDPOINT_CONCURRENCY ?? 4,
      breakerFailures: dto.WEBHOOK_BREAKER_FAILURES ?? 5,
      breakerOpenMs: dto.WEBHOOK_BREAKER_OPEN_MS ?? 30_000,
      allowPrivate: dto.WEBHOOK_ALLOW_PRIVATE === 'true',
    },
    retention: {
      deliveredOpsMs: (dto.RETENTION_DELIVERED_OPS_HOURS ?? 168) * HOUR_MS,
      runDataMs: (dto.RETENTION_RUN_DATA_DAYS ?? 0) * 24 * HOUR_MS,
      intervalMs: dto.RETENTION_INTERVAL_MS ?? 600_000,
      batchSize: dto.RETENTION_BATCH_SIZE ?? 500,
    },
    localAgent: { skillsDir: dto.SKILLS_DIR ? path.resolve(dto.SKILLS_DIR) : null },
    metrics:
      dto.METRICS === 'off'
        ? null
        : { host: dto.METRICS_HOST ?? dto.HOST ?? '0.0.0.0', port: dto.METRICS_PORT ?? 9464 },
    instanceId: dto.HOST_INSTANCE_ID ?? `${os.hostname()}:${process.pid}`,
    cluster,
  };
}

/**
 * A PostgreSQL session left idle in a transaction is ended by the server after
 * PROCESS_LEASE_MS − PROCESS_HEARTBEAT_MS (at least 2 heartbeats): the locks of a process paused
 * mid-transaction are gone by the time it can be declared dead, also when the sweeper may not
 * terminate its sessions (docs/scale-out.md#sessions-of-a-paused-process).
 */
function withSessionTimeout(database: DatabaseConfig, cluster: ClusterConfig): DatabaseConfig {
  return database.type === 'postgres'
    ? { ...database, idleInTransactionMs: cluster.leaseMs - cluster.heartbeatMs }
    : database;
}

/**
 * The scale-out settings, checked across variables (each problem names its variable): a shared bus
 * needs PostgreSQL (SQLite is one process: docs/durability.md#one-process-per-sqlite-database),
 * NATS needs its servers, and a lease spans at least three heartbeats so that one slow tick
 * does not declare a live process dead.
 */
function clusterOf(dto: EnvDto, database: DatabaseConfig): ClusterConfig {
  const problems: string[] = [];
  const chosen = (dto.SIGNAL_BUS ?? 'auto') as SignalBusKind | 'auto';
  const signalBus: SignalBusKind = chosen === 'auto' ? (database.type === 'postgres' ? 'postgres' : 'memory') : chosen;
  if (signalBus !== 'memory' && database.type !== 'postgres') {
    problems.push(
      `SIGNAL_BUS=${JSON.stringify(signalBus)}: a shared bus needs DATABASE_URL=postgres://… (SQLite serves one process)`,
    );
  }
  if (signalBus === 'nats' && !dto.NATS_URL) {
    problems.push('NATS_URL: required when SIGNAL_BUS=nats');
  }
  if (signalBus !== 'nats' && dto.NATS_URL) {
    problems.push(`NATS_URL=${JSON.stringify(dto.NATS_URL)}: only read with SIGNAL_BUS=nats (now ${signalBus})`);
  }
  if (signalBus !== 'nats' && dto.SIGNAL_BUS_SUBJECT_PREFIX) {
    problems.push(`SIGNAL_BUS_SUBJECT_PREFIX: only read with SIGNAL_BUS=nats (now ${signalBus})`);
  }
  const heartbeatMs = dto.PROCESS_HEARTBEAT_MS ?? 5000;
  const leaseMs = dto.PROCESS_LEASE_MS ?? Math.max(30_000, 3 * heartbeatMs);
  if (leaseMs < 3 * heartbeatMs) {
    problems.push(
      `PROCESS_LEASE_MS=${JSON.stringify(String(leaseMs))}: must be at least 3 × PROCESS_HEARTBEAT_MS (${3 * heartbeatMs})`,
    );
  }
  if (problems.length > 0) {
    throw new ConfigError(problems);
  }
  return {
    signalBus,
    nats:
      signalBus === 'nats'
        ? {
            servers: dto.NATS_URL!.split(',').map((u) => u.trim()),
            subjectPrefix: dto.SIGNAL_BUS_SUBJECT_PREFIX ?? 'runnerhost',
          }
        : null,
    pollMs: dto.SIGNAL_POLL_MS ?? 1000,
    heartbeatMs,
    leaseMs,
    advertiseHost: dto.ADVERTISE_HOST ?? os.hostname(),
  };
}

/** Reads the TLS files now, so that a missing or unreadable file stops the boot naming its variable. */
function tlsOf(dto: EnvDto): TlsConfig | null {
  const problems: string[] = [];
  const read = (name: 'TLS_CERT_FILE' | 'TLS_KEY_FILE' | 'GRPC_TLS_CLIENT_CA_FILE'): Buffer | null => {
    const file = dto[name];
    if (!file) {
      return null;
    }
    try {
      const pem = fs.readFileSync(file);
      if (!pem.includes('-----BEGIN ')) {
        problems.push(`${name}=${JSON.stringify(file)}: not a PEM file`);
        return null;
      }
      return pem;
    } catch (e) {
      problems.push(`${name}=${JSON.stringify(file)}: cannot read (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
      return null;
    }
  };
  const [cert, key, clientCa] = [read('TLS_CERT_FILE'), read('TLS_KEY_FILE'), read('GRPC_TLS_CLIENT_CA_FILE')];
  if (!dto.TLS_CERT_FILE !== !dto.TLS_KEY_FILE) {
    problems.push(`${dto.TLS_CERT_FILE ? 'TLS_KEY_FILE' : 'TLS_CERT_FILE'}: required when the other TLS file is set`);
  }
  if (dto.GRPC_TLS_CLIENT_CA_FILE && !dto.TLS_CERT_FILE) {
    problems.push('GRPC_TLS_CLIENT_CA_FILE: requires TLS_CERT_FILE and TLS_KEY_FILE (client certificates need TLS)');
  }
  if (problems.length > 0) {
    throw new ConfigError(problems);
  }
  return cert && key ? { cert, key, clientCa } : null;
}

function databaseOf(
  url: string | undefined,
  dataDir: string,
  busyWaitMs?: number,
  searchWorkers?: number,
): DatabaseConfig {
  const sqliteTuning = {
    ...(busyWaitMs === undefined ? {} : { busyWaitMs }),
    ...(searchWorkers === undefined ? {} : { searchWorkers }),
  };
  if (!url) {
    return { type: 'sqlite', file: path.join(dataDir, 'runner-host.sqlite'), ...sqliteTuning };
  }
  if (url.startsWith('sqlite:')) {
    const file = url.slice('sqlite:'.length);
    return { type: 'sqlite', file: file === ':memory:' ? file : path.resolve(file), ...sqliteTuning };
  }
  return { type: 'postgres', url };
}
