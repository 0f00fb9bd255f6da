import { Transform } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, Matches, Max, Min, MinLength } from 'class-validator';
import { CORS_ORIGINS_PATTERN } from './browser-config';

const toInt = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : value;

/** Every environment variable the host reads. Validated once at boot (see loadConfig). */
export class EnvDto {
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(65535)
  PORT?: number;

  @IsOptional()
  @IsString()
  HOST?: string;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(65535)
  GRPC_PORT?: number;

  /** Concurrent HTTP/2 streams one gRPC connection may hold (advertised to clients; more wait client-side). */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(100_000)
  GRPC_MAX_CONCURRENT_STREAMS?: number;

  @IsOptional()
  @IsString()
  GRPC_HOST?: string;

  @IsOptional()
  @IsString()
  @MinLength(1)
  DATA_DIR?: string;

  /** A folder of skill packages (a folder per skill with SKILL.md) the built-in local agent may read. */
  @IsOptional()
  @IsString()
  @MinLength(1)
  SKILLS_DIR?: string;

  @IsOptional()
  @Matches(/^postgres(ql)?:\/\/.+|^sqlite:.+/, { message: 'DATABASE_URL must be postgres://… or sqlite:<file>' })
  DATABASE_URL?: string;

  /**
   * SQLite: how long in all a write waits (off the event loop) for a writer lock another connection
   * holds before it fails 503 `database.busy` (docs/durability.md#a-busy-writer-lock).
   */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(600_000)
  SQLITE_BUSY_WAIT_MS?: number;

  /**
   * SQLite file database: worker threads (each with its own read-only connection) that run the
   * knowledge searches (docs/models-tools-knowledge.md#searches-off-the-event-loop).
   */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(16)
  SQLITE_SEARCH_WORKERS?: number;

  @IsOptional()
  @IsString()
  @MinLength(24, { message: 'ADMIN_API_KEY must be at least 24 characters' })
  ADMIN_API_KEY?: string;

  @IsOptional()
  @IsIn(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
  LOG_LEVEL?: string;

  /** Host variables models and tools may be handed by reference (see secret-env.ts). */
  @IsOptional()
  @Matches(/^\s*[A-Za-z_][A-Za-z0-9_]*\*?\s*(,\s*[A-Za-z_][A-Za-z0-9_]*\*?\s*)*$/, {
    message: 'SECRET_ENV_ALLOWLIST must be comma-separated variable names, each optionally ending in * (a prefix)',
  })
  SECRET_ENV_ALLOWLIST?: string;

  /** Quick start: when set, a chat model `default` is registered at boot (its key is read at call time). */
  @IsOptional()
  @IsString()
  OPENAI_API_KEY?: string;

  @IsOptional()
  @Matches(/^https?:\/\/[^\s/?#]+[^\s?#]*$/i, { message: 'OPENAI_BASE_URL must be an http(s) URL' })
  OPENAI_BASE_URL?: string;

  @IsOptional()
  @Matches(/^\S{1,255}$/, { message: 'OPENAI_MODEL must be a model name without spaces' })
  OPENAI_MODEL?: string;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  CANCEL_GRACE_MS?: number;

  /** Graceful shutdown (docs/deployment.md#graceful-shutdown): how long runs in flight may finish after SIGTERM. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(3_600_000)
  SHUTDOWN_GRACE_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1000)
  HEARTBEAT_INTERVAL_MS?: number;

  /** How long a run that waits in a conversation (queued, re-dispatched) waits for its runner to connect. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(86_400_000)
  QUEUED_RUN_RUNNER_WAIT_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  MAX_RESULT_BYTES?: number;

  /**
   * Largest answer one run may stream as one message (UTF-8 bytes of its deltas' text); past it
   * the run fails `runner.message_too_large`. 1 KiB to 128 MiB (a stored transcript row must fit
   * PostgreSQL's jsonb).
   */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1024)
  @Max(134_217_728)
  MAX_MESSAGE_BYTES?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1024)
  HOSTAPI_MAX_PAYLOAD_BYTES?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(64 * 1024 * 1024)
  STORAGE_MAX_VALUE_BYTES?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  HOSTAPI_CALLS_PER_SECOND?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  HOSTAPI_BURST?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  TOOL_CALL_TIMEOUT_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1024)
  TOOL_RESULT_MAX_BYTES?: number;

  /** How long an MCP server gets to answer `initialize` (and its first tool listing). */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  @Max(600_000)
  MCP_CONNECT_TIMEOUT_MS?: number;

  /** Bytes of results a live SSE reader may have unsent before it is disconnected. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(64 * 1024)
  SSE_MAX_BACKLOG_BYTES?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  SSE_MAX_STREAMS_PER_KEY?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  SSE_KEEPALIVE_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(1000)
  SSE_FLUSH_INTERVAL_MS?: number;

  /** Origins allowed to call the API from a browser: `*` or comma-separated `https://host[:port]`; unset = CORS off. */
  @IsOptional()
  @Matches(CORS_ORIGINS_PATTERN, {
    message: 'CORS_ALLOWED_ORIGINS must be * or comma-separated origins like https://console.example.com (no path)',
  })
  CORS_ALLOWED_ORIGINS?: string;

  /** Lifetime of a run-scoped stream token (POST /v1/runs/{run_id}/stream-tokens). */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(10)
  @Max(86_400)
  STREAM_TOKEN_TTL_SECONDS?: number;

  /** PEM certificate chain and key: HTTP and gRPC serve TLS when both are set. */
  @IsOptional()
  @IsString()
  TLS_CERT_FILE?: string;

  @IsOptional()
  @IsString()
  TLS_KEY_FILE?: string;

  /** PEM CA: plugins must present a client certificate it signed (gRPC), besides their token. */
  @IsOptional()
  @IsString()
  GRPC_TLS_CLIENT_CA_FILE?: string;
  // Delivery webhooks (issue 10): timeouts, retries with exponential backoff and a cap, SSRF guard.
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  @Max(300_000)
  WEBHOOK_TIMEOUT_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(3_600_000)
  WEBHOOK_RETRY_BASE_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(86_400_000)
  WEBHOOK_RETRY_MAX_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1000)
  WEBHOOK_MAX_ATTEMPTS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1024)
  WEBHOOK_CONCURRENCY?: number;

  /** Runs of one webhook endpoint (URL) pushed at once: a dead endpoint holds at most this many workers. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1024)
  WEBHOOK_ENDPOINT_CONCURRENCY?: number;

  /** Consecutive failed attempts to one endpoint that open its circuit breaker. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1000)
  WEBHOOK_BREAKER_FAILURES?: number;

  /** First open period of an endpoint's breaker (then one probe; doubles per failed probe). */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  @Max(86_400_000)
  WEBHOOK_BREAKER_OPEN_MS?: number;

  /** true: webhooks may target private, loopback and link-local addresses (single-machine setups, tests). */
  @IsOptional()
  @IsIn(['true', 'false'])
  WEBHOOK_ALLOW_PRIVATE?: string;

  // Retention (docs/durability.md, "Retention"): settled delivery ops, and optionally results and event-log rows.
  /** Hours a settled delivery op (delivered, or without webhook) is kept; 0 = forever. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(87_600)
  RETENTION_DELIVERED_OPS_HOURS?: number;

  /** Days results and event-log rows are kept; 0 (default) = forever. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(36_500)
  RETENTION_RUN_DATA_DAYS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  @Max(86_400_000)
  RETENTION_INTERVAL_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(10_000)
  RETENTION_BATCH_SIZE?: number;

  /** Prometheus metrics: on (default) or off (no registry, every hook a no-op, no listener). */
  @IsOptional()
  @IsIn(['on', 'off'])
  METRICS?: string;

  /** The metrics listener's port (GET /metrics, no auth: keep it on an operator-only network). */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(65535)
  METRICS_PORT?: number;

  @IsOptional()
  @IsString()
  METRICS_HOST?: string;

  /** The `host_instance` label of every series (default hostname:pid). */
  @IsOptional()
  @Matches(/^[A-Za-z0-9_.:-]{1,128}$/, {
    message: 'HOST_INSTANCE_ID must be 1-128 letters, digits, or . _ : -',
  })
  HOST_INSTANCE_ID?: string;

  // Scale-out (docs/scale-out.md): the signal bus that wakes other processes, and the process registry.
  /** auto (default): postgres on PostgreSQL, memory on SQLite; nats needs NATS_URL. */
  @IsOptional()
  @IsIn(['auto', 'memory', 'postgres', 'nats'], { message: 'SIGNAL_BUS must be auto, memory, postgres or nats' })
  SIGNAL_BUS?: string;

  /** NATS servers for SIGNAL_BUS=nats: comma-separated nats://host:port (or tls://). */
  @IsOptional()
  @Matches(/^\s*(nats|tls):\/\/[^\s,]+\s*(,\s*(nats|tls):\/\/[^\s,]+\s*)*$/, {
    message: 'NATS_URL must be comma-separated nats://host:port (or tls://host:port) URLs',
  })
  NATS_URL?: string;

  /** Subject prefix of the signals on NATS: deployments sharing one NATS server keep apart. */
  @IsOptional()
  @Matches(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, {
    message: 'SIGNAL_BUS_SUBJECT_PREFIX must be dot-separated tokens of letters, digits, _ or -',
  })
  SIGNAL_BUS_SUBJECT_PREFIX?: string;

  /** The bounded poll behind every wait on a shared bus (a wake-up between processes may be lost). */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(50)
  @Max(60_000)
  SIGNAL_POLL_MS?: number;

  /** How often this process's row in host_processes is heartbeated (one statement per tick). */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  @Max(600_000)
  PROCESS_HEARTBEAT_MS?: number;

  /** A process whose heartbeat is older than this is dead to the others; at least 3 heartbeats. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(300)
  @Max(3_600_000)
  PROCESS_LEASE_MS?: number;

  /** The host name other processes reach this one by (host_processes addresses); default the hostname. */
  @IsOptional()
  @Matches(/^[A-Za-z0-9._:[\]-]{1,200}$/, {
    message: 'ADVERTISE_HOST must be a host name or IP address',
  })
  ADVERTISE_HOST?: string;
}
