import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { loadSync, type PackageDefinition } from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { NestFactory } from '@nestjs/core';
import { Transport, type MicroserviceOptions } from '@nestjs/microservices';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { ProcessRegistry } from '@libs/cluster';
import { ConfigError, loadConfig, type AppConfig } from '@libs/config';
import { LOADER_OPTIONS, protoPath } from '@libs/proto';
import { HostApiGrpc, grpcMessageLimit, serveHostApi } from '@libs/host-api';
import { WebhookWorker } from '@libs/delivery';
import {
  ConnectSessionHandler,
  RunnerConnections,
  decodeResultsDirectly,
  encodeHostMessagesDirectly,
  serveConnect,
  tolerateMalformedRequests,
} from '@libs/runner-gateway';
import { RunsDrain } from '@libs/runs';
import { DatabaseLock, DatabaseLockedError } from '@libs/persistence';
import { telemetry, tracingRequested } from '@libs/telemetry';
import { boundGrpcPort } from './edge/grpc-bound-port';
import { createHttpAdapter } from './edge/http-adapter';
import { grpcServerOptions } from './edge/grpc-streams';
import { validationPipe } from './filters/validation';
import { GrpcServerState } from './grpc-server-state';
import { HostModule } from './host.module';
import { JsonLogger } from './logging/json-logger';
import { GracefulShutdown } from './shutdown/graceful-shutdown';
import { setupOpenApi } from './openapi/openapi';

function configOrExit(): AppConfig {
  try {
    return loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`runner-host: ${e.message}\n`);
      process.exit(1);
    }
    throw e;
  }
}

/**
 * One process per SQLite database: two would be two writers with two sets of in-memory run state
 * on one file. Taken before anything opens the database and held until the process ends (the OS
 * releases it on any exit, kill -9 included). A refused process exits 1 naming the file and holder.
 */
function lockDatabaseOrExit(config: AppConfig): DatabaseLock | null {
  if (config.database.type !== 'sqlite' || config.database.file === ':memory:') {
    return null;
  }
  try {
    return DatabaseLock.acquire(config.database.file);
  } catch (e) {
    if (e instanceof DatabaseLockedError) {
      process.stderr.write(`runner-host: ${e.message}\n`);
      process.exit(1);
    }
    throw e;
  }
}

/** gRPC credentials: plaintext by default; TLS from the same files as HTTP, client certificates when a CA is set. */
function grpcCredentials(config: AppConfig): grpc.ServerCredentials {
  if (!config.tls) {
    return grpc.ServerCredentials.createInsecure();
  }
  const { cert, key, clientCa } = config.tls;
  return grpc.ServerCredentials.createSsl(clientCa, [{ cert_chain: cert, private_key: key }], clientCa !== null);
}

/**
 * SIGTERM and SIGINT always end the process: the graceful shutdown runs (below), and should it
 * not finish within the deadline — SHUTDOWN_GRACE_MS plus max(10 s, 2 × CANCEL_GRACE_MS) after
 * the first signal, max(10 s, 2 × CANCEL_GRACE_MS) after a second one — the process exits with
 * status 1 all the same. The timers do not keep the process alive.
 */
function exitDeadline(config: AppConfig): void {
  const closeMs = Math.max(10_000, 2 * config.runs.cancelGraceMs);
  let signals = 0;
  const arm = (signal: NodeJS.Signals) => {
    const deadlineMs = (signals++ === 0 ? config.runs.shutdownGraceMs : 0) + closeMs;
    setTimeout(() => {
      process.stderr.write(`runner-host: shutdown after ${signal} did not finish in ${deadlineMs} ms; exiting\n`);
      process.exit(1);
    }, deadlineMs).unref();
  };
  process.on('SIGTERM', arm);
  process.on('SIGINT', arm);
}

/**
 * SIGTERM / SIGINT start the graceful shutdown (docs/deployment.md#graceful-shutdown); a second
 * one cuts its grace short. The process exits 0 once it is over.
 */
function gracefulShutdown(app: NestFastifyApplication, config: AppConfig, logger: JsonLogger): void {
  const shutdown = new GracefulShutdown(
    {
      registry: app.get(ProcessRegistry),
      runs: app.get(RunsDrain),
      runners: app.get(RunnerConnections),
      webhooks: app.get(WebhookWorker),
      close: () => app.close(),
      log: (level, msg) => logger[level](msg),
    },
    config.runs.shutdownGraceMs,
  );
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      void shutdown.signal(signal).then(() => process.exit(0));
    });
  }
}

/** Nest's shutdown hooks for the other signals (SIGTERM and SIGINT drain first: gracefulShutdown). */
const OTHER_SHUTDOWN_SIGNALS = ['SIGHUP', 'SIGQUIT', 'SIGUSR2'];

/** Module-level: the lock lives as long as the process. */
let databaseLock: DatabaseLock | null = null;

async function bootstrap(): Promise<void> {
  const config = configOrExit();
  databaseLock = lockDatabaseOrExit(config);
  process.once('exit', () => databaseLock?.release());
  // The logger is set before anything boots, so every line (TypeORM's connection retries
  // included) is one JSON line.
  const logger = new JsonLogger(config.logLevel);
  if (tracingRequested()) {
    telemetry.tracing.start({ instance: config.instanceId });
  }
  if (config.metrics) {
    // Before the services are built: they register their scrape-time gauges in their constructors.
    telemetry.enableMetrics({ instance: config.instanceId });
  }
  const app = await NestFactory.create<NestFastifyApplication>(HostModule.forRoot(config), createHttpAdapter(config), {
    logger,
    bodyParser: false, // the adapter registers the API's own body parsers
  });
  app.useGlobalPipes(validationPipe());
  app.enableShutdownHooks(OTHER_SHUTDOWN_SIGNALS);
  exitDeadline(config);
  gracefulShutdown(app, config, logger);

  setupOpenApi(app);

  // Indexing the descriptors for reflection takes a while: done now, not when the gRPC server
  // starts, after the workers (webhooks, dispatcher) are already running on this event loop.
  const reflection = new ReflectionService(loadSync(protoPath(), LOADER_OPTIONS));
  let grpcServer: grpc.Server | null = null;
  app.connectMicroservice<MicroserviceOptions>(
    {
      transport: Transport.GRPC,
      options: {
        url: `${config.grpc.host}:${config.grpc.port}`,
        package: ['runnerhost.v1', 'grpc.health.v1'],
        protoPath: protoPath(),
        loader: LOADER_OPTIONS,
        credentials: grpcCredentials(config),
        // Above every host-API limit, so that the guard (not grpc-js) refuses and audits a request
        // a little over it; malformed requests become INVALID_ARGUMENT, not INTERNAL.
        maxReceiveMessageLength: grpcMessageLimit(config),
        maxSendMessageLength: grpcMessageLimit(config),
        // Server reflection (grpc.reflection.v1 and v1alpha) over the same .proto files, so that
        // grpcurl and other tools list and call the services without them (docs/observability.md).
        // The host API and the Connect stream are served by grpc-js handlers directly, without the
        // RPC layer per call or per message (docs/protocol.md#host-api, #connecting-a-plugin).
        onLoadPackageDefinition: (pkg: PackageDefinition, server: grpc.Server) => {
          grpcServer = server;
          decodeResultsDirectly(pkg);
          tolerateMalformedRequests(pkg);
          encodeHostMessagesDirectly(pkg);
          serveConnect(pkg, server, app.get(ConnectSessionHandler));
          serveHostApi(pkg, server, app.get(HostApiGrpc));
          reflection.addToServer(server);
        },
        // Handed to grpc.Server as they are (Nest's type knows only channel options).
        channelOptions: grpcServerOptions(config) as never,
      },
    },
    { inheritAppConfig: true },
  );
  await app.init();
  await app.startAllMicroservices();
  app.get(GrpcServerState).listening = true;
  await app.listen(config.http.port, config.http.host);
  // The ports the listeners got (PORT=0 / GRPC_PORT=0 pick free ones): what the registry advertises.
  const httpPort = (app.getHttpServer().address() as AddressInfo).port;
  let grpcPort = grpcServer ? boundGrpcPort(grpcServer) : null;
  if (grpcPort === null && config.grpc.port !== 0) {
    grpcPort = config.grpc.port;
  }
  if (grpcPort === null) {
    logger.error('GRPC_PORT=0: the bound gRPC port could not be read; host_processes keeps advertising port 0');
  } else {
    await app.get(ProcessRegistry).advertise({ http: httpPort, grpc: grpcPort });
  }
  const scheme = config.tls ? 'https' : 'http';
  logger.log(
    `runner-host listening: ${scheme} ${config.http.host}:${httpPort}, grpc${config.tls ? ' (tls)' : ''} ${config.grpc.host}:${grpcPort ?? config.grpc.port}, database ${config.database.type}`,
  );
}

void bootstrap();
